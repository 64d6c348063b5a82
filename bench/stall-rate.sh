#!/usr/bin/env bash
# Aggregate token rate of K normal clients with and without one client that never
# drains its completion queue (DESIGN §8: a stalled client is isolated). Starts its
# own allm-engined on stories260K (CPU), then alternates REPS timed runs of each
# kind and prints the median rates and the slowdown (target: <= 10 %).
#   alone:      K daemon-client-load processes x R greedy requests (T tokens, --ignore-eos)
#   with stall: the same, started right after the stalled client has submitted
#               STALL_N requests of STALL_T tokens, so the window includes the engine
#               running them until their CQ + backlog (1024 + 4096 entries) overflow
#               and they are failed (the headline number)
#   stalled, after detection: started once the engine has logged the stall (the
#               steady state: what an isolated stalled client still costs)
# STALL_N * STALL_T must exceed ~5120 or the client never counts as stalled (its
# requests then simply run, like any client's). The transient cost is fixed (about
# 5120 tokens of extra work), so a short window (small R) shows a larger slowdown.
# Usage: bench/stall-rate.sh [BUILD_DIR]
#   K=4 R=100 T=64 REPS=3 STALL_N=50 STALL_T=400 MODEL_DIR=data/models/stories260K
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
K=${K:-4}; R=${R:-100}; T=${T:-64}; REPS=${REPS:-3}; STALL_N=${STALL_N:-50}; STALL_T=${STALL_T:-400}
M=${MODEL_DIR:-$(cd "$(dirname "$0")/../data/models/stories260K" && pwd)}
LOAD=$B/tests/daemon-client-load
for b in "$B/engined/allm-engined" "$B/tools/allm-run" "$LOAD"; do
	[ -x "$b" ] || { echo "$b not built" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-stall-bench.XXXXXX")
export ALLM_RUNTIME_DIR=$tmp/run
dpid=; spid=
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

prompts=("Once upon a time" "The little dog" "Lily and Ben went to the park" "One day, a big bear"
	"Tom had a red ball. He" "The sun was" "She was very happy because" "In a small house there lived")
for p in "${prompts[@]}"; do
	gen=$("$B/tools/allm-run" --model "$M" --device cpu --prompt "$p" --max-tokens "$T" \
		--temperature 0 --ignore-eos --ids 2>/dev/null | grep '^generated:')
	printf 'T\t%s\t%s\n' "$p" "${gen#generated: }"
done >"$tmp/expect"

"$B/engined/allm-engined" --name stallbench --model "$M" --device cpu \
	--profile "$tmp/profile.json" >"$tmp/engine.log" 2>&1 &
dpid=$!
for _ in $(seq 400); do [ -S "$ALLM_RUNTIME_DIR/stallbench.sock" ] && break; sleep 0.025; done
[ -S "$ALLM_RUNTIME_DIR/stallbench.sock" ] || { echo "the engine did not start" >&2; tail "$tmp/engine.log" >&2; exit 1; }

# one_run -> prints the aggregate tokens/s of the K clients
one_run() {
	local pids=() k t0 t1 tokens=0
	t0=$(date +%s.%N)
	for k in $(seq 0 $((K - 1))); do
		"$LOAD" --name stallbench --expect "$tmp/expect" --client "$k" --requests "$R" \
			--max-tokens "$T" --ignore-eos >"$tmp/c$k.out" 2>"$tmp/c$k.err" &
		pids+=($!)
	done
	for k in $(seq 0 $((K - 1))); do
		wait "${pids[$k]}" || { echo "client $k failed: $(head -n 3 "$tmp/c$k.err")" >&2; exit 1; }
	done
	t1=$(date +%s.%N)
	tokens=$(cat "$tmp"/c*.out | awk '/ tokens,/ { s += $(NF - 5) } END { print s }')
	awk -v n="$tokens" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", n / (b - a) }'
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

n_stalls() { grep -c 'stopped draining its completion queue' "$tmp/engine.log" || true; }

# stall_start: a client that submits and never drains; -> $spid
stall_start() {
	"$LOAD" --name stallbench --expect "$tmp/expect" --stall "$STALL_N" --max-tokens "$STALL_T" \
		>"$tmp/stall.out" 2>&1 &
	spid=$!
	for _ in $(seq 400); do grep -q '^submitted' "$tmp/stall.out" && break; sleep 0.01; done
}
stall_stop() {
	kill -9 "$spid"; wait "$spid" 2>/dev/null || true; spid=
	sleep 0.2 # the engine reaps it and cancels what is left
}

alone=(); stalled=(); steady=()
one_run >/dev/null # warm-up
for rep in $(seq "$REPS"); do
	alone+=("$(one_run)")
	stall_start
	stalled+=("$(one_run)")
	stall_stop
	before=$(n_stalls)
	stall_start
	for _ in $(seq 1000); do [ "$(n_stalls)" -gt "$before" ] && break; sleep 0.01; done
	steady+=("$(one_run)")
	stall_stop
done
a=$(echo "${alone[*]}" | median); s=$(echo "${stalled[*]}" | median); st=$(echo "${steady[*]}" | median)
echo "stall-rate: $K clients x $R requests x $T tokens; stalled client: $STALL_N x $STALL_T tokens, never drains"
echo "  alone:                    ${alone[*]} tok/s (median $a)"
echo "  with stall:               ${stalled[*]} tok/s (median $s)"
echo "  stalled, after detection: ${steady[*]} tok/s (median $st)"
echo "  stalled client detected and failed: $(n_stalls) of $((2 * REPS)) times"
awk -v a="$a" -v s="$s" -v t="$st" 'BEGIN { printf "  slowdown: %.1f %% (target <= 10 %%); after detection: %.1f %%\n", 100 * (a - s) / a, 100 * (a - t) / a }'
