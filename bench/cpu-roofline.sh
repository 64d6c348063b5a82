#!/usr/bin/env bash
# The CPU backend against this machine's limits, on --dummy medium (12 layers, 768
# wide, 32k vocab: a 134M-parameter Llama shape) with 2 threads:
#   limits   read bandwidth (the fastest of several read patterns and thread
#            placements over 1 GiB) and peak f32 FMA rate (build/tests/bench-cpu-probe)
#   decode   batch-1 tok/s for f32, f16, bf16 and GGUF q8_0/q4_0/q4_1 weights
#            (--quant), as a fraction of
#            bandwidth / bytes read per token (all weights but the embedding table,
#            plus the f32 KV cache at the mean context)
#   prefill  128-token prefill tok/s, as a fraction of the peak FMA rate (the FLOPs
#            of every matrix and of attention)
#   batched  total tok/s of N x (128 prompt + 128 generated) through the scheduler,
#            N = 1, 8, 32 (f32), and N = 8, 32 with q8_0 weights
#   gemv     the GEMVs of a batch-1 decode step alone (build/tests/bench-decode-gemv),
#            each step followed by a plain read of the same bytes: their rate, and the
#            median of the per-step ratio, which a shared host's bandwidth swings
#            (33-57 GB/s within seconds on a 2-vCPU AMD EPYC) leave in place
# Every number is the best of REPS runs, the limits too (the machine is shared: the
# best run is the one least disturbed), with the spread of the runs; runs of the two
# builds alternate, so both see the same noise.
#
# usage: bench/cpu-roofline.sh [BUILD_DIR [BEFORE_BUILD_DIR]]
#   BEFORE_BUILD_DIR: another build (e.g. of main) measured in the same run; flags it
#   lacks (--quant q4_1, say) show as "-".  Env: THREADS (2), REPS (3), DECODE (64 tokens),
#   OUT (a file for the markdown table, default stdout only).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
BEFORE=${2:-}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
DECODE=${DECODE:-64}
MODEL="--dummy medium"
QB=${QB:-q8_0 q4_0 q4_1} # GGUF block formats (a build without them shows "-")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PROBE=$B/tests/bench-cpu-probe
[ -x "$PROBE" ] || { echo "cpu-roofline: build $PROBE first (ninja -C $B)" >&2; exit 1; }
builds=("$B")
[ -n "$BEFORE" ] && builds=("$BEFORE" "$B")
for b in "${builds[@]}"; do
  [ -x "$b/tools/allm-run" ] || { echo "cpu-roofline: no $b/tools/allm-run" >&2; exit 1; }
done


# The batched workload: N requests of 128 distinct prompt ids, 128 tokens out each.
python3 - "$TMP" <<'PY'
import json, sys
with open(sys.argv[1] + "/batch.jsonl", "w") as f:
    for i in range(32):
        ids = [3 + (i * 7919 + j * 104729) % 31990 for j in range(128)]
        f.write(json.dumps({"prompt_ids": ids, "max_tokens": 128}) + "\n")
PY

# run TAG BUILD ARGS...: one allm-run; appends "TAG build=B key=value..." to results
run() {
  local tag=$1 b=$2; shift 2
  local out
  if ! out=$("$b/tools/allm-run" $MODEL --threads "$THREADS" "$@" 2>"$TMP/err"); then
    echo "$tag build=$b unsupported" >>"$TMP/results"
    return 0
  fi
  echo "$tag build=$b $out" | tr '\n' ' ' >>"$TMP/results"
  echo >>"$TMP/results"
}

for rep in $(seq "$REPS"); do
  # the limits too are measured every round, and the best of them is the limit
  echo "cpu-roofline: rep $rep/$REPS: limits (bench-cpu-probe, $THREADS threads)" >&2
  "$PROBE" -t "$THREADS" -m 1024 -r 3 >>"$TMP/probe.txt"
  for b in "${builds[@]}"; do
    echo "cpu-roofline: rep $rep/$REPS, $b: decode and prefill" >&2
    for dt in f32 f16 bf16; do
      run "bench-$dt" "$b" --dtype "$dt" --bench --max-tokens "$DECODE"
    done
    for q in $QB; do
      run "bench-$q" "$b" --quant "$q" --bench --max-tokens "$DECODE"
    done
    # the step's GEMVs alone against a plain read of the same bytes, step by step
    if [ -x "$b/tests/bench-decode-gemv" ]; then
      for dt in f32 f16 bf16 $QB; do
        echo "gemv-$dt build=$b $("$b/tests/bench-decode-gemv" -t "$THREADS" -d "$dt" -s 2 2>/dev/null |
          tr ' \n' '= ')" >>"$TMP/results"
      done
    fi
  done
done
for b in "${builds[@]}"; do
  for n in 1 8 32; do
    echo "cpu-roofline: $b: batched $n x (128 + 128)" >&2
    run "batch-$n" "$b" --workload "$TMP/batch.jsonl" -n "$n" --max-output 128 --ignore-eos \
      --temperature 0 --json
  done
  # block weights batch differently (tiles on AMX levels from 4 rows on)
  for n in 8 32; do
    echo "cpu-roofline: $b: batched $n x (128 + 128), q8_0 weights" >&2
    run "batchq-$n" "$b" --workload "$TMP/batch.jsonl" -n "$n" --max-output 128 --ignore-eos \
      --temperature 0 --json --quant q8_0
  done
  echo "cpu-roofline: $b: batched 32 x (128 + 128), q4_0 weights" >&2
  run "batchq4-32" "$b" --workload "$TMP/batch.jsonl" -n 32 --max-output 128 --ignore-eos \
    --temperature 0 --json --quant q4_0
done

python3 - "$TMP" "$B" "$BEFORE" "$THREADS" "$DECODE" <<'PY'
import json, re, sys
tmp, after, before, threads, decode = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
probes = {}
for l in open(tmp + "/probe.txt"):
    k, v = l.split()
    probes.setdefault(k, []).append(v)
bws, peaks = [float(x) for x in probes["read_gbs"]], [float(x) for x in probes["fma_gflops"]]
bw, peak = max(bws), max(peaks)

# --dummy medium: 12 layers, D 768, F 2048, V 32000, 12 heads of 64, untied head.
L, D, F, V, P = 12, 768, 2048, 32000, 128
layer_rows = [(D, D)] * 4 + [(F, D)] * 2 + [(D, F)]     # q k v o gate up down: (rows, k)
QB_BLOCK = {"q8_0": 34, "q4_0": 18, "q4_1": 20}         # kernels/qblock.h
def wbytes(dt):
    mats = L * layer_rows + [(V, D)]                    # + lm_head, read every token
    if dt in QB_BLOCK:
        return sum(r * (k + 31) // 32 * QB_BLOCK[dt] for r, k in mats)
    return sum(r * k for r, k in mats) * {"f32": 4, "f16": 2, "bf16": 2}[dt]
kv_per_ctx = L * 2 * D * 4                              # f32 K and V, all layers
mean_ctx = P + decode / 2
flops = 2 * P * L * sum(r * k for r, k in layer_rows) + 2 * V * D \
      + L * 4 * D * sum(t + 1 for t in range(P))        # QK and PV of the causal prefill

runs = {}   # (metric, build) -> [values]; None: the build lacks the flag
devs = {}
for line in open(tmp + "/results"):
    f = line.split()
    tag, b = f[0], f[1][6:]
    if "unsupported" in line:
        runs.setdefault(("prefill-" + tag[6:], b), None)
        runs.setdefault(("decode-" + tag[6:], b), None)
        runs.setdefault((tag, b), None)
        continue
    if tag.startswith("gemv"):
        kv = dict(x.split("=", 1) for x in f[2:] if "=" in x)
        if "paired_ratio" in kv:
            runs.setdefault((tag, b), []).append(
                (float(kv["paired_ratio"]), float(kv["median_gbs"]), float(kv["read_median_gbs"])))
        continue
    if tag.startswith("bench"):
        m = re.search(r"prefill \d+ tokens in [\d.]+ ms = ([\d.]+) tok/s \| decode \d+ tokens in [\d.]+ ms = ([\d.]+) tok/s \| (.*)$", line.strip())
        runs.setdefault(("prefill-" + tag[6:], b), []).append(float(m.group(1)))
        runs.setdefault(("decode-" + tag[6:], b), []).append(float(m.group(2)))
        devs[b] = m.group(3)
    else:
        runs.setdefault((tag, b), []).append(json.loads(line.split(" ", 2)[2])["throughput_tok_s"])

builds = [x for x in (before, after) if x]
best_pat = probes.get("read_best", ["?"])[bws.index(bw)] if "read_best" in probes else "?"
pats = sorted(k[9:] for k in probes if k.startswith("read_gbs_"))
out = [f"limits (best of {len(bws)}): read {bw:.1f} GB/s (seen {min(bws):.1f}-{max(bws):.1f}; fastest pattern {best_pat}; "
       + ", ".join(f"{p} {max(float(x) for x in probes['read_gbs_' + p]):.1f}" for p in pats) + "), "
       f"peak FMA {peak:.0f} GFLOP/s (seen {min(peaks):.0f}-{max(peaks):.0f}), {probes['vector'][0]}, {threads} threads"]
for b in builds:
    out.append(f"{'before' if before and b == before else 'after'}: {b}: {devs.get(b, '?')}")
out.append("")
out.append("| | " + " | ".join(("before", "after") if before else ("after",)) + " | limit |")
out.append("|---" * (len(builds) + 2) + "|")
def cell(key, b, lim=None):
    v = runs.get((key, b))
    if not v:
        return "-"
    s = f"{max(v):.1f}"
    if lim:
        s += f" ({100 * max(v) / lim:.0f} %)"
    if len(v) > 1:
        s += f" [{min(v):.0f}-{max(v):.0f}]"
    return s
DTS = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1")
for dt in DTS:
    per_tok = wbytes(dt) + kv_per_ctx * mean_ctx
    lim = bw * 1e9 / per_tok
    out.append(f"| decode {dt}, batch 1, tok/s | " + " | ".join(cell("decode-" + dt, b, lim) for b in builds)
               + f" | {lim:.1f} ({per_tok / 1e6:.0f} MB/token) |")
for dt in DTS:
    lim = peak * 1e9 / flops * P
    out.append(f"| prefill {dt}, {P} tokens, tok/s | " + " | ".join(cell("prefill-" + dt, b, lim) for b in builds)
               + f" | {lim:.0f} ({flops / 1e9:.1f} GFLOP) |")
for key, n, dt in [("batch", 1, "f32"), ("batch", 8, "f32"), ("batch", 32, "f32"),
                   ("batchq", 8, "q8_0"), ("batchq", 32, "q8_0"), ("batchq4", 32, "q4_0")]:
    cells = [cell(f"{key}-{n}", b) for b in builds]
    a, z = runs.get((f"{key}-{n}", before)), runs.get((f"{key}-{n}", after))
    if before and a and z:
        cells[-1] += f" ({max(z) / max(a):.2f}x)"
    out.append(f"| {n} x (128 + 128), {dt}, total tok/s | " + " | ".join(cells) + " | |")
out.append("")
out.append("best of the runs (fraction of the limit) [lowest-highest run]")
out.append("")
out.append("decode GEMVs alone (bench-decode-gemv), each step against a plain read of the same")
out.append("bytes: median per-step ratio, lowest-highest of the runs (chain GB/s / read GB/s, medians)")
for dt in DTS:
    cells = []
    for b in builds:
        v = runs.get(("gemv-" + dt, b))
        if not v:
            cells.append("-")
            continue
        v = sorted(v)
        r = v[len(v) // 2]
        cells.append(f"{100 * r[0]:.0f} % [{100 * v[0][0]:.0f}-{100 * v[-1][0]:.0f}] ({r[1]:.1f} / {r[2]:.1f})")
    out.append(f"  {dt}: " + " | ".join(
        f"{'before' if before and b == before else 'after'} {c}" for b, c in zip(builds, cells)))
print("\n".join(out))
PY
