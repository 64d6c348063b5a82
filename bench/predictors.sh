#!/usr/bin/env bash
# Predicted vs measured preemption costs (paper Fig. 5, Tables 5-6; issue 53).
# allm-run --workload --decisions logs every preemption with both predictions and,
# once the chosen action ran, its measured time; forcing each policy measures each
# kind (swap: swap out + in; recompute: the prefill that rebuilt the KV), and
# adaptive shows what the cost model chose; with PROBE=1 adaptive also times the path
# it did not take (--probe-regret), so regret is counted. Preemptions come from memory
# pressure (the pools below), never forced. REPS repetitions alternate the policies
# run by run (adaptive, swap, recompute, adaptive, ...). Each run's JSON keeps the
# step and copy models' rolling error (predictor_mape: every prefill step and copy)
# and the decisions' own (decision_mape: the chosen path's prediction against its
# cost). Writes RESULTS/predictors.json, .md, fig5-*.dat and the logs.
# Usage: bench/predictors.sh   (environment: bench/common.sh, plus WORKLOAD=summary
# OUT_LEN=256 REPS=1 PROBE=0 CALIBRATE=1: long prompts give a wide range of lengths)
. "$(dirname "$0")/common.sh"
WORKLOAD=${WORKLOAD:-summary}
OUT_LEN=${OUT_LEN:-256}
REPS=${REPS:-1}
PROBE=${PROBE:-0}
machine_note predictors
mkdir -p "$RESULTS/predictors"
# the paper's predictors are calibrated before serving: the first run times the grid
# and saves the profile (common.sh's PROFILE), every later one loads it; CALIBRATE=0
# measures the first estimate learning online instead
[ "${CALIBRATE:-1}" = 1 ] && ENGINE_ARGS+=(--calibrate-at-start)
rm -f "$RESULTS"/predictors/run-*.json "$RESULTS"/predictors/decisions-*.jsonl
for rep in $(seq 1 "$REPS"); do
	for p in adaptive swap recompute; do
		extra=()
		[ "$PROBE" = 1 ] && [ "$p" = adaptive ] && extra=(--probe-regret)
		sfx=$p
		[ "$REPS" -gt 1 ] && sfx=$p-r$rep
		echo "== rep $rep: decisions under --preempt $p ($WORKLOAD, max output $OUT_LEN, $N requests)," \
			"load $(cut -d' ' -f1 /proc/loadavg)" >&2
		echo "$(date -u '+%H:%M:%S') rep $rep $p: load average $(cut -d' ' -f1-3 /proc/loadavg)" \
			>>"$RESULTS/runs.txt"
		"$ALLM_RUN" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" --workload "$WORKLOAD" -n "$N" --max-output "$OUT_LEN" \
			"${SAMPLING[@]}" --preempt "$p" "${extra[@]}" \
			--decisions "$RESULTS/predictors/decisions-$sfx.jsonl" \
			--json >"$RESULTS/predictors/run-$sfx.json" 2>/dev/null
	done
done
python3 "$BENCH_DIR/tables.py" predictors "$RESULTS" >"$RESULTS/predictors.md"
cat "$RESULTS/predictors.md"
