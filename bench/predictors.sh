#!/usr/bin/env bash
# Predicted vs measured preemption costs (paper Fig. 5, Tables 5-6). allm-run
# --workload --decisions logs every preemption with both predictions and, once the
# chosen action ran, its measured time; forcing each policy measures each kind
# (swap: swap out + in; recompute: the prefill that rebuilt the KV), and adaptive
# shows what the cost model chose. Writes RESULTS/predictors.json, .md and the
# decision logs. Usage: bench/predictors.sh   (environment: bench/common.sh, plus
# WORKLOAD=summary OUT_LEN=256: long prompts give a wide range of lengths)
. "$(dirname "$0")/common.sh"
WORKLOAD=${WORKLOAD:-summary}
OUT_LEN=${OUT_LEN:-256}
machine_note predictors
mkdir -p "$RESULTS/predictors"
for p in swap recompute adaptive; do
	echo "== decisions under --preempt $p ($WORKLOAD, max output $OUT_LEN, $N requests)" >&2
	"$ALLM_RUN" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" --workload "$WORKLOAD" -n "$N" --max-output "$OUT_LEN" \
		"${SAMPLING[@]}" --preempt "$p" --decisions "$RESULTS/predictors/decisions-$p.jsonl" \
		--json >"$RESULTS/predictors/run-$p.json" 2>/dev/null
done
python3 "$BENCH_DIR/tables.py" predictors "$RESULTS" >"$RESULTS/predictors.md"
cat "$RESULTS/predictors.md"
