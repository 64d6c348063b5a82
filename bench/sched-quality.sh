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
#        REPS=3 runs every comparison 3 times (sched-quality-r1..3/) and tabulates
#        each cell's median, the fair/fcfs and on/off throughput with its range:
#        one run of this machine is +-15 % on throughput;
#        TABLES_ONLY=1 re-tabulates the JSON of an earlier run without running)
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-chatbot summary}
SEQS=${SEQS:-8 16 32 64 128}
OUT_LEN=${OUT_LEN:-128}
SMALL_CHUNK=${SMALL_CHUNK:-256}
PAPER=(--chunked-prefill off --admit-lookahead 0 --max-wait-factor 0)
REPS=${REPS:-1}
if [ "$REPS" = 1 ]; then OUTS=("$RESULTS/sched-quality"); else
	OUTS=(); for k in $(seq "$REPS"); do OUTS+=("$RESULTS/sched-quality-r$k"); done; fi
mkdir -p "${OUTS[@]}"
t0=$(date +%s)
if [ -z "${TABLES_ONLY:-}" ]; then
machine_note sched-quality
for OUT in "${OUTS[@]}"; do
for wl in $WORKLOADS; do
	for s in $SEQS; do
		echo "== $wl, max_num_seqs $s, max output $OUT_LEN, $N requests ($(basename "$OUT"))" >&2
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
done
echo "sched-quality: $(($(date +%s) - t0)) s" >&2
fi
SMALL_CHUNK=$SMALL_CHUNK python3 - "$WORKLOADS" "$SEQS" "${OUTS[@]}" >"$RESULTS/sched-quality.md" <<'PY'
import json, os, statistics, sys
wls, seqs, outs = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3:]
def runs(f):
    d = json.load(open(f))
    return {list(r["setting"].values())[0]: r for r in d["runs"]}
def cells(name, row):
    """row(runs) -> list of numbers, for each repetition that has the file; their
    medians cell by cell, and each cell's range (min, max)."""
    got = [row(runs(f"{o}/{name}")) for o in outs if os.path.exists(f"{o}/{name}")]
    if not got:
        return None, None
    med = [statistics.median(c) for c in zip(*got)]
    return med, [(min(c), max(c)) for c in zip(*got)]
def fmt(v, nd, rng=None):
    s = f"{v:.{nd}f}"
    if rng and len(outs) > 1:
        s += f" ({rng[0]:.{nd}f}-{rng[1]:.{nd}f})"
    return s
if len(outs) > 1:
    print(f"Each cell: the median of {len(outs)} runs; fair/fcfs and off/on ratios with their range (min-max).\n")
print("### fair vs fcfs, all requests at t = 0\n")
print("| workload | seqs | engine | tok/s fair | tok/s fcfs | fair/fcfs | WT fair | WT fcfs | WT fair/fcfs | TTFT p50 fair/fcfs | e2e mean fair/fcfs | preempt. fair | preempt. fcfs | recomputed tok fair | max wait / service fair |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def fair_row(r):
    fa, fc = r["fair"], r["fcfs"]
    pf = fa["preemptions"]["swap"] + fa["preemptions"]["recompute"]
    pc = fc["preemptions"]["swap"] + fc["preemptions"]["recompute"]
    return [fa["throughput_tok_s"], fc["throughput_tok_s"], fa["throughput_tok_s"] / fc["throughput_tok_s"],
            fa["mean_weighted_turnaround"], fc["mean_weighted_turnaround"],
            fa["mean_weighted_turnaround"] / fc["mean_weighted_turnaround"],
            fa["ttft_ms"]["p50"] / fc["ttft_ms"]["p50"], fa["e2e_ms"]["mean"] / fc["e2e_ms"]["mean"],
            pf, pc, fa.get("recomputed_tokens", 0), fa.get("max_wait_ratio", float("nan"))]
for wl in wls:
    for s in seqs:
        for phase in ("before", "after"):
            m, rg = cells(f"{wl}-{s}-{phase}.json", fair_row)
            if m is None:
                continue
            print(f"| {wl} | {s} | {'paper' if phase == 'before' else 'ours'} | {m[0]:.0f} | {m[1]:.0f} | {fmt(m[2], 2, rg[2])} | "
                  f"{m[3]:.2f} | {m[4]:.2f} | {fmt(m[5], 2, rg[5])} | {m[6]:.2f} | {m[7]:.2f} | "
                  f"{m[8]:.0f} | {m[9]:.0f} | {m[10]:.0f} | {m[11]:.1f} |")
print("\n### Poisson arrivals, fair: chunked prefill on vs off\n")
print("TPOT is each request's mean gap (its stalls averaged over its tokens); ITL is every gap between two tokens of a request.\n")
print("| workload | load | rate req/s | budget tok | tok/s on | tok/s off | p99 TPOT ms on | p99 TPOT ms off | TPOT off/on | p99 ITL ms on | p99 ITL ms off | max ITL ms on | max ITL ms off | max ITL off/on | p99 TTFT ms on | p99 TTFT ms off | steps mixed on |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
small = os.environ.get("SMALL_CHUNK", "256")
nan = float("nan")
def chunk_row(r):
    on, off = r["on"], r["off"]
    itl = lambda q, k: q.get("itl_ms", {}).get(k) or nan
    return [on["limits"]["max_num_batched_tokens"], on["throughput_tok_s"], off["throughput_tok_s"],
            on["tpot_ms"]["p99"], off["tpot_ms"]["p99"], off["tpot_ms"]["p99"] / on["tpot_ms"]["p99"],
            itl(on, "p99"), itl(off, "p99"), itl(on, "max"), itl(off, "max"), itl(off, "max") / itl(on, "max"),
            on["ttft_ms"]["p99"], off["ttft_ms"]["p99"], on["steps"]["mixed"]]
for wl in wls:
    for x in ("0.7", "1.3"):
        caps = [json.load(open(f"{o}/{wl}-capacity.json"))["req_s"] for o in outs if os.path.exists(f"{o}/{wl}-capacity.json")]
        if not caps:
            continue
        cap = statistics.median(caps)
        for name in (f"{wl}-rate-{x}.json", f"{wl}-rate-{x}-chunk{small}.json"):
            m, rg = cells(name, chunk_row)
            if m is None:
                continue
            print(f"| {wl} | {x}x | {cap * float(x):.2f} | {m[0]:.0f} | {m[1]:.0f} | {m[2]:.0f} | "
                  f"{m[3]:.2f} | {m[4]:.2f} | {fmt(m[5], 2, rg[5])} | {m[6]:.2f} | {m[7]:.2f} | {m[8]:.1f} | {m[9]:.1f} | "
                  f"{fmt(m[10], 2, rg[10])} | {m[11]:.1f} | {m[12]:.1f} | {m[13]:.0f} |")
PY
cat "$RESULTS/sched-quality.md"
