#!/usr/bin/env bash
# What structured output costs through HTTP (issue 51): one chat at a time (batch
# 1) through allm-gateway on SmolLM2-135M-Instruct (CPU), a JSON Schema
# (response_format json_schema: an object of 8 strings) against no grammar
# (ignore_eos, the same max_tokens), alternating run by run. Per request: the time
# to the first token (the gateway compiles the schema before sending; the engine
# compiles it again from its cache) and the decode rate after it; prints the
# medians of each side and their ratio.
# Usage: bench/gateway-structured.sh [BUILD_DIR]     REPS=8 T=96
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../build}" && pwd)
REPS=${REPS:-8}; T=${T:-96}
M=${MODEL:-$(bash "$HERE/../tools/models.sh")}
. "$HERE/gateway-common.sh"
gw_bench_tmp allm-gw-structured
gw_bench_engine "$B" gwst "$B/real-model-profile.json"
gw_bench_gateway "$B" gwst
python3 - "http://127.0.0.1:$port" "$REPS" "$T" <<'PY'
import json, statistics, sys, time, urllib.request

url, reps, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "minItems": 8, "maxItems": 8,
                                                      "items": {"type": "string", "maxLength": 40}}},
          "required": ["items"], "additionalProperties": False}
MSGS = [{"role": "user", "content": "List eight fruits."}]


def one(extra):
    body = dict({"messages": MSGS, "max_tokens": t, "temperature": 0, "stream": True,
                 "stream_options": {"include_usage": True}}, **extra)
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = last = None
    n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if not line.startswith(b"data: {"):
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                n = ev["usage"]["completion_tokens"]
            elif ev["choices"] and ev["choices"][0]["delta"].get("content"):
                last = time.perf_counter()
                first = first or last
    return first - t0, (n - 1) / (last - first), n


sides = {"plain": {"ignore_eos": True}, "schema": {"response_format": {"type": "json_schema", "json_schema": {
    "name": "fruits", "schema": SCHEMA}}}}
res = {k: [] for k in sides}
one(sides["plain"]), one(sides["schema"])  # warm: the schema compiled and cached once
for i in range(reps):
    for k in (("plain", "schema") if i % 2 == 0 else ("schema", "plain")):
        res[k].append(one(sides[k]))
for k, v in res.items():
    print("%-6s tokens %4d  TTFT p50 %6.1f ms  decode p50 %6.1f tok/s  (runs: %s)" % (
        k, statistics.median(x[2] for x in v), 1e3 * statistics.median(x[0] for x in v),
        statistics.median(x[1] for x in v), ", ".join("%.1f" % x[1] for x in v)))
p = statistics.median(x[1] for x in res["plain"])
s = statistics.median(x[1] for x in res["schema"])
print("schema / plain decode: %.2fx; TTFT +%.1f ms" % (s / p, 1e3 * (statistics.median(x[0] for x in res["schema"]) -
                                                              statistics.median(x[0] for x in res["plain"]))))
PY
