#!/usr/bin/env bash
# Description: 20 allm clients streaming long generations (--ignore-eos --max-tokens 400) are SIGKILLed mid-stream; the engine reaps them and cancels their requests (nothing left running at SIGTERM with --shutdown-timeout 0), a new client still gets allm-run's exact ids, and SIGTERM then exits 0 with both KV pools fully free, no socket and no /dev/shm objects left; once with memfd segments, once with --shm posix under memory pressure (names gone while the clients are still connected).
. "$(dirname "$0")/daemon-common.sh"
CTL=$BUILD_DIR/ctl/allmctl
[ -x "$CTL" ] || { echo "FAIL: $CTL not built"; exit 1; }

expected_ids 60 0 "Once upon a time" >"$tmp/expect" || exit 1
want=$(cut -f3 "$tmp/expect")

run_mode() {
	local mode=$1 name=kill-$1
	shift
	daemon_start "$name" "$@"
	local pids=() i
	for i in $(seq 0 19); do
		"$ALLM" --name "$name" generate --prompt "${PROMPTS[$((i % 6))]}" --ignore-eos \
			--max-tokens 400 --temperature 0 >"$tmp/out$i" 2>"$tmp/err$i" &
		pids+=($!)
		BG_PIDS+=($!)
	done
	# wait until every client has streamed some text (or 5 s)
	local n_out=0
	for _ in $(seq 200); do
		n_out=0
		for i in $(seq 0 19); do
			[ -s "$tmp/out$i" ] && n_out=$((n_out + 1))
		done
		[ $n_out -eq 20 ] && break
		sleep 0.025
	done
	if [ "$mode" = posix ]; then
		local named
		named=$(ls /dev/shm 2>/dev/null | grep -c "^allm-$DPID-")
		[ "$named" -eq 0 ] && ok "$mode: segment names unlinked once the clients mapped them" ||
			fail "$mode: $named /dev/shm/allm-$DPID-* names while clients are connected"
		# let the memory pressure preempt some of them, and no longer: a fixed 0.2 s let
		# a fast engine finish 11 of the 20 first
		for _ in $(seq 250); do
			"$CTL" --name "$name" requests 2>/dev/null | awk 'NR > 1 && $10 > 0 { f = 1 } END { exit !f }' && break
			sleep 0.02
		done
	fi
	kill -9 "${pids[@]}" 2>/dev/null
	local killed=0 rc
	for i in $(seq 0 19); do
		wait "${pids[$i]}" 2>/dev/null
		rc=$?
		[ $rc -eq 137 ] && [ -s "$tmp/out$i" ] && killed=$((killed + 1))
	done
	BG_PIDS=()
	[ $killed -ge 10 ] && ok "$mode: $killed of 20 clients killed mid-stream ($n_out had output)" ||
		fail "$mode: only $killed of 20 clients were killed mid-stream; the test is too slow"
	daemon_alive && ok "$mode: the daemon survived" || fail "$mode: the daemon died"
	# the engine saw every lease end and reaped (cancelled) what those clients had
	local gone=0
	for _ in $(seq 200); do
		gone=$(grep -c "debug: client [0-9]* gone" "$DLOG")
		[ "$gone" -ge 20 ] && break
		sleep 0.025
	done
	[ "$gone" -ge 20 ] && ok "$mode: the engine reaped all 20 killed clients" ||
		fail "$mode: the engine reaped only $gone of the 20 killed clients"
	got=$("$ALLM" --name "$name" generate --prompt "Once upon a time" --max-tokens 60 \
		--temperature 0 --ids 2>"$tmp/new.err" | grep '^generated:')
	[ "$got" = "generated: $want" ] && ok "$mode: a new client gets allm-run's ids" ||
		fail "$mode: new client: got '$got' want '$want' $(cat "$tmp/new.err")"
	daemon_stop "$mode"
	# --shutdown-timeout 0: had the killed clients' requests still been running, the
	# engine would have had to cut them short at SIGTERM
	grep -q "shutdown timeout" "$DLOG" && fail "$mode: requests of killed clients were still running" ||
		ok "$mode: nothing of the killed clients was left running"
	grep -q "clients served: 21$" "$DLOG" && ok "$mode: 21 clients served" ||
		fail "$mode: $(grep 'clients served' "$DLOG")"
}

run_mode memfd --log-level debug --shutdown-timeout 0
run_mode posix --log-level debug --shutdown-timeout 0 --shm posix --gpu-blocks 128 --cpu-blocks 64
finish
