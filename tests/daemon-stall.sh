#!/usr/bin/env bash
# Description: a client that submits 50 long requests and never drains its completion queue is isolated: 4 other clients x 20 requests running meanwhile finish with their exact ids, the engine logs that the stalled client's requests were failed, every one of them ends with an error FINAL (also 50 more it submits while still stalled), what it finally drains is bounded, and once it drains it is served normally again; a client with 3000 requests, more FINALs than the backlog holds, still gets every FINAL. Asserted by progress, not timing (bench/stall-rate.sh measures the rate).
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

# More requests than the backlog has room for FINALs (issue 13): 3000 requests of a
# client that stops draining are all failed; the FINALs that do not fit the backlog
# wait in their requests until it drains, so every request still gets exactly one.
"$LOAD" --name stall --expect "$tmp/expect" --stall 3000 --resubmit 20 --max-tokens 400 --cq-entries 16384 \
	>"$tmp/many.out" 2>"$tmp/many.err" &
many_pid=$!
BG_PIDS+=($many_pid)
wait_for "$tmp/many.out" '^submitted 3000' 30 || { fail "the 3000-request client did not submit"; cat "$tmp/many.err"; }
n_before=$(grep -c 'stopped draining its completion queue' "$DLOG")
for i in $(seq 400); do
	[ "$(grep -c 'stopped draining its completion queue' "$DLOG")" -gt "$n_before" ] && break
	sleep 0.05
done
kill -USR1 $many_pid
wait_for "$tmp/many.out" '^resubmitted 20' 30 || fail "the 3000-request client did not resubmit"
sleep 0.3
kill -USR1 $many_pid
wait $many_pid
rc=$?
sed 's/^/  3000-request client: /' "$tmp/many.out"
[ $rc -eq 0 ] && ok "3000 requests of a stalled client: every one got exactly one FINAL (none dropped)" ||
	{ fail "3000-request stalled client exited $rc"; grep -m 5 FAIL "$tmp/many.err"; }

daemon_stop "stall"
finish
