#!/usr/bin/env bash
# Description: the KV-events replay socket under a flood (issue 49 item 2): a real allm-engined, a cache with more batches than its replay ring keeps, then kv-events-flood.py: 200 peers asking for a snapshot build one, a peer's burst gets one replay at a time, more peers than slots are dropped_busy, peers that left are dropped_gone, every request is accounted for in status.kv_events.replay, and a victim is still served under a flood; the engine stays healthy.
. "$(dirname "$0")/daemon-common.sh"
. "$(dirname "$0")/venv-common.sh"
venv_need pyzmq
CTL=$BUILD_DIR/ctl/allmctl
PORT=$(free_port_pair)
ALLM_KV_EVENTS_TEST_RING=8 daemon_start flood --gpu-blocks 64 --cpu-blocks 64 \
	--kv-events-endpoint "tcp://127.0.0.1:$PORT"
ALLM=$ALLM CTL=$CTL NAME=flood PID=$DPID EP="tcp://127.0.0.1:$PORT" REPLAY="tcp://127.0.0.1:$((PORT + 1))" \
	"$PY" "$(dirname "$0")/kv-events-flood.py" || fails=$((fails + 1))
"$ALLM" --name flood generate --prompt-ids 1,2,3 --max-tokens 2 --temperature 0 >/dev/null ||
	fail "the engine stopped serving"
daemon_stop flood
finish
