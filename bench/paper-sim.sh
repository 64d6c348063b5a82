#!/usr/bin/env bash
# The paper's table at paper scale, on the simulated device (DESIGN §11): the
# a800-pcie profile (the paper's card), --dummy opt-13b and llama-13b, 1000
# requests per workload at t = 0, max output 64/128/256, preempt adaptive /
# recompute / swap under fair, and fair vs fcfs (adaptive, max output 128); the
# paper's headline ranges beside ours; gnuplot figures per model.
# Runs allm-run --workload in-process (the same engine and numbers as allm-bench
# through allm-engined on a simulated device, tests/sim-device.sh; 3x faster here).
# Writes bench/results/sim/PROFILE/dummy-MODEL/paper-sim/*.json, fig3-throughput.*,
# and bench/results/sim/PROFILE/paper-sim.{md,json}.
# Usage: bench/paper-sim.sh      environment: PROFILES="a800-pcie h100-sxm" (or h200,
#   FILE.json) MODELS="opt-13b llama-13b" N=1000 WORKLOADS OUTPUTS JOBS=2
#   GPU_BLOCKS=128 CPU_BLOCKS=64 BLOCK_SIZE=16 SEED=1 CHUNKED=on
#   DISK=GiB (a simulated disk KV tier of that size: results in dummy-MODEL-diskGiB/)
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)
ALLM_RUN=$BUILD_DIR/tools/allm-run
[ -x "$ALLM_RUN" ] || { echo "$ALLM_RUN is not built (meson setup build && ninja -C build)" >&2; exit 1; }
PROFILES=${PROFILES:-a800-pcie h100-sxm}
MODELS=${MODELS:-opt-13b llama-13b}
N=${N:-1000}
WORKLOADS=${WORKLOADS:-chatbot alpaca summary}
OUTPUTS=${OUTPUTS:-64 128 256}
JOBS=${JOBS:-2}
GPU_BLOCKS=${GPU_BLOCKS:-128} CPU_BLOCKS=${CPU_BLOCKS:-64} BLOCK_SIZE=${BLOCK_SIZE:-16}
SEED=${SEED:-1} CHUNKED=${CHUNKED:-on} DISK=${DISK:-}
mid=$(echo $OUTPUTS | awk '{ print $(int((NF + 1) / 2)) }')
t0=$(date +%s)
for prof in $PROFILES; do
	tag=$(basename "$prof" .json)
	root=$BENCH_DIR/results/sim/$tag
	jobs_file=$(mktemp)
	suffix=${DISK:+-disk$DISK}
	for m in $MODELS; do
		res=$root/dummy-$m$suffix
		mkdir -p "$res/paper-sim"
		{
			echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
			echo "host: $(uname -srm)"
			echo "model: --dummy $m, device: sim:$prof (simulated), blocks: GPU $GPU_BLOCKS / CPU $CPU_BLOCKS x $BLOCK_SIZE tokens${DISK:+ + disk $DISK GiB}, N=$N, seed $SEED, all at t = 0, chunked prefill $CHUNKED"
			echo "build: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
		} >"$res/machine.txt"
		ARGS=(--dummy "$m" --device "sim:$prof" --gpu-blocks "$GPU_BLOCKS" --cpu-blocks "$CPU_BLOCKS"
			--block-size "$BLOCK_SIZE" --chunked-prefill "$CHUNKED" --profile "$res/profile.json"
			-n "$N" --temperature 0 --ignore-eos --seed "$SEED" --json)
		if [ -n "$DISK" ]; then ARGS+=(--disk-swap-space "$DISK" --disk-swap-dir "${TMPDIR:-/tmp}"); fi
		# the first run calibrates the predictors of this model on this device (deterministic)
		[ -f "$res/profile.json" ] || "$ALLM_RUN" "${ARGS[@]}" --workload chatbot --max-output 8 >/dev/null 2>&1
		for wl in $WORKLOADS; do
			for out in $OUTPUTS; do
				for p in adaptive recompute swap; do
					echo "$ALLM_RUN ${ARGS[*]} --workload $wl --max-output $out --preempt $p >$res/paper-sim/$wl-$out-$p.json 2>$res/paper-sim/$wl-$out-$p.err"
				done
			done
			echo "$ALLM_RUN ${ARGS[*]} --workload $wl --max-output $mid --preempt adaptive --sched fcfs >$res/paper-sim/$wl-fcfs.json 2>$res/paper-sim/$wl-fcfs.err"
		done >>"$jobs_file"
	done
	echo "== sim:$prof: $(wc -l <"$jobs_file") runs of $N requests, $JOBS at a time" >&2
	xargs -P "$JOBS" -I{} sh -c '{} || echo "failed: {}" >&2' <"$jobs_file"
	rm -f "$jobs_file"
	dirs=$(for m in $MODELS; do echo dummy-$m$suffix; done)
	python3 "$BENCH_DIR/sim-tables.py" paper "$root" "$prof" $dirs -- $WORKLOADS -- $OUTPUTS >"$root/paper-sim$suffix.md"
	for m in $MODELS; do bash "$BENCH_DIR/plots.sh" "$root/dummy-$m$suffix" || true; done
	cat "$root/paper-sim$suffix.md"
done
echo "paper-sim: $(($(date +%s) - t0)) s" >&2
