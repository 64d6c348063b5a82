#!/usr/bin/env bash
# Description: allmctl top in a detached 120x40 tmux pane against a real allm-engined under load with little KV memory: every panel drawn, uptime and token counts move between captures, block bars and swap/recompute decision lines appear, p/s/G change the engine (checked with allmctl status --json), space freezes the view, resizes to 80x24, 200x50 and 30x8 keep it drawing, q and SIGTERM exit 0 with the tty modes restored.
#
# TOP_CAPTURE=FILE saves one 120x40 capture under load (bench/results/top-capture.txt),
# TOP_CAPTURE_WAIT=S seconds after the sparkline first shows (more history in it).
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux is not installed"; exit 77; }
. "$(dirname "$0")/daemon-common.sh"

CTL=$BUILD_DIR/ctl/allmctl
LOAD=$BUILD_DIR/tests/daemon-client-load
for b in "$CTL" "$LOAD"; do
	[ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

# A private tmux server: nothing of the user's sessions is touched or read.
TS=$tmp/tmux.sock
tm() { tmux -S "$TS" "$@"; }
trap 'tm kill-server 2>/dev/null; cleanup' EXIT
export LANG=C.UTF-8 LC_ALL=C.UTF-8

S=top # the session cap and wait_for read
cap() { tm capture-pane -p -t "$S" 2>/dev/null; }
# wait_for PATTERN [TRIES of 0.1 s]: until a capture matches (extended regex)
wait_for() {
	local i
	for i in $(seq "${2:-100}"); do
		cap | grep -Eq -- "$1" && return 0
		sleep 0.1
	done
	return 1
}
# wait_gone PATTERN [TRIES of 0.1 s]: until a capture no longer matches (a redraw
# on a loaded machine can take longer than any fixed sleep)
wait_gone() {
	local i
	for i in $(seq "${2:-50}"); do
		cap | grep -Eq -- "$1" || return 0
		sleep 0.1
	done
	return 1
}
status_json() { "$CTL" --name top --timeout 2000 --json status 2>/dev/null; }
policy() { status_json | grep -o "\"$1\": *\"[a-z]*\"" | head -n 1 | grep -o '"[a-z]*"$' | tr -d '"'; }

# The pane's shell prints a marker before allmctl and the tty modes after it.
tm -u new-session -d -s top -x 120 -y 40 \
	"echo BEFORE-TOP; '$CTL' --name top top; echo \"top exited rc=\$?\"; stty -a | tr ';' '\n' | grep -Eo -- '-?icanon|-?echo\b' | tr '\n' ' '; echo; sleep 60"
tm set-option -t top window-size manual >/dev/null 2>&1

# Before the engine exists the dashboard waits for it instead of exiting.
wait_for 'waiting for engine top\.\.\.' 50 && ok "no engine yet: waiting for engine top..." ||
	fail "no waiting line: $(cap | head -n 3)"

daemon_start top --gpu-blocks 24 --cpu-blocks 8 --preempt adaptive --sched fair

# Load: 4 clients, 4 in flight each, long outputs so sequences outgrow 24 GPU blocks.
printf 'T\tOnce upon a time\t1\nT\tThe little dog\t1\nT\tLily and Ben went to the park\t1\n' >"$tmp/expect"
for k in $(seq 0 3); do
	"$LOAD" --name top --expect "$tmp/expect" --client "$k" --requests 100000 --inflight 4 \
		--max-tokens 160 --ignore-eos --no-check --timeout 120 >/dev/null 2>&1 &
	BG_PIDS+=($!)
done

# --- panels ---------------------------------------------------------------------
wait_for 'Decisions' 100 && ok "dashboard drawn" || { fail "no dashboard: $(cap | head -n 5)"; finish; }
for t in 'allmctl top  top' 'Queues' 'KV blocks' 'Throughput' 'Latency' 'Preemptions' \
	'Predictor error' 'Decisions' 'Clients'; do
	cap | grep -q -- "$t" && ok "panel '$t'" || fail "panel '$t' missing"
done
# A decision line: request, length, both predictions, the choice, measured (or ...), reason
# ("~" before it: taken on the first estimate, before the predictors were calibrated).
declre=' [0-9]+ +[0-9]+ +[0-9.-]+ +[0-9.-]+ (swap|recompute) +([0-9.]+|\.\.\.)  ~?[a-z]'
wait_for "$declre" 150 && ok "decision log has swap/recompute lines" ||
	fail "no decision line after 15 s: $(status_json | grep -A2 '"preemptions"' | tr -d '\n ')"
c1=$(cap)
sleep 1.5
c2=$(cap)
up1=$(grep -o 'up [0-9:]*' <<<"$c1")
up2=$(grep -o 'up [0-9:]*' <<<"$c2")
[ -n "$up1" ] && [ "$up1" != "$up2" ] && ok "uptime moves ($up1 -> $up2)" ||
	fail "uptime did not move: '$up1' '$up2'"
tok1=$(grep -o 'tokens [0-9]*+[0-9]*' <<<"$c1")
tok2=$(grep -o 'tokens [0-9]*+[0-9]*' <<<"$c2")
[ -n "$tok1" ] && [ "$tok1" != "$tok2" ] && ok "token counts move ($tok1 -> $tok2)" ||
	fail "token counts did not move: '$tok1' '$tok2'"
grep -Eq 'now [0-9.]+ tok/s' <<<"$c2" && ! grep -q 'now 0.0 tok/s' <<<"$c2" &&
	ok "throughput: $(grep -Eo 'now [0-9.]+ tok/s' <<<"$c2")" || fail "no throughput under load"
grep -Eq 'GPU \[[█▉▊▋▌▍▎▏░]+\] [0-9]+/24 ' <<<"$c2" && grep -Eq 'CPU \[[█▉▊▋▌▍▎▏░]+\] [0-9]+/8 ' <<<"$c2" &&
	ok "block bars" || fail "no block bars: $(grep -E 'GPU|CPU' <<<"$c2")"
wait_for '[▁▂▃▄▅▆▇█]{5,} +max [0-9]+' 50 && ok "sparkline" || fail "no sparkline"
if [ -n "${TOP_CAPTURE:-}" ]; then
	sleep "${TOP_CAPTURE_WAIT:-0}"
	cap >"$TOP_CAPTURE"
fi
grep -Eq 'swap [0-9]+  recompute [0-9]+  total [1-9]' <<<"$c2" && ok "preemption counts" ||
	fail "no preemption counts: $(grep 'total' <<<"$c2")"

# --- keys -> set ----------------------------------------------------------------
[ "$(policy preempt)" = adaptive ] || fail "preempt is not adaptive at start"
tm send-keys -t top p
wait_for 'preempt "adaptive" -> "recompute"' 30 && ok "p: status line shows the reply" ||
	fail "p: no reply shown: $(cap | tail -n 1)"
[ "$(policy preempt)" = recompute ] && ok "p: engine preempt policy is recompute" ||
	fail "p: engine says preempt=$(policy preempt)"
wait_for 'preempt recompute  sched' 30 && ok "p: header shows recompute" || fail "p: header not updated"
tm send-keys -t top s
wait_for 'sched "fair" -> "fcfs"' 30 && [ "$(policy sched)" = fcfs ] &&
	ok "s: engine scheduler is fcfs" || fail "s: engine says sched=$(policy sched)"
tm send-keys -t top G
wait_for 'gpu_blocks 24 -> 26' 30 && wait_for 'GPU \[.*\] [0-9]+/26 ' 30 &&
	ok "G: GPU pool 24 -> 26 blocks" || fail "G: $(cap | tail -n 1)"

# --- pause: data keeps coming, the view does not move -----------------------------
tm send-keys -t top Space
wait_for 'PAUSED' 20 && ok "space: PAUSED shown" || fail "space: no PAUSED"
p1=$(cap | sed 1d)
sleep 0.6
p2=$(cap | sed 1d)
[ "$p1" = "$p2" ] && ok "paused view is frozen" || fail "paused view changed"
tm send-keys -t top Space
wait_gone PAUSED && ok "space again resumes" || fail "still PAUSED after the second space"
tm send-keys -t top '?'
wait_for 'cycle preemption' 20 && ok "? shows the help" || fail "no help overlay"
tm send-keys -t top x
wait_gone 'cycle preemption' && ok "any key closes the help" || fail "help did not close"

# --- resize ---------------------------------------------------------------------
# Each size is polled for up to 5 s: on a loaded machine the redraw after a
# resize can take longer than any fixed wait (a capture 0.5 s after going back to
# 120x40 once still showed the 30x8 frame).
for size in 80x24 200x50 30x8 120x40; do
	tm resize-window -t top -x "${size%x*}" -y "${size#*x}"
	for i in $(seq 50); do
		sleep 0.1
		c=$(cap)
		rows=$(wc -l <<<"$c")
		w=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' <<<"$c")
		miss=
		if [ "$size" = 30x8 ]; then
			grep -q 'allmctl top' <<<"$c" || miss=" 'allmctl top'"
		else
			for t in Queues 'KV blocks' Throughput Latency Preemptions 'Predictor error' Decisions Clients; do
				grep -q -- "$t" <<<"$c" || miss="$miss '$t'"
			done
		fi
		[ -z "$miss" ] && [ "$rows" -eq "${size#*x}" ] && break
	done
	if [ "$size" = 30x8 ]; then
		[ -z "$miss" ] && [ "$rows" -eq 8 ] && ok "$size: still drawing" || fail "$size: ($rows rows) $c"
		continue
	fi
	[ -z "$miss" ] && [ "$rows" -eq "${size#*x}" ] && ok "$size: every panel, $rows rows" ||
		fail "$size: missing$miss ($rows rows, $w cols)"
done

# --- --once: one frame as text, for scripts; status 3 when no engine answers ---------
once=$("$CTL" --name top top --once --cols 100 --rows 30)
[ "$(wc -l <<<"$once")" -eq 30 ] && grep -q Decisions <<<"$once" && ok "--once prints a 100x30 frame" ||
	fail "--once: $(head -n 3 <<<"$once")"
"$CTL" --name nosuch --timeout 300 top --once >/dev/null 2>&1
rc=$?
[ $rc -eq 3 ] && ok "--once without an engine: status 3" || fail "--once without an engine: status $rc"

# --- quit restores the terminal -----------------------------------------------------
tm send-keys -t top q
wait_for 'icanon' 50
c=$(cap)
grep -q 'top exited rc=0' <<<"$c" && ok "q: exit status 0" || fail "q: $(grep 'top exited' <<<"$c")"
grep -q BEFORE-TOP <<<"$c" && ! grep -q 'Queues' <<<"$c" && ok "q: the screen is restored" ||
	fail "q: dashboard left on screen"
grep -Eq '(^| )icanon echo' <<<"$c" && ok "q: tty modes restored" ||
	fail "q: tty modes: $(tail -n 3 <<<"$c")"

# SIGTERM ends it the same way (a second session first: the server exits with its last).
tm -u new-session -d -s top2 -x 100 -y 30 \
	"'$CTL' --name top top; echo \"top exited rc=\$?\"; stty -a | tr ';' '\n' | grep -Eo -- '-?icanon|-?echo\b' | tr '\n' ' '; echo; sleep 60"
tm kill-session -t top
S=top2
wait_for 'Decisions' 50 || fail "second dashboard did not start"
pid=$(pgrep -f "^$CTL --name top top" | head -n 1)
[ -n "$pid" ] && kill -TERM "$pid"
wait_for 'icanon' 50
c=$(cap)
grep -q 'top exited rc=0' <<<"$c" && grep -Eq '(^| )icanon echo' <<<"$c" &&
	ok "SIGTERM: exit 0, tty restored" || fail "SIGTERM: $c"

# The load clients go first: a draining engine would wait for their endless requests.
kill "${BG_PIDS[@]}" 2>/dev/null
wait "${BG_PIDS[@]}" 2>/dev/null
BG_PIDS=()
daemon_stop "top"
finish
