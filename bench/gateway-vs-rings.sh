#!/usr/bin/env bash
# The cost of HTTP: C concurrent streams through allm-gateway (SSE, one event per
# token) vs the same workload through the shared-memory rings (allm-bench), against
# one allm-engined on stories260K (CPU) — a fast engine, so what the gateway adds
# shows. Runs alternate, REPS of each; prints the medians, the added latency per
# token (TPOT through HTTP minus TPOT over the rings, at p50 and p99) and the token
# rates, and writes results/cpu/gateway-vs-rings.json. It also counts CPU seconds
# (engine, gateway, client; from /proc and bash's `time`): on a shared machine the
# wall-clock figures swing with other load, CPU per token much less.
# Usage: bench/gateway-vs-rings.sh [BUILD_DIR]     N=512 C=64 T=128 REPS=3
#        (MODEL_DIR: another model, a directory or FILE.gguf; OUT: another JSON file)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../build}" && pwd)
N=${N:-512}; C=${C:-64}; T=${T:-128}; REPS=${REPS:-3}
M=${MODEL_DIR:-$(cd "$HERE/../data/models/stories260K" && pwd)}
for b in "$B/engined/allm-engined" "$B/engined/allm-gateway" "$B/tools/allm-bench"; do
	[ -x "$b" ] || { echo "$b not built" >&2; exit 1; }
done
command -v node >/dev/null || { echo "node is needed for the HTTP client" >&2; exit 1; }
. "$HERE/gateway-common.sh"
gw_bench_tmp allm-gw-bench

gw_bench_workload "$N" "$T" >"$tmp/w.jsonl"
gw_bench_engine "$B" gwbench "$tmp/profile.json"
gw_bench_gateway "$B" gwbench

cpu() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; } # utime + stime, seconds
TIMEFORMAT='%U %S'
# run KIND R CMD...: the client's JSON into KIND-R.json, CPU seconds into KIND-R.cpu
run() {
	local kind=$1 r=$2 e0 g0 c
	shift 2
	e0=$(cpu "$epid") g0=$(cpu "$gpid")
	c=$( { time "$@" >"$tmp/$kind-$r.json"; } 2>&1 )
	awk -v e="$(cpu "$epid")" -v e0="$e0" -v g="$(cpu "$gpid")" -v g0="$g0" -v c="$c" 'BEGIN {
		split(c, t, " ")
		printf "{\"engine\": %.3f, \"gateway\": %.3f, \"client\": %.3f}\n", e - e0, g - g0, t[1] + t[2] }' \
		>"$tmp/$kind-$r.cpu"
}
echo "gateway-vs-rings: $N requests x $T tokens, $C in flight, $REPS runs each ($(basename "$M"), CPU)" >&2
uptime >&2
for r in $(seq "$REPS"); do
	run rings "$r" "$B/tools/allm-bench" --name gwbench --workload "$tmp/w.jsonl" -n "$N" --max-output "$T" \
		--concurrency "$C" --ignore-eos --temperature 0 --json --no-progress
	run http "$r" node "$HERE/gateway-client.mjs" "http://127.0.0.1:$port" "$tmp/w.jsonl" "$N" "$C"
	echo "  run $r ($(cut -d' ' -f1-3 /proc/loadavg) load): rings $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["gen_throughput_tok_s"]))' "$tmp/rings-$r.json") tok/s," \
		"http $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["gen_throughput_tok_s"]))' "$tmp/http-$r.json") tok/s" >&2
done

OUT=${OUT:-$HERE/results/cpu/gateway-vs-rings.json}
mkdir -p "$(dirname "$OUT")"
python3 - "$tmp" "$REPS" "$N" "$C" "$T" "$OUT" <<'PY'
import json, statistics, sys
tmp, reps, n, c, t, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
runs = {k: [json.load(open(f"{tmp}/{k}-{r}.json")) for r in range(1, reps + 1)] for k in ("rings", "http")}
for k in runs:
    for r, x in enumerate(runs[k], 1):
        x["cpu_s"] = json.load(open(f"{tmp}/{k}-{r}.cpu"))
med = lambda k, f: statistics.median(f(x) for x in runs[k])
rows = []
def row(name, f, unit):
    a, b = med("rings", f), med("http", f)
    rows.append((name, a, b, unit))
    return a, b
row("generated tokens/s", lambda x: x["gen_throughput_tok_s"], "tok/s")
for p in ("p50", "p99"):
    row(f"TTFT {p}", lambda x, p=p: x["ttft_ms"][p], "ms")
for p in ("p50", "p99"):
    row(f"TPOT {p}", lambda x, p=p: x["tpot_ms"][p], "ms")
# CPU microseconds per generated token, by process (the gateway's is 0 over the rings)
tok = n * t
for who in ("engine", "gateway", "client"):
    row(f"CPU per token: {who}", lambda x, who=who: x["cpu_s"][who] * 1e6 / tok, "us")
print(f"| {n} requests x {t} tokens, {c} streams | rings (allm-bench) | HTTP (allm-gateway) | HTTP - rings | HTTP / rings |")
print("|---|---|---|---|---|")
for name, a, b, unit in rows:
    ratio = f"{b / a:.2f}x" if a else "-"
    print(f"| {name} | {a:.3f} {unit} | {b:.3f} {unit} | {b - a:+.3f} {unit} | {ratio} |")
itl = {p: statistics.median(x["itl_ms"][p] for x in runs["http"]) for p in ("p50", "p99")}
print(f"| HTTP inter-token gaps | | p50 {itl['p50']:.3f} ms, p99 {itl['p99']:.3f} ms | | |")
spread = {k: [round(x["gen_throughput_tok_s"]) for x in runs[k]] for k in runs}
print(f"\ntok/s of each run: rings {spread['rings']}, http {spread['http']}")
print("CPU s of each run (engine/gateway/client): " + "; ".join(
    f"{k} " + " ".join(f"{x['cpu_s']['engine']:.2f}/{x['cpu_s']['gateway']:.2f}/{x['cpu_s']['client']:.2f}" for x in runs[k])
    for k in runs))
json.dump({"requests": n, "tokens": t, "concurrency": c, "runs": runs,
           "median": {name: {"rings": a, "http": b, "unit": unit} for name, a, b, unit in rows},
           "http_itl_ms": itl}, open(out, "w"), indent=1)
PY
