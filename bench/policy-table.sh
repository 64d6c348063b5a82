#!/usr/bin/env bash
# Side-by-side policy comparison on this machine (CPU backend) with allm-run's
# offline workload mode: adaptive vs recompute vs swap (throughput, preemptions),
# and fair vs fcfs (mean weighted turnaround), same workload and seed for all.
# Usage: bench/policy-table.sh [BUILD_DIR] [OUT_DIR]
#   MODEL="--model ../shared/models/stories260K"  (or "--dummy small")
#   GPU=16 CPU=8 N=64 OUT_LEN=48 WORKLOAD=chatbot SEQS="8 16 32 64 128"
set -euo pipefail
B=${1:-build}; OUT=${2:-bench/results/policy-$(date +%Y%m%d-%H%M%S)}
MODEL=${MODEL:---model ../shared/models/stories260K}
GPU=${GPU:-16}; CPU=${CPU:-8}; N=${N:-64}; OUT_LEN=${OUT_LEN:-48}; WORKLOAD=${WORKLOAD:-chatbot}
SEQS=${SEQS:-8 16 32 64 128}
mkdir -p "$OUT"
common=($MODEL --device cpu --workload "$WORKLOAD" -n "$N" --max-output "$OUT_LEN" --seed 1
        --temperature 0 --ignore-eos --json --profile "$OUT/profile.json")
# calibrate once, outside every measurement
"$B/tools/allm-run" "${common[@]}" -n 1 >/dev/null 2>&1
row() { python3 - "$@" <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); lab=sys.argv[2]
m=d['predictor_mape']; f=lambda x: '-' if x is None else '%.1f'%x
print('| %s | %.0f | %.0f | %.3f | %d | %d | %s | %s | %s |' % (lab, d['throughput_tok_s'],
  d['gen_throughput_tok_s'], d['mean_weighted_turnaround'], d['preemptions']['swap'],
  d['preemptions']['recompute'], f(m['swap']), f(m['recompute']), d['outputs_sha256'][:12]))
PY
}
echo "### $WORKLOAD, $N requests, max output $OUT_LEN, GPU blocks $GPU, CPU blocks $CPU ($MODEL)"
echo
echo "| setting | tok/s | gen tok/s | mean weighted turnaround | swaps | recomputes | MAPE swap % | MAPE recompute % | outputs |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in adaptive recompute swap; do
  "$B/tools/allm-run" "${common[@]}" --gpu-blocks "$GPU" --cpu-blocks "$CPU" --preempt "$p" \
    --decisions "$OUT/decisions-$p.jsonl" >"$OUT/preempt-$p.json" 2>/dev/null
  row "$OUT/preempt-$p.json" "preempt=$p"
done
echo
echo "| max_num_seqs | sched | tok/s | gen tok/s | mean weighted turnaround | swaps | recomputes | MAPE swap % | MAPE recompute % | outputs |" | sed 's/| sched |/| sched |/'
echo "|---|---|---|---|---|---|---|---|---|---|"
for s in $SEQS; do
  for sc in fair fcfs; do
    "$B/tools/allm-run" "${common[@]}" --gpu-blocks "$GPU" --cpu-blocks "$CPU" --sched "$sc" \
      --max-num-seqs "$s" >"$OUT/sched-$sc-$s.json" 2>/dev/null
    row "$OUT/sched-$sc-$s.json" "$s | $sc"
  done
done
