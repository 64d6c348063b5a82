#!/usr/bin/env bash
# The simulator's proof: the same workloads on the real CPU backend and on the
# simulated device with the cpu-local profile (fitted on this machine by
# allm-sim-fit first, unless REFIT=0), side by side with the error of each metric:
# throughput, mean weighted turnaround, p50/p99 TTFT and TPOT, preemptions by kind.
# Settings: the paper's 128/64 blocks, preempt adaptive/recompute/swap under fair,
# and adaptive under fcfs; every real row REPS times (median; the spread is the
# noise), the simulation once (it is deterministic).
# On a shared machine other processes take part of the CPU: one backend thread
# (THREADS=1) and op costs fitted in thread CPU time (FIT_CLOCK=cpu) keep the
# profile free of that, and each real run's CPU time over its wall time (the share
# it got) is recorded, so the table shows the error against the wall clock and
# against the run's time had it had its core to itself.
# Writes RESULTS/sim-validate.json and .md (RESULTS: bench/results/sim-validate/MODEL).
# Usage: bench/sim-validate.sh     environment: see bench/common.sh, plus
#   WORKLOADS="chatbot alpaca summary" OUT=128 N=500 REPS=3 REFIT=1 THREADS=1
#   FIT_CLOCK=cpu SETTINGS="adaptive/fair recompute/fair swap/fair adaptive/fcfs"
#   DISK=GiB: both sides with a disk KV tier of that size (the real one under
#   DISK_DIR, default /var/tmp; the simulated one timed by the fitted drive);
#   results in RESULTS-diskGiB
KIND=${KIND:-sim-validate}
# 500 requests: on this machine 100 of stories260K take 0.3 s, and runs that short
# spread by +-10 % between identical commands (start-up, a few slow steps); at 500
# (1.5 s) the three runs of a row agree within +-1-5 %
N=${N:-500}
THREADS=${THREADS:-1}
FIT_CLOCK=${FIT_CLOCK:-$([ "$THREADS" = 1 ] && echo cpu || echo wall)}
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-chatbot alpaca summary}
OUT=${OUT:-128}
REPS=${REPS:-3}
REFIT=${REFIT:-1}
SETTINGS=${SETTINGS:-adaptive/fair recompute/fair swap/fair adaptive/fcfs}
FIT=$BUILD_DIR/tools/allm-sim-fit
DISK=${DISK:-} DISK_DIR=${DISK_DIR:-/var/tmp}
if [ -n "$DISK" ]; then RESULTS=$RESULTS-disk$DISK; fi
mkdir -p "$RESULTS"
machine_note sim-validate
# timed FILE CMD...: runs CMD, writes its wall and CPU seconds to FILE (JSON)
timed() {
	python3 -c 'import json, resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[2:]).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"wall_s": time.monotonic() - t, "user_s": u.ru_utime, "sys_s": u.ru_stime}, open(sys.argv[1], "w"))
sys.exit(r)' "$@"
}
mkdir -p "$RESULTS/runs"
t0=$(date +%s)
# the common flags without --device and --profile: each side has its own
ARGS=("${MODEL_ARGS[@]}" --gpu-blocks "$GPU_BLOCKS" --cpu-blocks "$CPU_BLOCKS" --block-size "$BLOCK_SIZE"
	--threads "$THREADS")
if [ -n "$DISK" ]; then ARGS+=(--disk-swap-space "$DISK" --disk-swap-dir "$DISK_DIR"); fi
if [ "$REFIT" = 1 ]; then
	echo "== fitting cpu-local on this machine (allm-sim-fit)" >&2
	"$FIT" --threads "$THREADS" --clock "$FIT_CLOCK" "${MODEL_ARGS[@]}" --quiet --out "$RESULTS/cpu-local.json"
	# the engine's own host work per step on this machine (scheduling, batch
	# building: the same code on either device), measured on the simulated device,
	# is what the real CPU also spends between forwards
	"$ALLM_RUN" "${ARGS[@]}" --device "sim:$RESULTS/cpu-local.json" --profile "$RESULTS/profile-host.json" \
		--workload chatbot -n "$N" --max-output "$OUT" "${SAMPLING[@]}" --json >"$RESULTS/host-step.json" 2>/dev/null
	python3 - "$RESULTS" <<'PY'
import json, sys
r = sys.argv[1]
host = json.load(open(r + "/host-step.json"))["simulated"]["host_cpu_per_step_ms"] / 1e3
p = json.load(open(r + "/cpu-local.json"))
p["host_step"] = {"value": host, "source": "measured: the engine's host CPU time per step on this machine "
                  "(allm-run on the simulated device, chatbot; bench/sim-validate.sh)"}
json.dump(p, open(r + "/cpu-local.json", "w"), indent=2)
PY
	SIM_DEVICE=sim:$RESULTS/cpu-local.json
else
	SIM_DEVICE=sim:cpu-local
fi
echo "$SIM_DEVICE" >"$RESULTS/sim-device.txt"
rm -f "$RESULTS/profile-sim.json" # the sim's predictors: calibrated on this profile
for wl in $WORKLOADS; do
	for s in $SETTINGS; do
		p=${s%/*} sc=${s#*/} tag=$wl-${s/\//-}
		RUNARGS=(--workload "$wl" -n "$N" --max-output "$OUT" "${SAMPLING[@]}" --preempt "$p" --sched "$sc" --json)
		for r in $(seq "$REPS"); do
			echo "== $wl $p/$sc: real cpu, run $r of $REPS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
			timed "$RESULTS/runs/real-$tag-$r.time" "$ALLM_RUN" "${ARGS[@]}" --device cpu --profile "$RESULTS/profile-cpu.json" "${RUNARGS[@]}" \
				>"$RESULTS/runs/real-$tag-$r.json" 2>"$RESULTS/runs/real-$tag-$r.err"
			echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$RESULTS/runs/real-$tag-$r.load"
		done
		echo "== $wl $p/$sc: $SIM_DEVICE" >&2
		"$ALLM_RUN" "${ARGS[@]}" --device "$SIM_DEVICE" --profile "$RESULTS/profile-sim.json" "${RUNARGS[@]}" \
			>"$RESULTS/runs/sim-$tag.json" 2>"$RESULTS/runs/sim-$tag.err"
	done
done
echo "sim-validate: $(($(date +%s) - t0)) s" >&2
python3 "$BENCH_DIR/sim-tables.py" validate "$RESULTS" "$REPS" $WORKLOADS -- $SETTINGS >"$RESULTS/sim-validate.md"
bash "$BENCH_DIR/plots.sh" "$RESULTS" || true
cat "$RESULTS/sim-validate.md"
