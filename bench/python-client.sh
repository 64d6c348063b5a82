#!/usr/bin/env bash
# The Python package (clientlib/python, issue 42) against the C client and against
# the openai SDK through allm-gateway, on one allm-engined (stories260K, CPU) and one
# workload: N requests of 8..24 prompt ids (seeded), T tokens each (greedy, EOS
# ignored), C streams in flight from one process:
#   c-rings    allm-bench --name (libadaptivellm, the rings)
#   py-rings   bench/python-client.py rings: adaptivellm.AsyncClient, one asyncio loop
#   py-openai  bench/python-client.py openai: AsyncOpenAI, streamed /v1/completions
# and the round trip on the rings, submit -> the engine's ACCEPTED, from C
# (bench/ring-rtt.c, built here with cc) and from Python (the package's handle).
# The runs alternate, REPS of each; prints medians and every run's figure (the
# noise), CPU seconds of each client (bash's `time`), and writes
# results/cpu/python-client.json. Run it alone: flock /work/.bench.lock bash bench/python-client.sh
# Usage: bench/python-client.sh [BUILD_DIR]     N=512 C=64 T=128 REPS=3 RTT_N=3000
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
B=$(cd "${1:-$ROOT/build}" && pwd)
N=${N:-512}; C=${C:-64}; T=${T:-128}; REPS=${REPS:-3}; RTT_N=${RTT_N:-3000}
M=${MODEL_DIR:-$(cd "$ROOT/data/models/stories260K" && pwd)}
for b in "$B/engined/allm-engined" "$B/engined/allm-gateway" "$B/tools/allm-bench"; do
	[ -x "$b" ] || { echo "$b not built" >&2; exit 1; }
done
# the package as users install it, and the openai SDK (tools/venv.sh, build/venv)
PY=$(ALLM_BUILD_DIR=$B bash "$ROOT/tools/venv.sh" adaptivellm openai)
LIB="$B/clientlib/$(readlink "$B/clientlib/libadaptivellm.so" 2>/dev/null)"
export ALLM_LIBRARY=$LIB
. "$HERE/gateway-common.sh"
gw_bench_tmp allm-py-bench
cc -O2 -Wall -I"$ROOT/include" "$HERE/ring-rtt.c" "$LIB" -Wl,-rpath,"$(dirname "$LIB")" -o "$tmp/ring-rtt"

gw_bench_workload "$N" "$T" >"$tmp/w.jsonl"
gw_bench_engine "$B" pybench "$tmp/profile.json"
gw_bench_gateway "$B" pybench

TIMEFORMAT='%U %S'
# run KIND R CMD...: its JSON into KIND-R.json, the client's CPU seconds into KIND-R.cpu
run() {
	local kind=$1 r=$2 c
	shift 2
	c=$( { time "$@" >"$tmp/$kind-$r.json"; } 2>&1 )
	echo "$c" | awk '{print $1 + $2}' >"$tmp/$kind-$r.cpu"
}
tps() { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["gen_throughput_tok_s"]))' "$1"; }
echo "python-client: $N requests x $T tokens, $C in flight, $REPS runs each ($(basename "$M"), CPU)" >&2
uptime >&2
for r in $(seq "$REPS"); do
	run c-rings "$r" "$B/tools/allm-bench" --name pybench --workload "$tmp/w.jsonl" -n "$N" --max-output "$T" \
		--concurrency "$C" --ignore-eos --temperature 0 --json --no-progress
	run py-rings "$r" "$PY" "$HERE/python-client.py" rings pybench "$tmp/w.jsonl" "$N" "$C"
	run py-openai "$r" "$PY" "$HERE/python-client.py" openai "http://127.0.0.1:$port" "$tmp/w.jsonl" "$N" "$C"
	run c-rtt "$r" "$tmp/ring-rtt" pybench "$RTT_N"
	run py-rtt "$r" "$PY" "$HERE/python-client.py" rtt pybench "$RTT_N"
	echo "  run $r ($(cut -d' ' -f1-3 /proc/loadavg) load): c-rings $(tps "$tmp/c-rings-$r.json")," \
		"py-rings $(tps "$tmp/py-rings-$r.json"), py-openai $(tps "$tmp/py-openai-$r.json") tok/s" >&2
done

OUT=${OUT:-$HERE/results/cpu/python-client.json}
mkdir -p "$(dirname "$OUT")"
python3 - "$tmp" "$REPS" "$N" "$C" "$T" "$OUT" <<'PY'
import json, statistics, sys
tmp, reps, n, c, t, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
kinds = ("c-rings", "py-rings", "py-openai", "c-rtt", "py-rtt")
runs = {k: [json.load(open(f"{tmp}/{k}-{r}.json")) for r in range(1, reps + 1)] for k in kinds}
for k in kinds:
    for r, x in enumerate(runs[k], 1):
        x["client_cpu_s"] = float(open(f"{tmp}/{k}-{r}.cpu").read())
med = statistics.median
tok = {k: [x["gen_throughput_tok_s"] for x in runs[k]] for k in ("c-rings", "py-rings", "py-openai")}
# ratios run by run (each run's three clients ran back to back), then their median
r_c = [p / q for p, q in zip(tok["py-rings"], tok["c-rings"])]
r_o = [p / q for p, q in zip(tok["py-rings"], tok["py-openai"])]
print(f"| {n} requests x {t} tokens, {c} streams, one process | tokens/s (median) | each run | client CPU per token |")
print("|---|---|---|---|")
for k, name in (("c-rings", "allm-bench (C, rings)"), ("py-rings", "adaptivellm.AsyncClient (Python, rings)"),
                ("py-openai", "openai SDK (Python, allm-gateway)")):
    cpu = med(x["client_cpu_s"] for x in runs[k]) * 1e6 / (n * t)
    print(f"| {name} | {med(tok[k]):.0f} | {', '.join(f'{v:.0f}' for v in tok[k])} | {cpu:.1f} us |")
print(f"| Python rings / C rings | {med(r_c):.2f}x | {', '.join(f'{v:.2f}' for v in r_c)} | |")
print(f"| Python rings / openai SDK | {med(r_o):.2f}x | {', '.join(f'{v:.2f}' for v in r_o)} | |")
print()
print("| round trip, submit -> ACCEPTED, through the engine | p50 | p90 | p99 | p50 of each run |")
print("|---|---|---|---|---|")
for k, name in (("c-rtt", "C (libadaptivellm)"), ("py-rtt", "Python (adaptivellm)")):
    a = [x["accepted_us"] for x in runs[k]]
    each = ", ".join("%.1f" % x["p50"] for x in a)
    print(f"| {name} | {med(x['p50'] for x in a):.1f} us | {med(x['p90'] for x in a):.1f} us | "
          f"{med(x['p99'] for x in a):.1f} us | {each} |")
d = [p["accepted_us"]["p50"] - q["accepted_us"]["p50"] for p, q in zip(runs["py-rtt"], runs["c-rtt"])]
print(f"| Python - C | {med(d):+.1f} us | | | {', '.join(f'{v:+.1f}' for v in d)} |")
json.dump({"requests": n, "tokens": t, "concurrency": c, "runs": runs,
           "ratio_py_over_c": r_c, "ratio_py_over_openai": r_o, "rtt_p50_py_minus_c_us": d}, open(out, "w"), indent=1)
PY
