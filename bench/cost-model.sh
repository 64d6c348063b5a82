#!/usr/bin/env bash
# Issue 53's tables: the cost model's error on stories260K, the 110M Llama
# (--dummy small) and SmolLM2 (Q4_1, tools/models.sh), chatbot prompts, preemptions
# from memory pressure (pools sized per model so every run preempts; nothing
# forced), REPS=3 repetitions alternating adaptive / swap / recompute, adaptive with
# --probe-regret. One bench/predictors.sh run per model into
# bench/results/cpu/MODEL/OUT/ (OUT: cost-model), then bench/cost-explain.py over
# them (what explains the error: RESULTS/explain.md). Run it under the bench lock:
#   flock /work/.bench.lock bash bench/cost-model.sh
# Environment: REPS (3), MODELS ("stories260K small smollm2"), OUT (cost-model).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-3}
for m in ${MODELS:-stories260K small smollm2}; do
	case $m in
	stories260K) model="--model $ROOT/data/models/stories260K" n=64 gpu=24 cpu=16 ;;
	small) model="--dummy small" n=24 gpu=40 cpu=20 ;;
	smollm2) model="--model $(bash "$ROOT/tools/models.sh" smollm2)" n=16 gpu=32 cpu=16 ;;
	*) echo "cost-model.sh: unknown model $m" >&2; exit 2 ;;
	esac
	tag=$m; [ "$m" = small ] && tag=dummy-small; [ "$m" = smollm2 ] && tag=SmolLM2-135M-Instruct.Q4_1.gguf
	MODEL=$model N=$n GPU_BLOCKS=$gpu CPU_BLOCKS=$cpu WORKLOAD=chatbot OUT_LEN=64 REPS=$REPS PROBE=1 \
		RESULTS=$ROOT/bench/results/cpu/$tag/${OUT:-cost-model} bash "$ROOT/bench/predictors.sh"
	python3 "$ROOT/bench/cost-explain.py" "$ROOT/bench/results/cpu/$tag/${OUT:-cost-model}/predictors" \
		>"$ROOT/bench/results/cpu/$tag/${OUT:-cost-model}/explain.md" && cat "$ROOT/bench/results/cpu/$tag/${OUT:-cost-model}/explain.md"
done
