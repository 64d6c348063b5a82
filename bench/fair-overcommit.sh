#!/usr/bin/env bash
# Fair's admission by commitment (--admit-overcommit, issue 15): fair with the
# cap off (the default), at 1.5 and at 1.0 x the device + host (+ disk) blocks,
# against fcfs, back to back in fresh engines, all requests at t = 0. Shows the
# trade the cap makes: throughput and recomputes against weighted turnaround.
# Writes RESULTS/fair-overcommit/*.json and RESULTS/fair-overcommit.md.
# Usage: bench/fair-overcommit.sh   (environment: bench/common.sh, plus
#        WORKLOADS="chatbot summary" SEQS="32 64 128" OUT_LEN=128
#        FACTORS="0,1.5,1" REPS=1 TABLES_ONLY=1)
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-chatbot summary}
SEQS=${SEQS:-32 64 128}
OUT_LEN=${OUT_LEN:-128}
FACTORS=${FACTORS:-0,1.5,1}
REPS=${REPS:-1}
OUT=$RESULTS/fair-overcommit
mkdir -p "$OUT"
t0=$(date +%s)
if [ -z "${TABLES_ONLY:-}" ]; then
	machine_note fair-overcommit
	for k in $(seq "$REPS"); do
		for wl in $WORKLOADS; do
			for s in $SEQS; do
				echo "== $wl, max_num_seqs $s, $N requests, repetition $k" >&2
				W=(--workload "$wl" -n "$N" --max-output "$OUT_LEN" --max-num-seqs "$s" "${SAMPLING[@]}")
				bench "$OUT/$wl-$s-r$k-fcfs.json" "${W[@]}" --sched fcfs
				bench "$OUT/$wl-$s-r$k-fair.json" "${W[@]}" --sched fair --compare "admit_overcommit=$FACTORS"
			done
		done
	done
	echo "fair-overcommit: $(($(date +%s) - t0)) s" >&2
fi
python3 - "$WORKLOADS" "$SEQS" "$OUT" >"$RESULTS/fair-overcommit.md" <<'PY'
import glob, json, os, statistics, sys
wls, seqs, out = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3]
def pre(r):
    return r["preemptions"]["swap"] + r["preemptions"]["recompute"]
reps = sorted({os.path.basename(f).split("-")[2] for f in glob.glob(f"{out}/*-r*-fcfs.json")})
if len(reps) > 1:
    print(f"Each cell: the median of {len(reps)} runs.\n")
print("| workload | seqs | overcommit | tok/s | / fcfs | WT | / fcfs | TTFT p50 / fcfs | e2e mean / fcfs | preemptions (recomputes) | recomputed tokens | max wait / service |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for wl in wls:
    for s in seqs:
        rows = {}
        for rep in reps:
            try:
                fc = json.load(open(f"{out}/{wl}-{s}-{rep}-fcfs.json"))
                fa = json.load(open(f"{out}/{wl}-{s}-{rep}-fair.json"))
            except FileNotFoundError:
                continue
            cells = [("fcfs", fc)] + [("fair " + str(r["setting"]["admit_overcommit"]), r) for r in fa["runs"]]
            for name, r in cells:
                rows.setdefault(name, []).append([
                    r["throughput_tok_s"], r["throughput_tok_s"] / fc["throughput_tok_s"],
                    r["mean_weighted_turnaround"], r["mean_weighted_turnaround"] / fc["mean_weighted_turnaround"],
                    r["ttft_ms"]["p50"] / fc["ttft_ms"]["p50"], r["e2e_ms"]["mean"] / fc["e2e_ms"]["mean"],
                    pre(r), r["preemptions"]["recompute"], r.get("recomputed_tokens", 0),
                    r.get("max_wait_ratio", float("nan"))])
        for name, got in rows.items():
            m = [statistics.median(c) for c in zip(*got)]
            print(f"| {wl} | {s} | {name} | {m[0]:.0f} | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.2f} | {m[4]:.2f} | "
                  f"{m[5]:.2f} | {m[6]:.0f} ({m[7]:.0f}) | {m[8]:.0f} | {m[9]:.1f} |")
PY
cat "$RESULTS/fair-overcommit.md"
