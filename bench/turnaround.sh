#!/usr/bin/env bash
# Fair vs FCFS admission (paper Fig. 4): mean weighted turnaround and throughput at
# max_num_seqs 8 ... 128, all requests at t = 0, through allm-bench --compare
# sched=fair,fcfs (one fresh engine per setting). Writes RESULTS/turnaround.json, .md.
# Usage: bench/turnaround.sh   (environment: bench/common.sh, plus
#        WORKLOADS="chatbot summary" SEQS="8 16 32 64 128" OUT_LEN=128)
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-chatbot summary}
SEQS=${SEQS:-8 16 32 64 128}
OUT_LEN=${OUT_LEN:-128}
machine_note turnaround
mkdir -p "$RESULTS/turnaround"
t0=$(date +%s)
for wl in $WORKLOADS; do
	for s in $SEQS; do
		echo "== $wl, max_num_seqs $s, max output $OUT_LEN, $N requests" >&2
		"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" --max-num-seqs "$s" --workload "$wl" -n "$N" \
			--max-output "$OUT_LEN" "${SAMPLING[@]}" --compare sched=fair,fcfs --json \
			--no-progress >"$RESULTS/turnaround/$wl-$s.json"
	done
done
echo "turnaround: $(($(date +%s) - t0)) s" >&2
python3 "$BENCH_DIR/tables.py" turnaround "$RESULTS" $WORKLOADS -- $SEQS >"$RESULTS/turnaround.md"
cat "$RESULTS/turnaround.md"
