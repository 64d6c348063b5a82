#!/usr/bin/env bash
# Scheduler quality (issue 15): fair vs fcfs, before (the paper's engine: prefill-only
# steps, no admission headroom, no aging) and after (the defaults: chunked prefill,
# fair's headroom and aging), at max_num_seqs 8 ... 128 on chatbot and summary, all
# requests at t = 0; then Poisson arrivals at 0.7x and 1.3x the measured capacity with
# chunked prefill on vs off (p99 TPOT). One fresh engine per run (allm-bench),
# side by side, one run each. Writes RESULTS/sched-quality/*.json and
# RESULTS/sched-quality.md.
# Usage: bench/sched-quality.sh   (environment: bench/common.sh, plus
#        WORKLOADS="chatbot summary" SEQS="8 32 128" OUT_LEN=128;
#        TABLES_ONLY=1 re-tabulates the JSON of an earlier run without running)
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-chatbot summary}
SEQS=${SEQS:-8 16 32 64 128}
OUT_LEN=${OUT_LEN:-128}
SMALL_CHUNK=${SMALL_CHUNK:-256}
PAPER=(--chunked-prefill off --admit-lookahead 0 --max-wait-factor 0)
OUT=$RESULTS/sched-quality
mkdir -p "$OUT"
t0=$(date +%s)
if [ -z "${TABLES_ONLY:-}" ]; then
machine_note sched-quality
bench() { # FILE [flags...]
	local f=$1
	shift
	"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "$@" --json --no-progress >"$f" ||
		{ echo "sched-quality: allm-bench failed for $f" >&2; exit 1; }
}
for wl in $WORKLOADS; do
	for s in $SEQS; do
		echo "== $wl, max_num_seqs $s, max output $OUT_LEN, $N requests" >&2
		W=(--workload "$wl" -n "$N" --max-output "$OUT_LEN" --max-num-seqs "$s" "${SAMPLING[@]}")
		bench "$OUT/$wl-$s-before.json" "${W[@]}" "${PAPER[@]}" --compare sched=fair,fcfs
		bench "$OUT/$wl-$s-after.json" "${W[@]}" --compare sched=fair,fcfs
	done
done
# Online: capacity = fcfs's request rate at t = 0 with 32 sequences; Poisson arrivals
# at 0.7x and 1.3x of it, chunked prefill on vs off (fair, the other defaults on).
for wl in $WORKLOADS; do
	W=(--workload "$wl" -n "$N" --max-output "$OUT_LEN" --max-num-seqs 32 --temperature 0
		--ignore-eos --seed "$SEED")
	bench "$OUT/$wl-capacity.json" "${W[@]}" --sched fcfs
	cap=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['req_s'])" "$OUT/$wl-capacity.json")
	for x in 0.7 1.3; do
		rate=$(python3 -c "print(round($cap * $x, 3))")
		echo "== $wl Poisson at ${x}x capacity ($rate req/s)" >&2
		bench "$OUT/$wl-rate-$x.json" "${W[@]}" --rate "$rate" --compare chunked_prefill=on,off
		# small chunks: a long prompt spans steps (the default budget holds any prompt
		# of these models' contexts whole)
		bench "$OUT/$wl-rate-$x-chunk$SMALL_CHUNK.json" "${W[@]}" --rate "$rate" \
			--max-num-batched-tokens "$SMALL_CHUNK" --compare chunked_prefill=on,off
	done
done
echo "sched-quality: $(($(date +%s) - t0)) s" >&2
fi
SMALL_CHUNK=$SMALL_CHUNK python3 - "$OUT" "$WORKLOADS" "$SEQS" >"$RESULTS/sched-quality.md" <<'PY'
import json, sys
out, wls, seqs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def runs(f):
    d = json.load(open(f))
    return {list(r["setting"].values())[0]: r for r in d["runs"]}
print("### fair vs fcfs, all requests at t = 0\n")
print("| workload | seqs | engine | tok/s fair | tok/s fcfs | fair/fcfs | WT fair | WT fcfs | WT fair/fcfs | TTFT p50 fair/fcfs | e2e mean fair/fcfs | preempt. fair | preempt. fcfs | recomputed tok fair | max wait / service fair |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for wl in wls:
    for s in seqs:
        for phase in ("before", "after"):
            r = runs(f"{out}/{wl}-{s}-{phase}.json")
            fa, fc = r["fair"], r["fcfs"]
            pf = fa["preemptions"]["swap"] + fa["preemptions"]["recompute"]
            pc = fc["preemptions"]["swap"] + fc["preemptions"]["recompute"]
            print(f"| {wl} | {s} | {'paper' if phase == 'before' else 'ours'} | {fa['throughput_tok_s']:.0f} | {fc['throughput_tok_s']:.0f} | "
                  f"{fa['throughput_tok_s'] / fc['throughput_tok_s']:.2f} | {fa['mean_weighted_turnaround']:.2f} | "
                  f"{fc['mean_weighted_turnaround']:.2f} | {fa['mean_weighted_turnaround'] / fc['mean_weighted_turnaround']:.2f} | "
                  f"{fa['ttft_ms']['p50'] / fc['ttft_ms']['p50']:.2f} | {fa['e2e_ms']['mean'] / fc['e2e_ms']['mean']:.2f} | "
                  f"{pf} | {pc} | {fa.get('recomputed_tokens', 0)} | {fa.get('max_wait_ratio', float('nan')):.1f} |")
print("\n### Poisson arrivals, fair: chunked prefill on vs off\n")
print("TPOT is each request's mean gap (its stalls averaged over its tokens); ITL is every gap between two tokens of a request.\n")
print("| workload | load | rate req/s | budget tok | tok/s on | tok/s off | p99 TPOT ms on | p99 TPOT ms off | TPOT off/on | p99 ITL ms on | p99 ITL ms off | max ITL ms on | max ITL ms off | max ITL off/on | p99 TTFT ms on | p99 TTFT ms off | steps mixed on |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
import os
small = os.environ.get("SMALL_CHUNK", "256")
for wl in wls:
    for x in ("0.7", "1.3"):
        cap = json.load(open(f"{out}/{wl}-capacity.json"))["req_s"]
        for f in (f"{out}/{wl}-rate-{x}.json", f"{out}/{wl}-rate-{x}-chunk{small}.json"):
            if not os.path.exists(f):
                continue
            r = runs(f)
            on, off = r["on"], r["off"]
            itl = lambda q, k: q.get("itl_ms", {}).get(k) or float("nan")
            print(f"| {wl} | {x}x | {cap * float(x):.2f} | {on['limits']['max_num_batched_tokens']} | {on['throughput_tok_s']:.0f} | {off['throughput_tok_s']:.0f} | "
                  f"{on['tpot_ms']['p99']:.2f} | {off['tpot_ms']['p99']:.2f} | {off['tpot_ms']['p99'] / on['tpot_ms']['p99']:.2f} | "
                  f"{itl(on, 'p99'):.2f} | {itl(off, 'p99'):.2f} | {itl(on, 'max'):.1f} | {itl(off, 'max'):.1f} | {itl(off, 'max') / itl(on, 'max'):.2f} | "
                  f"{on['ttft_ms']['p99']:.1f} | {off['ttft_ms']['p99']:.1f} | {on['steps']['mixed']} |")
PY
cat "$RESULTS/sched-quality.md"
