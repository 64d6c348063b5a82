#!/usr/bin/env bash
# Description: a client's requests are found through its own list, all of them (issue 13 item 3): client A keeps 60 long requests queued ahead (--max-num-seqs 4), client B queues 20 behind them and is killed with SIGKILL; every one of B's requests leaves the engine's queues (allmctl requests lists only A's), none generates for nobody (the engine's generated tokens are exactly A's), and A's 60 all run to their full length.
. "$(dirname "$0")/daemon-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
CTL=$BUILD_DIR/ctl/allmctl
[ -x "$LOAD" ] && [ -x "$CTL" ] || { echo "FAIL: daemon-client-load or allmctl not built"; exit 1; }

expected_ids 8 0 "1,403,407,261,378" >"$tmp/expect" || exit 1
daemon_start orphans --max-num-seqs 4

# clients_of: "CLIENT COUNT" lines of the requests in the engine's queues
clients_of() {
	"$CTL" --name orphans requests --limit 10000 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { n[$2]++ } END { for (c in n) print c, n[c] }'
}
# A's requests are not waited for by count: the first of them may finish before
# the last is submitted, so the test waits for most of them and then for B's,
# which queue behind every one of A's still waiting (older ones go first).
# A's queue has to outlast B's queueing, kill and check (measured 2026-11-29, 2 cores
# at load 11: 4.5 s under ASan, 0.5 s plain), and all of A then runs to its end: 60
# requests of 400 tokens last ~14 s under ASan, ~2 s plain, quiet (150 took 35 s).
A_N=60
"$LOAD" --name orphans --expect "$tmp/expect" --client 0 --requests $A_N --inflight $A_N \
	--max-tokens 400 --ignore-eos --no-check --timeout 300 >"$tmp/a.out" 2>"$tmp/a.err" &
a=$!
BG_PIDS+=($a)
for i in $(seq 200); do
	[ "$(clients_of | awk '{ s += $2 } END { print s + 0 }')" -ge $((A_N * 2 / 3)) ] && break
	sleep 0.05
done
a_id=$(clients_of | awk '{ print $1 }')
[ -n "$a_id" ] && ok "client A ($a_id) has its requests queued" || fail "client A's requests are not queued"
"$LOAD" --name orphans --expect "$tmp/expect" --client 1 --requests 20 --inflight 20 \
	--max-tokens 400 --ignore-eos --no-check --timeout 300 >"$tmp/b.out" 2>"$tmp/b.err" &
b=$!
BG_PIDS+=($b)
b_n=0
for i in $(seq 200); do
	b_n=$(clients_of | awk -v a="$a_id" '$1 != a { s += $2 } END { print s + 0 }')
	[ "$b_n" -ge 20 ] && break
	sleep 0.05
done
[ "$b_n" -eq 20 ] && ok "client B has its 20 requests queued behind A's" || fail "client B has $b_n requests queued"
kill -9 $b
wait $b 2>/dev/null
left=20
for i in $(seq 100); do
	left=$(clients_of | awk -v a="$a_id" '$1 != a { s += $2 } END { print s + 0 }')
	[ "$left" -eq 0 ] && break
	sleep 0.05
done
[ "$left" -eq 0 ] && ok "B killed: none of its 20 requests is left in the engine's queues" ||
	fail "B killed: $left of its requests are still queued (they would generate for nobody)"
# A was not touched: every one of its requests ends by length with its 400 tokens
# (daemon-client-load fails a request that ends any other way or short).
if wait $a; then
	ok "A served to the end: $(tail -n 1 "$tmp/a.out")"
else
	fail "A's requests were not all served: $(cat "$tmp/a.out" "$tmp/a.err")"
fi
BG_PIDS=()
grep -q "^client 0: $A_N/$A_N ok, $((A_N * 400)) tokens" "$tmp/a.out" ||
	fail "A's summary is not $A_N/$A_N requests with $((A_N * 400)) tokens: $(cat "$tmp/a.out")"
gen=$("$CTL" --name orphans --json status | python3 -c 'import json, sys; print(json.load(sys.stdin)["tokens"]["generated"])')
[ "$gen" = $((A_N * 400)) ] && ok "the engine generated exactly A's $gen tokens (none for B)" ||
	fail "the engine generated $gen tokens, A's are $((A_N * 400))"
daemon_stop "orphans"
finish
