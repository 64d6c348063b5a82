#!/usr/bin/env bash
# Description: a flood of silent connections (issue 13 item 2) against an engine with few file descriptors (ulimit -n 256, --max-clients 1000 asked): the engine lowers its client limit to what its fds allow and says so, pauses its listener at the limit (it stays idle instead of spinning on accept: CPU ticks counted, not timed), closes connections that do not finish their handshake within --handshake-timeout, keeps answering allmctl (libzmq never runs out of fds) and serves a normal client once the flood is gone.
. "$(dirname "$0")/daemon-common.sh"
PEER=$BUILD_DIR/tests/daemon-peer
CTL=$BUILD_DIR/ctl/allmctl
[ -x "$PEER" ] && [ -x "$CTL" ] || { echo "FAIL: daemon-peer or allmctl not built"; exit 1; }

expected_ids 8 0 "1,403,407,261,378" >"$tmp/expect" || exit 1
want=$(cut -f3 "$tmp/expect")

# soft and hard: the engine cannot raise it (the flood shares it, ~250 connections)
ulimit -n 256
daemon_start fds --max-clients 1000 --handshake-timeout 1 --log-level debug
log_has -E "only 256 file descriptors \(ulimit -n\): serving at most [0-9]+ clients, not 1000" &&
	ok "the engine fits --max-clients to its fds and says so" ||
	fail "no line about lowering --max-clients: $(grep -i 'file desc' "$DLOG")"

"$PEER" --socket "$ALLM_RUNTIME_DIR/fds.sock" flood 1000 4 >"$tmp/flood.out" 2>&1 &
flood=$!
BG_PIDS+=($flood)
for i in $(seq 200); do grep -q '^connected' "$tmp/flood.out" && break; sleep 0.02; done
sleep 0.5
# CPU ticks (utime + stime, 1/100 s) the engine spends in 1 s of flood: a paused
# listener costs ~0; the loop spinning on a pending accept costs ~100
ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
t0=$(ticks)
sleep 1
t1=$(ticks)
spent=$((t1 - t0))
[ "$spent" -lt 30 ] && ok "flooded: the engine used $spent CPU ticks in 1 s (idle, not spinning)" ||
	fail "flooded: the engine used $spent of 100 CPU ticks in 1 s: it spins"
"$CTL" --name fds --timeout 5000 status >"$tmp/status.out" 2>&1 &&
	ok "flooded: allmctl status answers" || fail "flooded: allmctl status: $(cat "$tmp/status.out")"
daemon_alive && ok "flooded: the engine is up" || { fail "flooded: the engine died"; tail -n 5 "$DLOG"; }
wait $flood
cat "$tmp/flood.out" | sed 's/^/  flood: /'
closed=$(sed -n 's/^closed \([0-9]*\) of.*/\1/p' "$tmp/flood.out")
[ "${closed:-0}" -gt 0 ] && ok "silent connections are closed by the handshake timeout ($closed)" ||
	fail "no silent connection was closed by the engine"
log_has "at the client limit" && ok "the engine logged that it reached its client limit" ||
	fail "no 'at the client limit' line"
log_has "did not finish the handshake within 1.0 s" && ok "the engine logged the timed-out handshakes" ||
	fail "no handshake-timeout line"
got=
for i in $(seq 100); do
	got=$("$ALLM" --name fds generate --prompt-ids 1,403,407,261,378 --max-tokens 8 --temperature 0 \
		--ids 2>"$tmp/n.err" | sed -n 's/^generated: //p')
	[ -n "$got" ] && break
	sleep 0.1
done
[ "$got" = "$want" ] && ok "after the flood: a client is served with its exact ids" ||
	fail "after the flood: got '$got' ($(cat "$tmp/n.err"))"
daemon_stop "fds"
finish
