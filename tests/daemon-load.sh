#!/usr/bin/env bash
# Description: 16 concurrent client processes x 20 greedy requests each (1..5 in flight per client, 10 prompts) against a real allm-engined all get exactly their solo allm-run ids; again under memory pressure (--gpu-blocks 24 --cpu-blocks 8) where the engine must preempt; both daemons stop with exit 0 and every block free.
. "$(dirname "$0")/daemon-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
[ -x "$LOAD" ] || { echo "FAIL: $LOAD not built"; exit 1; }

expected_ids 24 0 "${PROMPTS[@]}" >"$tmp/expect" || exit 1

# run_clients NAME N: N load clients at once; each must pass
run_clients() {
	local name=$1 n=$2 k pids=() bad=0
	for k in $(seq 0 $((n - 1))); do
		posix=
		[ $((k % 4)) -eq 3 ] && posix=--posix
		"$LOAD" --name "$name" --expect "$tmp/expect" --client "$k" --requests 20 \
			--max-tokens 24 $posix >"$tmp/c$k.out" 2>"$tmp/c$k.err" &
		pids+=($!)
	done
	for k in $(seq 0 $((n - 1))); do
		wait "${pids[$k]}" || { bad=$((bad + 1)); head -n 8 "$tmp/c$k.err"; }
	done
	return $bad
}

daemon_start load
run_clients load 16 && ok "16 clients x 20 requests: all ids match" ||
	fail "16 clients x 20 requests: $? clients failed"
daemon_stop "load"

daemon_start tight --gpu-blocks 24 --cpu-blocks 8
run_clients tight 16 && ok "memory pressure: 16 clients x 20 requests: all ids match" ||
	fail "memory pressure: $? clients failed"
daemon_stop "memory pressure"
n=$(cat "$tmp"/c*.out | awk '/ preemptions,/ { s += $(NF - 3) } END { print s + 0 }')
[ "$n" -gt 0 ] && ok "memory pressure: $n preemptions happened (and outputs still match)" ||
	fail "memory pressure: no request was preempted: the test does not test preemption"
finish
