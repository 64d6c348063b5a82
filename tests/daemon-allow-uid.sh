#!/usr/bin/env bash
# Description: --allow-uid works and admits nobody else (issue 13 item 8), with two real uids: an engine run by root with --allow-uid 65534 serves a client of uid 65534 (memfd and --shm posix engines, exact ids) that names it with ALLM_ENGINE_UID, refuses uid 1 at accept with a clear message, still serves root, and lets the other uid reach but not list its directory; without --allow-uid the other uid cannot connect. Needs root: skipped otherwise.
. "$(dirname "$0")/daemon-common.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run a second uid"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) missing"; exit 77; }
NOBODY=65534
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"; }
chmod 711 "$tmp" # the runtime directory lies in here
other_uid_tree clientlib/allm # the clone itself may be closed to uid $NOBODY

expected_ids 16 0 "1,403,407,261,378" >"$tmp/expect" || exit 1
want=$(cut -f3 "$tmp/expect")
# gen UID NAME: generated ids of a request by UID (stderr in $tmp/gen.err)
gen() {
	as "$1" env ALLM_ENGINE_UID=0 ALLM_RUNTIME_DIR="$ALLM_RUNTIME_DIR" "$OTHER_BUILD/clientlib/allm" --name "$2" generate \
		--prompt-ids 1,403,407,261,378 --max-tokens 16 --temperature 0 --ids 2>"$tmp/gen.err" |
		sed -n 's/^generated: //p'
}

for mode in memfd posix; do
	daemon_start "au-$mode" --allow-uid $NOBODY --shm $mode --log-level debug
	got=$(gen $NOBODY "au-$mode")
	[ "$got" = "$want" ] && ok "$mode: uid $NOBODY (--allow-uid) is served its exact ids" ||
		fail "$mode: uid $NOBODY got '$got': $(cat "$tmp/gen.err")"
	got=$(gen 0 "au-$mode")
	[ "$got" = "$want" ] && ok "$mode: root (the engine's uid) is still served" || fail "$mode: root got '$got'"
	got=$(gen 1 "au-$mode")
	[ -z "$got" ] && grep -q "permission denied: uid not allowed" "$tmp/gen.err" &&
		ok "$mode: uid 1 is refused: $(cat "$tmp/gen.err")" || fail "$mode: uid 1: '$got' $(cat "$tmp/gen.err")"
	log_has "uid 1 is not allowed (--allow-uid)" && ok "$mode: the engine logged the refusal" ||
		fail "$mode: no refusal line in the log"
	if [ $mode = memfd ]; then
		as $NOBODY ls "$ALLM_RUNTIME_DIR" >/dev/null 2>&1 && fail "uid $NOBODY can list the runtime directory" ||
			ok "uid $NOBODY cannot list the runtime directory ($(stat -c %a "$ALLM_RUNTIME_DIR"))"
	fi
	daemon_stop "$mode"
done

daemon_start au-none
got=$(gen $NOBODY au-none)
[ -z "$got" ] && grep -q "Permission denied" "$tmp/gen.err" &&
	ok "without --allow-uid: uid $NOBODY cannot connect ($(cat "$tmp/gen.err"))" ||
	fail "without --allow-uid: uid $NOBODY: '$got' $(cat "$tmp/gen.err")"
daemon_stop "no --allow-uid"
finish
