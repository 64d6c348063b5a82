#!/usr/bin/env bash
# Description: shutdown has one deadline for everything (issue 13 item 5): a client that stops draining its completion queue (its requests already failed, the engine idle but holding its backlog) no longer keeps the daemon alive: SIGTERM with --shutdown-timeout 1 ends it, and with --shutdown-timeout 3600 a second SIGTERM ends it at once; both exit 0 with every KV block free.
. "$(dirname "$0")/daemon-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
[ -x "$LOAD" ] || { echo "FAIL: $LOAD not built"; exit 1; }
expected_ids 24 0 "${PROMPTS[@]:0:2}" >"$tmp/expect" || exit 1

# stalled_client NAME: a client that submits 50 long requests and never drains;
# returns once the engine has failed them (it is then idle, with a backlog)
stalled_client() {
	"$LOAD" --name "$1" --expect "$tmp/expect" --stall 50 --max-tokens 400 >"$tmp/$1.out" 2>&1 &
	BG_PIDS+=($!)
	local i
	for i in $(seq 400); do
		grep -q "stopped draining its completion queue" "$DLOG" && return 0
		sleep 0.05
	done
	fail "$1: the client never stalled"
}

# exits_by WHAT: the daemon exits (0) without anyone draining; 30 s at most
exits_by() {
	local i
	for i in $(seq 600); do
		daemon_alive || break
		sleep 0.05
	done
	if daemon_alive; then
		fail "$1: the daemon is still up 30 s later (a non-draining client holds it)"
		kill -9 "$DPID"
	else
		ok "$1: the daemon exited with the client still not draining"
	fi
	wait "$DPID"
	local rc=$?
	[ $rc -eq 0 ] && ok "$1: exit status 0" || fail "$1: exit status $rc"
	daemon_check_clean "$1"
	DPID=
}

daemon_start shut1 --shutdown-timeout 1
stalled_client shut1
kill -TERM "$DPID"
exits_by "SIGTERM, --shutdown-timeout 1"
grep -q "shutdown deadline: cancelling what clients have not read" "$DLOG" &&
	ok "the engine logged the deadline" || fail "no 'shutdown deadline' line"

daemon_start shut2 --shutdown-timeout 3600
stalled_client shut2
kill -TERM "$DPID"
sleep 0.5
daemon_alive && ok "one SIGTERM, deadline 3600 s: still delivering" || fail "exited before its deadline"
kill -TERM "$DPID"
exits_by "a second SIGTERM"
grep -q "second signal: cancelling what is left and exiting now" "$DLOG" &&
	ok "the engine logged the second signal" || fail "no 'second signal' line"
finish
