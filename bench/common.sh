# Sourced by the bench/ scripts (not run): where the programs and the results are,
# which model and machine, and the allm-bench flags every figure shares.
# shellcheck shell=bash
#
# Environment (all optional):
#   BUILD_DIR   meson build dir with tools/allm-bench (default: build)
#   MODEL       model flags, e.g. "--dummy small" or "--dummy llama-7b"
#               (default: --model data/models/stories260K)
#   DEVICE      cpu (default) or cuda
#   KIND        results subfolder (default: cpu, or gpu with DEVICE=cuda)
#   RESULTS     where to write (default: bench/results/KIND/MODEL_TAG)
#   GPU_BLOCKS CPU_BLOCKS BLOCK_SIZE   the paper's 128 / 64 / 16
#   N           requests per run (default 200 on cpu, 1000 on cuda: the paper's)
#   SEED        workload seed (default 1)
#   THREADS     --threads for the cpu backend (default: the engine's)
#   RATE        Poisson arrivals per second (default: all requests at t = 0, offline)

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)
ALLM_BENCH=$BUILD_DIR/tools/allm-bench
ALLM_RUN=$BUILD_DIR/tools/allm-run
for b in "$ALLM_BENCH" "$ALLM_RUN"; do
	[ -x "$b" ] || { echo "$b is not built (meson setup build && ninja -C build)" >&2; exit 1; }
done

DEVICE=${DEVICE:-cpu}
MODEL=${MODEL:---model $ROOT/data/models/stories260K}
read -r -a MODEL_ARGS <<<"$MODEL"
# "--dummy small" -> dummy-small; "--model DIR" -> the directory's name
case "${MODEL_ARGS[0]}" in
--dummy) MODEL_TAG=dummy-${MODEL_ARGS[1]} ;;
*) MODEL_TAG=$(basename "${MODEL_ARGS[1]}") ;;
esac
if [ "$DEVICE" = cuda ]; then KIND=${KIND:-gpu}; N=${N:-1000}; else KIND=${KIND:-cpu}; N=${N:-200}; fi
RESULTS=${RESULTS:-$BENCH_DIR/results/$KIND/$MODEL_TAG}
GPU_BLOCKS=${GPU_BLOCKS:-128}
CPU_BLOCKS=${CPU_BLOCKS:-64}
BLOCK_SIZE=${BLOCK_SIZE:-16}
SEED=${SEED:-1}
mkdir -p "$RESULTS"
# one predictor profile per model and machine: calibrated by the first engine,
# loaded by every later one (start-up work is not in any measured number)
PROFILE=$RESULTS/profile.json

# The engine flags of the paper setting (DESIGN §11), greedy, EOS ignored so that
# every request generates exactly its max output.
ENGINE_ARGS=("${MODEL_ARGS[@]}" --device "$DEVICE" --gpu-blocks "$GPU_BLOCKS"
	--cpu-blocks "$CPU_BLOCKS" --block-size "$BLOCK_SIZE" --profile "$PROFILE")
if [ -n "${THREADS:-}" ]; then ENGINE_ARGS+=(--threads "$THREADS"); fi
SAMPLING=(--temperature 0 --ignore-eos --seed "$SEED")
# The paper's engine (its figures): prefill-only steps, fair without admission
# headroom or aging. Our defaults are measured against it in sched-quality.sh.
PAPER_ARGS=(--chunked-prefill off --admit-lookahead 0 --max-wait-factor 0)
if [ -n "${RATE:-}" ]; then SAMPLING+=(--rate "$RATE"); fi

# bench FILE [allm-bench flags...]: one allm-bench run with ENGINE_ARGS, its JSON
# into FILE; a failed run stops the script.
bench() {
	local f=$1
	shift
	"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "$@" --json --no-progress >"$f" ||
		{ echo "$(basename "$0" .sh): allm-bench failed for $f" >&2; exit 1; }
}

# machine_note SCRIPT: what ran it (machine.txt, rewritten) and when, under which
# load (runs.txt, appended: the machine may be shared, and the load explains noise)
machine_note() {
	{
		echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "host: $(uname -srm)"
		lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|L3|Hypervisor)' || true
		echo "memory: $(free -g 2>/dev/null | awk '/^Mem:/ { print $2 " GiB" }')"
		echo "model: $MODEL, device: $DEVICE, blocks: GPU $GPU_BLOCKS / CPU $CPU_BLOCKS x $BLOCK_SIZE tokens, N=$N, seed $SEED, rate ${RATE:-all at t = 0}"
		echo "build: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	} >"$RESULTS/machine.txt"
	echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC') $1 N=$N: load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS/runs.txt"
}
