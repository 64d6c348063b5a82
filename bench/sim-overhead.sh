#!/usr/bin/env bash
# The scheduler's own cost per step at 256-1024 running requests, measured on the
# simulated device (nothing else here reaches that batch): allm-run --workload on
# sim:h200 with --dummy llama-7b and a pool that holds max_num_seqs requests, the
# host's work per step = the run's time minus the time spent in the simulated
# device (scheduling, batch building, sampling bookkeeping), in this thread's CPU
# time (what a loaded machine does not inflate) and in wall time.
# Writes bench/results/sim/overhead/overhead-SEQS.json, sim-overhead.{json,md}.
# Usage: bench/sim-overhead.sh    environment: SEQS="256 512 1024" PROFILE=h200
#   MODEL=llama-7b OUT=128
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)
ALLM_RUN=$BUILD_DIR/tools/allm-run
[ -x "$ALLM_RUN" ] || { echo "$ALLM_RUN is not built" >&2; exit 1; }
SEQS=${SEQS:-256 512 1024}
PROFILE=${PROFILE:-h200}
MODEL=${MODEL:-llama-7b}
OUT=${OUT:-128}
RES=$BENCH_DIR/results/sim/overhead
mkdir -p "$RES"
echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC') sim-overhead: load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/runs.txt"
for s in $SEQS; do
	echo "== max_num_seqs $s: $((3 * s)) requests on sim:$PROFILE, --dummy $MODEL" >&2
	# 3 x max_num_seqs chat requests at t = 0; the pool holds max_num_seqs of them (<= 10 blocks each)
	OPENBLAS_NUM_THREADS=1 "$ALLM_RUN" --dummy "$MODEL" --device "sim:$PROFILE" --gpu-blocks $((11 * s + 256)) \
		--cpu-blocks 2048 --max-num-seqs "$s" --max-num-batched-tokens 8192 --profile "$RES/profile-$MODEL.json" \
		--workload chatbot -n $((3 * s)) --max-output "$OUT" --temperature 0 --ignore-eos --json \
		>"$RES/overhead-$s.json" 2>"$RES/overhead-$s.err"
done
python3 "$BENCH_DIR/sim-tables.py" overhead "$RES" $SEQS >"$RES/sim-overhead.md"
cat "$RES/sim-overhead.md"
