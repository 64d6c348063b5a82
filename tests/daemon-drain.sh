#!/usr/bin/env bash
# Description: SIGTERM with 16 long requests in flight (2 clients x 8, --ignore-eos, 200 tokens) drains them: every one ends with a normal FINAL (length, not cancelled) and exactly allm-run's ids, the socket disappears at once so new clients are refused, and the daemon exits 0 with every KV block free and no /dev/shm objects left; then the same with --shm posix.
. "$(dirname "$0")/daemon-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
[ -x "$LOAD" ] || { echo "FAIL: $LOAD not built"; exit 1; }

expected_ids 200 1 "${PROMPTS[@]:0:6}" >"$tmp/expect" || exit 1

run_mode() {
	local mode=$1 name=drain-$1
	shift
	daemon_start "$name" "$@"
	local pids=() k i out=$tmp/$mode
	# per mode: a background client truncates its output only once it runs, and
	# the previous mode's "streaming" lines must not stand in for this one's
	for k in 0 1; do
		"$LOAD" --name "$name" --expect "$tmp/expect" --client $k --requests 8 --inflight 8 \
			--max-tokens 200 --ignore-eos >"$out-c$k.out" 2>"$out-c$k.err" &
		pids+=($!)
		BG_PIDS+=($!)
	done
	for i in $(seq 400); do
		grep -qs streaming "$out-c0.out" && grep -qs streaming "$out-c1.out" && break
		sleep 0.025
	done
	kill -TERM "$DPID"
	local alive=0
	for k in 0 1; do
		kill -0 "${pids[$k]}" 2>/dev/null && alive=$((alive + 1))
	done
	[ $alive -gt 0 ] && ok "$mode: SIGTERM arrived with requests in flight" ||
		fail "$mode: both clients were done before SIGTERM: nothing was drained"
	for i in $(seq 200); do
		[ -e "$ALLM_RUNTIME_DIR/$name.sock" ] || break
		sleep 0.01
	done
	"$ALLM" --name "$name" generate --prompt "Once upon a time" --max-tokens 4 >/dev/null 2>"$tmp/late.err"
	rc=$?
	[ $rc -eq 1 ] && grep -q "cannot connect" "$tmp/late.err" &&
		ok "$mode: a client arriving while draining is refused" ||
		fail "$mode: a client arriving while draining: exit $rc: $(cat "$tmp/late.err")"
	local bad=0
	for k in 0 1; do
		wait "${pids[$k]}" || { bad=$((bad + 1)); head -n 8 "$out-c$k.err"; }
	done
	BG_PIDS=()
	[ $bad -eq 0 ] && ok "$mode: all 16 in-flight requests finished normally with their exact ids" ||
		fail "$mode: $bad clients saw a request cancelled, failed or wrong"
	log_has "finishing those in flight" && ok "$mode: the engine logged the drain" ||
		fail "$mode: no drain line in the log"
	daemon_stop "$mode" # already signalled: waits for the exit and checks it
}

run_mode memfd
run_mode posix --shm posix
finish
