#!/usr/bin/env bash
# Description: runs daemon-hostile (malformed SQEs, corrupt rings, garbage/partial/silent hellos over the real socket) against a real allm-engined while a normal client keeps working; the daemon never crashes and, SIGTERMed with hostile connections still open, exits 0 with every KV block free, no socket and no /dev/shm objects left.
. "$(dirname "$0")/daemon-common.sh"
HOSTILE=$BUILD_DIR/tests/daemon-hostile
[ -x "$HOSTILE" ] || { echo "FAIL: $HOSTILE not built"; exit 1; }

expected_ids 24 0 "1,403,407,261,378" >"$tmp/expect" || exit 1
daemon_start hostile --log-level debug
"$HOSTILE" --name hostile --runtime-dir "$ALLM_RUNTIME_DIR" --expect "$tmp/expect" --daemon-pid "$DPID"
rc=$?
[ $rc -eq 0 ] && ok "daemon-hostile passed" || fail "daemon-hostile exited $rc"
daemon_stop "hostile" # daemon-hostile sent the SIGTERM
grep -q "corrupt submission ring" "$DLOG" && ok "the engine logged the corrupt submission ring" ||
	fail "no 'corrupt submission ring' line in the log"
grep -q "corrupt completion ring" "$DLOG" && ok "the engine logged the corrupt completion ring" ||
	fail "no 'corrupt completion ring' line in the log"
if [ $fails -gt 0 ]; then
	echo "--- engine log (last 30 lines)"
	tr '\r' '\n' <"$DLOG" | grep -v calibrating | tail -n 30
fi
finish
