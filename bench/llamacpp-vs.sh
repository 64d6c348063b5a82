#!/usr/bin/env bash
# allm-run against llama.cpp on the same weights, side by side: --dummy medium
# (written by allm-mkmodel, converted to GGUF by bench/hf-to-gguf.py in each type),
# 2 threads, batch-1 prefill of 128 ids and greedy decode, the two alternating run by
# run under /work/.bench.lock (other sessions share the cores). Our side runs the
# dummy weights quantized at load (--quant q8_0|q4_0, the same bytes as the GGUF's:
# both are ggml's reference quantizers) with an f16 KV cache, as llama.cpp keeps it.
#
# usage: bench/llamacpp-vs.sh [BUILD_DIR]
#   LLAMACPP_PY  a python with llama-cpp-python, built once from source outside the repo
#                (bench/README.md, "GGUF block weights": 0.3.36, its llama.cpp with
#                AVX-512, VNNI, BF16 and the repacked Q4_0/Q8_0 kernels; without AMX,
#                whose matmul crashed on this machine's Xeon with GGML_NATIVE=ON)
#   GGUF_PY      a python with gguf and numpy, pinned in tools/venv-pins.txt (`. tests/venv-common.sh;
#                venv_need gguf` installs them into build/venv and sets $PY)
#   TYPES (F32 F16 Q8_0 Q4_0), REPS (3), DECODE (64), THREADS (2), GGUF_DIR (a cache
#   of the converted files, default a temporary directory)
#   FILES        instead of --dummy medium: a directory of ready GGUF files
#                $FILES/$PREFIX-$TYPE.gguf (PREFIX default smollm2), e.g. SmolLM2
#                re-quantized by llama.cpp's own quantizer (bench/README.md, "Real
#                model"); both sides read each file, ours with --dtype auto (each
#                tensor in its own type, its blocks as stored); GGUF_PY not needed
# Each line of the results also records the load average before the run.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
FILES=${FILES:-}
PREFIX=${PREFIX:-smollm2}
TYPES=${TYPES:-F32 F16 Q8_0 Q4_0}
REPS=${REPS:-3}
DECODE=${DECODE:-64}
THREADS=${THREADS:-2}
LOCK=${LOCK:-/work/.bench.lock}
: "${LLAMACPP_PY:?set LLAMACPP_PY to a python with llama-cpp-python}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
G=${GGUF_DIR:-$TMP}
mkdir -p "$G"

if [ -z "$FILES" ]; then
  : "${GGUF_PY:?set GGUF_PY to a python with gguf and numpy}"
  if [ ! -f "$G/medium/config.json" ]; then
    "$B/tools/allm-mkmodel" --out "$G/medium" --preset medium --untied >&2
  fi
  for t in $TYPES; do
    [ -f "$G/medium-$t.gguf" ] || "$GGUF_PY" bench/hf-to-gguf.py "$G/medium" "$G/medium-$t.gguf" "$t"
  done
fi

# the file llama.cpp reads, and what our side loads
their_file() { if [ -n "$FILES" ]; then echo "$FILES/$PREFIX-$1.gguf"; else echo "$G/medium-$1.gguf"; fi; }
ours_flags() {
  if [ -n "$FILES" ]; then echo "--model $FILES/$PREFIX-$1.gguf"; return; fi
  case $1 in
    F32) echo "--model $G/medium --dtype f32" ;;
    F16) echo "--model $G/medium --dtype f16" ;;
    *) echo "--model $G/medium --quant $(echo "$1" | tr 'A-Z' 'a-z')" ;;
  esac
}

for rep in $(seq "$REPS"); do
  for t in $TYPES; do
    echo "llamacpp-vs: rep $rep/$REPS $t" >&2
    flock "$LOCK" sh -c 'printf "load %s " "$(cut -d" " -f1 /proc/loadavg)"; exec "$@"' _ \
      "$LLAMACPP_PY" bench/llamacpp-bench.py "$(their_file "$t")" "$THREADS" "$DECODE" |
      sed "s/^load \([0-9.]*\) \(.*\)/$t \2 | load \1/" >>"$TMP/results"
    # shellcheck disable=SC2046
    flock "$LOCK" sh -c 'printf "load %s " "$(cut -d" " -f1 /proc/loadavg)"; exec "$@"' _ \
      "$B/tools/allm-run" --threads "$THREADS" $(ours_flags "$t") \
      --kv-cache-dtype f16 --bench --max-tokens $((DECODE + 1)) --temperature 0 --ids 2>/dev/null |
      tr '\n' ' ' | sed "s/^load \([0-9.]*\) \(.*\)/$t ours: \2 | load \1/" >>"$TMP/results"
    echo >>"$TMP/results"
  done
done

python3 - "$TMP/results" <<'PY'
import re, sys, statistics
rows = {}
loads = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 3:
        continue
    ld = re.search(r"\| load ([\d.]+)\s*$", line)
    if ld:
        loads.append(float(ld.group(1)))
    t, who = f[0], f[1].rstrip(":")
    m = re.search(r"prefill \d+ tokens in [\d.]+ ms = ([\d.]+) tok/s \| decode \d+ tokens in [\d.]+ ms = ([\d.]+) tok/s", line)
    if not m:
        continue
    rows.setdefault((t, who), []).append((float(m.group(1)), float(m.group(2))))
    g = re.search(r"generated: ([\d ,]+)", line) or re.search(r"ids ([\d,]+)", line)
print("| weights | prefill ours | prefill llama.cpp | ratio | decode ours | decode llama.cpp | ratio |")
print("|---|---|---|---|---|---|---|")
for t in dict.fromkeys(k[0] for k in rows):
    o, l = rows.get((t, "ours"), []), rows.get((t, "llamacpp"), [])
    if not o or not l:
        continue
    def cell(v): return f"{statistics.median(v):.1f} [{min(v):.0f}-{max(v):.0f}]"
    def ratio(a, b):  # per rep pairs, median and range
        r = [x / y for x, y in zip(a, b)]
        return f"{statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]"
    po, pl = [x[0] for x in o], [x[0] for x in l]
    do, dl = [x[1] for x in o], [x[1] for x in l]
    print(f"| {t} | {cell(po)} | {cell(pl)} | {ratio(po, pl)} | {cell(do)} | {cell(dl)} | {ratio(do, dl)} |")
print()
print("tok/s, median [lowest-highest] of the runs; ratio: per alternating pair")
if loads:
    print(f"load average (1 min) as each run started: {min(loads):.2f}-{max(loads):.2f}")
PY
if [ -n "${OUT:-}" ]; then cp "$TMP/results" "$OUT"; fi
