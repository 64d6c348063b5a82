#!/usr/bin/env bash
# Description: a client that submits 50 long requests and never drains its completion queue is isolated: 4 other clients x 20 requests running meanwhile finish with their exact ids, the engine logs that the stalled client's requests were failed, every one of them ends with an error FINAL (also 50 more it submits while still stalled), what it finally drains is bounded, and once it drains it is served normally again. Asserted by progress, not timing (bench/stall-rate.sh measures the rate).
. "$(dirname "$0")/daemon-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
[ -x "$LOAD" ] || { echo "FAIL: $LOAD not built"; exit 1; }

expected_ids 24 0 "${PROMPTS[@]}" >"$tmp/expect" || exit 1

# wait_for FILE REGEX SECONDS
wait_for() {
	local i
	for i in $(seq $(($3 * 40))); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.025
	done
	return 1
}

daemon_start stall
"$LOAD" --name stall --expect "$tmp/expect" --stall 50 --max-tokens 400 >"$tmp/stall.out" 2>"$tmp/stall.err" &
stall_pid=$!
BG_PIDS+=($stall_pid)
wait_for "$tmp/stall.out" '^submitted 50' 10 || { fail "the stall client did not submit"; cat "$tmp/stall.err"; finish; }

pids=()
for k in 0 1 2 3; do
	"$LOAD" --name stall --expect "$tmp/expect" --client $k --requests 20 --max-tokens 24 \
		>"$tmp/c$k.out" 2>"$tmp/c$k.err" &
	pids+=($!)
done
bad=0
for k in 0 1 2 3; do
	wait "${pids[$k]}" || { bad=$((bad + 1)); head -n 8 "$tmp/c$k.err"; }
done
[ $bad -eq 0 ] && ok "4 clients x 20 requests beside a stalled client: all ids match" ||
	fail "$bad of 4 normal clients failed beside the stalled client"

wait_for "$DLOG" 'client [0-9]+ stopped draining its completion queue: failing its requests' 20 &&
	ok "the engine logged the stalled client's requests as failed" ||
	fail "no 'stopped draining' line in the engine log"

# a second wave while still not draining, then let it drain
kill -USR1 $stall_pid
wait_for "$tmp/stall.out" '^resubmitted 50' 10 || fail "the stall client did not resubmit"
sleep 0.3
kill -USR1 $stall_pid
wait $stall_pid
rc=$?
cat "$tmp/stall.out" | sed 's/^/  stall client: /'
[ $rc -eq 0 ] && ok "stalled client: every request got exactly one FINAL; served again after draining" ||
	{ fail "stalled client exited $rc"; head -n 10 "$tmp/stall.err"; }
line=$(grep '^drained:' "$tmp/stall.out")
events=$(echo "$line" | awk '{ print $2 }')
errs=$(echo "$line" | sed -nE 's/.* ([0-9]+) not-draining errors.*/\1/p')
lens=$(echo "$line" | sed -nE 's/.* ([0-9]+) length.*/\1/p')
# the CQ (1024 entries by default) plus the engine's hard backlog cap (4096 + 1024)
[ -n "$events" ] && [ "$events" -le $((1024 + 4096 + 1024)) ] &&
	ok "stalled client: $events events waited for it (bounded)" ||
	fail "stalled client: $events events waited for it: the backlog is not bounded"
[ "${errs:-0}" -ge 50 ] && ok "stalled client: $errs requests failed with 'not draining'" ||
	fail "stalled client: only ${errs:-0} 'not draining' errors"
[ "${lens:-1}" -eq 0 ] && ok "stalled client: none of its 100 requests ran to its length" ||
	fail "stalled client: ${lens:-?} of its requests ran to completion while it was not draining"

daemon_stop "stall"
finish
