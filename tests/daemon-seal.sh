#!/usr/bin/env bash
# Description: the segment mode is the engine's (issue 13 item 1): a client whose hello asks for POSIX mode from a memfd engine gets a sealed memfd it cannot truncate (and is served); under --shm posix a client that truncates its segment to 0 is disconnected, the engine logs why, keeps serving others with their exact ids and exits clean (before, either way, the engine died of SIGBUS).
. "$(dirname "$0")/daemon-common.sh"
PEER=$BUILD_DIR/tests/daemon-peer
[ -x "$PEER" ] || { echo "FAIL: $PEER not built"; exit 1; }

expected_ids 24 0 "1,403,407,261,378" >"$tmp/expect" || exit 1
want=$(cut -f3 "$tmp/expect")

# normal_client WHAT: a libadaptivellm client gets its exact ids
normal_client() {
	local got
	got=$("$ALLM" --name "$DNAME" generate --prompt-ids 1,403,407,261,378 --max-tokens 24 \
		--temperature 0 --ids 2>"$tmp/n.err" | sed -n 's/^generated: //p')
	[ "$got" = "$want" ] && ok "$1: another client gets its exact ids" ||
		fail "$1: another client got '$got' ($(cat "$tmp/n.err"))"
}

daemon_start seal
"$PEER" --socket "$ALLM_RUNTIME_DIR/seal.sock" truncate >"$tmp/memfd.out" 2>&1
cat "$tmp/memfd.out" | sed 's/^/  peer: /'
grep -qx "mode memfd" "$tmp/memfd.out" && ok "memfd engine: a hello asking for POSIX mode gets a memfd" ||
	fail "memfd engine: the client chose the segment mode"
grep -qx "sealed" "$tmp/memfd.out" && ok "memfd engine: ftruncate of the segment fails (sealed)" ||
	fail "memfd engine: the client could truncate its segment"
grep -qx "served" "$tmp/memfd.out" && daemon_alive && ok "memfd engine: the client is served, the engine is up" ||
	fail "memfd engine: not served or the engine died"
normal_client "memfd engine"
daemon_stop "memfd engine"

daemon_start seal-posix --shm posix
"$PEER" --socket "$ALLM_RUNTIME_DIR/seal-posix.sock" truncate >"$tmp/posix.out" 2>&1
cat "$tmp/posix.out" | sed 's/^/  peer: /'
grep -qx "mode posix" "$tmp/posix.out" && grep -qx truncated "$tmp/posix.out" &&
	ok "--shm posix: the client truncated its segment to 0" || fail "--shm posix: no truncation happened"
grep -qx "disconnected" "$tmp/posix.out" && ok "--shm posix: the engine disconnected that client" ||
	fail "--shm posix: the truncating client was not disconnected"
daemon_alive && ok "--shm posix: the engine survived the truncation (no SIGBUS)" ||
	{ fail "--shm posix: the engine died"; tail -n 5 "$DLOG"; }
log_has "truncated its shared-memory segment: disconnecting" &&
	ok "--shm posix: the engine logged why" || fail "--shm posix: no log line about the truncation"
daemon_alive && normal_client "--shm posix"
daemon_stop "--shm posix"
finish
