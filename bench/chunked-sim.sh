#!/usr/bin/env bash
# Chunked prefill where it is meant to pay (issue 15): long prompts among chat
# requests, on a simulated GPU whose decode step is bound by reading the weights,
# so prefill tokens up to the ridge ride in it almost free. Poisson arrivals at
# LOADS x the capacity (fcfs's request rate with everything at t = 0), chunked
# prefill on vs off at several token budgets, fair, same outputs in every pair.
# The workload: N requests, LONG_PCT % with 1500-3000-token prompts, the rest
# 20-120 tokens, 128 output tokens each (generated here, seed 1, into a temporary
# file). Runs in simulated time: about half a minute.
# Writes RESULTS/chunked-sim/*.json and RESULTS/chunked-sim.md.
# Usage: bench/chunked-sim.sh   (environment: PROFILE_SIM=a800-pcie MODEL_SIM=llama-13b
#        N=300 LONG_PCT=15 LOADS="0.5 0.7 0.9" BUDGETS="2048 512 128 96" TABLES_ONLY=1)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ALLM_RUN=$BUILD_DIR/tools/allm-run
[ -x "$ALLM_RUN" ] || { echo "$ALLM_RUN is not built" >&2; exit 1; }
PROFILE_SIM=${PROFILE_SIM:-a800-pcie}
MODEL_SIM=${MODEL_SIM:-llama-13b}
N=${N:-300}
LONG_PCT=${LONG_PCT:-15}
LOADS=${LOADS:-0.5 0.7 0.9}
BUDGETS=${BUDGETS:-2048 512 128 96}
OUT=$ROOT/bench/results/sim/$PROFILE_SIM/chunked-sim
mkdir -p "$OUT"
WL=$(mktemp --suffix=.jsonl)
trap 'rm -f "$WL"' EXIT
S=(--dummy "$MODEL_SIM" --device "sim:$PROFILE_SIM" --gpu-blocks 2048 --cpu-blocks 512
	--max-num-seqs 64 --temperature 0 --ignore-eos --seed 1 --json --workload "$WL" -n "$N")
if [ -z "${TABLES_ONLY:-}" ]; then
	python3 - "$WL" "$N" "$LONG_PCT" <<'PY'
import json, random, sys
path, n, pct = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
r = random.Random(1)
with open(path, "w") as f:
    for _ in range(n):
        k = r.randint(1500, 3000) if r.random() < pct / 100 else r.randint(20, 120)
        f.write(json.dumps({"prompt_ids": [r.randint(3, 30000) for _ in range(k)], "max_tokens": 128}) + "\n")
PY
	echo "chunked-sim: $MODEL_SIM on sim:$PROFILE_SIM, $N requests ($LONG_PCT % long prompts)" >&2
	"$ALLM_RUN" "${S[@]}" --sched fcfs >"$OUT/capacity.json"
	cap=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['req_s'])" "$OUT/capacity.json")
	for x in $LOADS; do
		rate=$(python3 -c "print($cap * $x)")
		for b in $BUDGETS; do
			for c in on off; do
				echo "== ${x}x capacity ($rate req/s), budget $b, chunked prefill $c" >&2
				"$ALLM_RUN" "${S[@]}" --rate "$rate" --max-num-batched-tokens "$b" \
					--chunked-prefill "$c" >"$OUT/load$x-b$b-$c.json"
			done
		done
	done
fi
python3 - "$OUT" "$LOADS" "$BUDGETS" >"$OUT/../chunked-sim.md" <<'PY'
import json, sys
out, loads, budgets = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
cap = json.load(open(f"{out}/capacity.json"))["req_s"]
print(f"Capacity (fcfs, all at t = 0): {cap:.2f} req/s.\n")
print("| load | budget tok | tok/s on / off | p50 TPOT ms on / off | p99 TPOT ms on / off | p99 TPOT off/on | p50 TTFT ms on / off | p99 TTFT ms on / off | preemptions on / off | same outputs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for x in loads:
    for b in budgets:
        try:
            on, off = (json.load(open(f"{out}/load{x}-b{b}-{c}.json")) for c in ("on", "off"))
        except FileNotFoundError:
            continue
        pre = lambda r: r["preemptions"]["swap"] + r["preemptions"]["recompute"]
        print(f"| {x}x | {b} | {on['throughput_tok_s']:.0f} / {off['throughput_tok_s']:.0f} | "
              f"{on['tpot_ms']['p50']:.1f} / {off['tpot_ms']['p50']:.1f} | {on['tpot_ms']['p99']:.1f} / {off['tpot_ms']['p99']:.1f} | "
              f"{off['tpot_ms']['p99'] / on['tpot_ms']['p99']:.2f} | {on['ttft_ms']['p50']:.0f} / {off['ttft_ms']['p50']:.0f} | "
              f"{on['ttft_ms']['p99']:.0f} / {off['ttft_ms']['p99']:.0f} | {pre(on)} / {pre(off)} | "
              f"{'yes' if on['outputs_sha256'] == off['outputs_sha256'] else 'NO'} |")
PY
cat "$OUT/../chunked-sim.md"
