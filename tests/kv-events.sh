#!/usr/bin/env bash
# Description: KV cache events in vLLM's format (DESIGN §14): a real allm-engined with --kv-events-endpoint on loopback, read by kv-events.py (pyzmq + msgspec decoding vLLM's published schema): stored on fill, moved down the tiers on eviction, removed, cleared on cache reset; hashes chain by parent; a gap is replayed from the buffer, an older one by a snapshot; hostile replay requests change nothing; a bad endpoint is refused at start.
. "$(dirname "$0")/daemon-common.sh"
. "$(dirname "$0")/venv-common.sh"
CTL=$BUILD_DIR/ctl/allmctl
venv_need msgspec pyzmq

# a bad endpoint: one clear error, no engine
for ep in "ipc://@abstract" "ipc://relative/x" "ipc:///" "tcp://127.0.0.1" "tcp://127.0.0.1:65535" "tcp://:80" \
	"tcp://0.0.0.0:5557" "tcp://*:5557" "tcp://localhost:5557"; do
	if "$ENGINED" --name bad --model "$M" --kv-events-endpoint "$ep" >"$tmp/bad.log" 2>&1; then
		fail "--kv-events-endpoint $ep accepted"
	elif grep -q -- "--kv-events-endpoint" "$tmp/bad.log"; then
		ok "--kv-events-endpoint $ep refused: $(head -n 1 "$tmp/bad.log")"
	else
		fail "--kv-events-endpoint $ep: $(cat "$tmp/bad.log")"
	fi
done

PORT=$(free_port_pair)
# 24 device blocks and 16 host blocks: a dozen prompts of 64 ids push blocks down
# and out; the test hook keeps 8 batches for replay, so a longer gap needs a snapshot
ALLM_KV_EVENTS_TEST_RING=8 daemon_start kv --gpu-blocks 24 --cpu-blocks 16 \
	--kv-events-endpoint "tcp://127.0.0.1:$PORT"
log_has "KV events on tcp://127.0.0.1:$PORT (replay tcp://127.0.0.1:$((PORT + 1))" &&
	ok "the engine says where its KV events are" || fail "no KV events line in the log: $(tail -n 5 "$DLOG")"
ALLM=$ALLM CTL=$CTL NAME=kv PORT=$PORT "$PY" "$(dirname "$0")/kv-events.py" || fails=$((fails + 1))
"$ALLM" --name kv generate --prompt-ids 1,2,3 --max-tokens 2 --temperature 0 >/dev/null ||
	fail "the engine stopped serving"
daemon_stop kv
finish
