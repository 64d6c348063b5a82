#!/usr/bin/env bash
# Elastic memory (issue 52, DESIGN §5c): one --memory-budget, the static split
# (activations sized for the largest step, KV the rest) against the elastic pool
# (KV grows into what the step's activations leave), same workload, greedy with
# EOS ignored so every request decodes its whole output. The budget is the
# weights, the static split's activations and KV_BLOCKS blocks: tight enough
# that the static split preempts. Runs alternate over ROWS REPEAT times.
# Writes RESULTS/elastic/*.json and prints a markdown table.
# ROWS (default "off on"): off = the static split, on = elastic, slo = elastic with
# --slo-ttft-ms SLO_TTFT_MS --slo-tpot-ms SLO_TPOT_MS (the SLO buffer), phase =
# elastic with --phase-placement on, slo+phase = both.
# Usage: bench/elastic.sh  (environment: bench/common.sh's MODEL, DEVICE, N,
#        plus KV_BLOCKS=96 OUT_LEN=256 REPEAT=2 WORKLOAD=chatbot EXTRA="" PROBE_GIB=8:
#        a budget that holds the weights, for reading the sizes; ROWS, SLO_TTFT_MS=0,
#        SLO_TPOT_MS=0)
. "$(dirname "$0")/common.sh"
KV_BLOCKS=${KV_BLOCKS:-96}
OUT_LEN=${OUT_LEN:-256}
REPEAT=${REPEAT:-2}
WORKLOAD=${WORKLOAD:-chatbot}
ROWS=${ROWS:-off on}
SLO_TTFT_MS=${SLO_TTFT_MS:-0}
SLO_TPOT_MS=${SLO_TPOT_MS:-0}
# the flags of a row
row_args() {
	case $1 in
	off) echo --elastic-memory off ;;
	on) echo --elastic-memory on ;;
	slo) echo --elastic-memory on --slo-ttft-ms "$SLO_TTFT_MS" --slo-tpot-ms "$SLO_TPOT_MS" ;;
	phase) echo --elastic-memory on --phase-placement on ;;
	slo+phase) echo --elastic-memory on --phase-placement on --slo-ttft-ms "$SLO_TTFT_MS" --slo-tpot-ms "$SLO_TPOT_MS" ;;
	*) echo "elastic.sh: unknown row $1" >&2; exit 2 ;;
	esac
}
read -r -a EXTRA_ARGS <<<"${EXTRA:-}"
OUT=$RESULTS/elastic
mkdir -p "$OUT"
machine_note elastic
BASE=("${MODEL_ARGS[@]}" --device "$DEVICE" --block-size "$BLOCK_SIZE" --cpu-blocks "$CPU_BLOCKS"
	--profile "$PROFILE" "${EXTRA_ARGS[@]}")
[ -n "${THREADS:-}" ] && BASE+=(--threads "$THREADS")
W=(--workload "$WORKLOAD" -n "$N" --max-output "$OUT_LEN" --output-dist fixed "${SAMPLING[@]}")

# the budget from the model's own sizes (allm-run prints them with a generous budget)
probe=$("$ALLM_RUN" "${BASE[@]}" --memory-budget "${PROBE_GIB:-8}" --elastic-memory off "${W[@]}" -n 1 --max-output 1 \
	--json 2>&1 >/dev/null | grep -E 'memory budget|KV blocks' || true)
echo "$probe" >&2
BUDGET=$(python3 - "$probe" "$KV_BLOCKS" <<'PY'
import re, sys
t, n = sys.argv[1], int(sys.argv[2])
w = float(re.search(r"weights ([0-9.]+) GiB", t).group(1))
pool = float(re.search(r"static pool ([0-9.]+) GiB", t).group(1))
blocks = int(re.search(r"KV blocks: (\d+) GPU", t).group(1))
kib = float(re.search(r"([0-9.]+) KiB each", t).group(1))
scratch = pool - blocks * kib / 1048576
print(f"{w + scratch + (n + 0.5) * kib / 1048576:.4f}")
PY
)
echo "budget $BUDGET GiB (weights + static activations + $KV_BLOCKS blocks), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for i in $(seq 1 "$REPEAT"); do
	for mode in $ROWS; do
		read -r -a R <<<"$(row_args "$mode")"
		echo "== run $i $mode (${R[*]}), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		"$ALLM_RUN" "${BASE[@]}" --memory-budget "$BUDGET" "${R[@]}" "${W[@]}" \
			--json >"$OUT/$WORKLOAD-$mode-$i.json" 2>"$OUT/$WORKLOAD-$mode-$i.log"
	done
done
python3 - "$OUT" "$WORKLOAD" "$REPEAT" "$BUDGET" $ROWS <<'PY'
import json, sys, statistics as S
out, wl, rep, budget, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
rows = {m: [json.load(open(f"{out}/{wl}-{m}-{i}.json")) for i in range(1, rep + 1)] for m in modes}
def med(m, f): return S.median(f(r) for r in rows[m])
# generated tokens over the steps that decoded: the running batch on average
def mean_batch(r): return r["generated_tokens"] / max(1, r["steps"]["decode"] + r["steps"]["mixed"])
print(f"budget {budget} GiB; medians of {rep} runs each")
names = {"off": "static", "on": "elastic", "slo": "elastic + SLO buffer", "phase": "elastic + phase placement",
         "slo+phase": "elastic + SLO + phase"}
print("| split | largest batch | mean batch | gen tok/s | TTFT p99 ms | TPOT p50 ms | preemptions (swap/recompute) | pool decisions (inflate/deflate) | SLO buffer (shrink/grow, end) | phase swaps | outputs_sha256 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for m in modes:
    r = rows[m][0]
    slo = r.get("slo", {})
    print(f"| {names[m]} | {med(m, lambda r: r['max_running']):.0f} | {med(m, mean_batch):.1f} | {med(m, lambda r: r['gen_throughput_tok_s']):.1f} | "
          f"{med(m, lambda r: r['ttft_ms']['p99']):.0f} | {med(m, lambda r: r['tpot_ms']['p50']):.1f} | "
          f"{r['preemptions']['swap']}/{r['preemptions']['recompute']} | {r['memory']['inflations']}/{r['memory']['deflations']} | "
          f"{slo.get('shrinks', 0)}/{slo.get('grows', 0)}, {slo.get('buffer_tokens', 0)} | {slo.get('phase_swaps', 0)} | "
          f"{r['outputs_sha256'][:12]} |")
same = len({r['outputs_sha256'] for m in rows for r in rows[m]}) == 1
base = "off" if "off" in modes else modes[0]
for m in modes:
    if m == base:
        continue
    b = med(m, lambda r: r['max_running']) / med(base, lambda r: r['max_running'])
    mb = med(m, mean_batch) / med(base, mean_batch)
    t = med(m, lambda r: r['gen_throughput_tok_s']) / med(base, lambda r: r['gen_throughput_tok_s'])
    p = med(m, lambda r: r['ttft_ms']['p99']) / med(base, lambda r: r['ttft_ms']['p99'])
    print(f"{names[m]} / {names[base]}: largest batch {b:.2f}x, mean batch {mb:.2f}x, decode throughput {t:.2f}x, TTFT p99 {p:.2f}x")
print(f"outputs identical: {same}")
PY
