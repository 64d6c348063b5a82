#!/usr/bin/env bash
# Description: a client's requests are found through its own list, all of them (issue 13 item 3): client A keeps 1000 long requests queued ahead (--max-num-seqs 4), client B queues 20 behind them and is killed with SIGKILL; every one of B's requests leaves the engine's queues (allmctl requests lists only A's), none generates for nobody, and A keeps being served.
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
"$LOAD" --name orphans --expect "$tmp/expect" --client 0 --requests 1000 --inflight 1000 \
	--max-tokens 400 --ignore-eos --no-check --timeout 300 >"$tmp/a.out" 2>"$tmp/a.err" &
a=$!
BG_PIDS+=($a)
for i in $(seq 200); do
	[ "$(clients_of | awk '{ s += $2 } END { print s + 0 }')" -ge 1000 ] && break
	sleep 0.05
done
a_id=$(clients_of | awk '{ print $1 }')
[ -n "$a_id" ] && ok "client A ($a_id) has its 1000 requests queued" || fail "client A's requests are not queued"
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
a_n=$(clients_of | awk -v a="$a_id" '$1 == a { print $2 }')
[ "${a_n:-0}" -ge 900 ] && kill -0 $a && ok "A's requests are untouched ($a_n queued, A connected)" ||
	fail "A's requests: ${a_n:-0} left"
kill $a
wait $a 2>/dev/null
BG_PIDS=()
daemon_stop "orphans"
finish
