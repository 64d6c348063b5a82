#!/usr/bin/env bash
# The cost of HTTP: C concurrent streams through allm-gateway (SSE, one event per
# token) vs the same workload through the shared-memory rings (allm-bench), against
# one allm-engined on stories260K (CPU) — a fast engine, so what the gateway adds
# shows. Runs alternate, REPS of each; prints the medians, the added latency per
# token (TPOT through HTTP minus TPOT over the rings, at p50 and p99) and the token
# rates, and writes results/cpu/gateway-vs-rings.json.
# Usage: bench/gateway-vs-rings.sh [BUILD_DIR]     N=512 C=64 T=128 REPS=3
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../build}" && pwd)
N=${N:-512}; C=${C:-64}; T=${T:-128}; REPS=${REPS:-3}
M=${MODEL_DIR:-$(cd "$HERE/../data/models/stories260K" && pwd)}
for b in "$B/engined/allm-engined" "$B/engined/allm-gateway" "$B/tools/allm-bench"; do
	[ -x "$b" ] || { echo "$b not built" >&2; exit 1; }
done
command -v node >/dev/null || { echo "node is needed for the HTTP client" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-gw-bench.XXXXXX")
export ALLM_RUNTIME_DIR=$tmp/run
epid=; gpid=
cleanup() {
	[ -n "$gpid" ] && kill -TERM "$gpid" 2>/dev/null
	[ -n "$epid" ] && kill -TERM "$epid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# the workload: N requests of 8..24 prompt ids (seeded), T tokens each
python3 - "$N" "$T" >"$tmp/w.jsonl" <<'PY'
import json, random, sys
n, t = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(1)
for _ in range(n):
    print(json.dumps({"prompt_ids": [1] + [rng.randrange(3, 512) for _ in range(rng.randint(7, 23))],
                      "max_tokens": t}))
PY

"$B/engined/allm-engined" --name gwbench --model "$M" --device cpu --profile "$tmp/profile.json" \
	>"$tmp/engine.log" 2>&1 &
epid=$!
for _ in $(seq 600); do [ -S "$ALLM_RUNTIME_DIR/gwbench.sock" ] && break; sleep 0.05; done
"$B/engined/allm-gateway" --engine gwbench --port 0 --max-connections 1024 >"$tmp/gateway.log" 2>&1 &
gpid=$!
port=
for _ in $(seq 400); do
	port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$tmp/gateway.log" | head -n 1)
	[ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
	sleep 0.05
done
[ -n "$port" ] || { echo "the gateway did not start" >&2; cat "$tmp/gateway.log" >&2; exit 1; }

echo "gateway-vs-rings: $N requests x $T tokens, $C in flight, $REPS runs each (stories260K, CPU)" >&2
for r in $(seq "$REPS"); do
	"$B/tools/allm-bench" --name gwbench --workload "$tmp/w.jsonl" -n "$N" --max-output "$T" \
		--concurrency "$C" --ignore-eos --temperature 0 --json --no-progress >"$tmp/rings-$r.json"
	node "$HERE/gateway-client.mjs" "http://127.0.0.1:$port" "$tmp/w.jsonl" "$N" "$C" >"$tmp/http-$r.json"
	echo "  run $r: rings $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["gen_throughput_tok_s"]))' "$tmp/rings-$r.json") tok/s," \
		"http $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["gen_throughput_tok_s"]))' "$tmp/http-$r.json") tok/s" >&2
done

mkdir -p "$HERE/results/cpu"
python3 - "$tmp" "$REPS" "$N" "$C" "$T" "$HERE/results/cpu/gateway-vs-rings.json" <<'PY'
import json, statistics, sys
tmp, reps, n, c, t, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
runs = {k: [json.load(open(f"{tmp}/{k}-{r}.json")) for r in range(1, reps + 1)] for k in ("rings", "http")}
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
print(f"| {n} requests x {t} tokens, {c} streams | rings (allm-bench) | HTTP (allm-gateway) | HTTP - rings | HTTP / rings |")
print("|---|---|---|---|---|")
for name, a, b, unit in rows:
    print(f"| {name} | {a:.3f} {unit} | {b:.3f} {unit} | {b - a:+.3f} {unit} | {b / a:.2f}x |")
itl = {p: statistics.median(x["itl_ms"][p] for x in runs["http"]) for p in ("p50", "p99")}
print(f"| HTTP inter-token gaps | | p50 {itl['p50']:.3f} ms, p99 {itl['p99']:.3f} ms | | |")
spread = {k: [round(x["gen_throughput_tok_s"]) for x in runs[k]] for k in runs}
print(f"\ntok/s of each run: rings {spread['rings']}, http {spread['http']}")
json.dump({"requests": n, "tokens": t, "concurrency": c, "runs": runs,
           "median": {name: {"rings": a, "http": b, "unit": unit} for name, a, b, unit in rows},
           "http_itl_ms": itl}, open(out, "w"), indent=1)
PY
