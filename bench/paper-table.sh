#!/usr/bin/env bash
# The paper's throughput table (Table 4 shape): adaptive vs recompute vs swap for the
# three workloads at max output 64 / 128 / 256, all requests at t = 0, with the
# preemption counts by kind, through allm-bench --compare (one fresh engine per
# policy, same workload and seed). Writes RESULTS/paper-table.json and .md.
# Usage: bench/paper-table.sh            (environment: see bench/common.sh, plus
#        WORKLOADS="chatbot alpaca summary" OUTPUTS="64 128 256")
# Paper scale on a GPU: DEVICE=cuda MODEL="--dummy llama-7b" bench/paper-table.sh
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-chatbot alpaca summary}
OUTPUTS=${OUTPUTS:-64 128 256}
machine_note paper-table
mkdir -p "$RESULTS/paper-table"
t0=$(date +%s)
for wl in $WORKLOADS; do
	for out in $OUTPUTS; do
		echo "== $wl, max output $out, $N requests" >&2
		"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" --workload "$wl" -n "$N" --max-output "$out" \
			"${SAMPLING[@]}" --compare preempt=adaptive,recompute,swap --json --no-progress \
			>"$RESULTS/paper-table/$wl-$out.json"
	done
done
echo "paper-table: $(($(date +%s) - t0)) s" >&2
python3 "$BENCH_DIR/tables.py" paper "$RESULTS" $WORKLOADS -- $OUTPUTS >"$RESULTS/paper-table.md"
cat "$RESULTS/paper-table.md"
