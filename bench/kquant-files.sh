#!/usr/bin/env bash
# The decode GEMVs of real Q4_K_M files the engine cannot run end to end yet (Qwen2.5,
# Gemma 3: other architectures), beside llama.cpp decoding the same file: per rep,
# llama.cpp's batch-1 decode (bench/llamacpp-bench.py: ms per token of the whole
# model) and ours, every matrix of the file in its own type, one gemm each
# (build/tests/bench-decode-gemv -g: ms per token of the matrices alone, so ours
# leaves out attention, norms and sampling that llama.cpp's includes), alternating,
# under /work/.bench.lock, the load average recorded before each run. Then, per block
# type of the file, our GEMVs' rate on one thread against a plain read of the same
# bytes, per CPU second (cpu_ratio: what the kernel does with the core it gets on a
# host busier than its cores).
#
# usage: LLAMACPP_PY=... bench/kquant-files.sh [BUILD_DIR] FILE.gguf...
#   REPS (3), DECODE (32), THREADS (2)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
if [ $# -gt 0 ] && [ -d "$1" ]; then B=$1; shift; fi
REPS=${REPS:-3}
DECODE=${DECODE:-32}
THREADS=${THREADS:-2}
LOCK=${LOCK:-/work/.bench.lock}
: "${LLAMACPP_PY:?set LLAMACPP_PY to a python with llama-cpp-python}"
load() { cut -d' ' -f1 /proc/loadavg; }

echo "| file | rep | load | llama.cpp decode ms/token (whole model) | ours: GEMVs ms/token (matrices only) | llama.cpp / ours |"
echo "|---|---|---|---|---|---|"
for f in "$@"; do
  for rep in $(seq "$REPS"); do
    l=$(load)
    them=$(flock "$LOCK" "$LLAMACPP_PY" bench/llamacpp-bench.py "$f" "$THREADS" "$DECODE" |
      sed -n 's/.*decode \([0-9]*\) tokens in \([0-9.]*\) ms.*/\2 \1/p' | awk '{printf "%.2f", $1 / $2}')
    ours=$(flock "$LOCK" "$B/tests/bench-decode-gemv" -t "$THREADS" -s 3 -g "$f" 2>/dev/null |
      awk '/^median_ms/{print $2}')
    echo "| $(basename "$f") | $rep | $l | $them | $ours | $(awk -v a="$them" -v b="$ours" 'BEGIN{printf "%.2fx", a / b}') |"
  done
done
echo
echo "| file | type | bytes/token (MB) | one thread: GEMV GB per CPU s | plain read GB per CPU s | cpu_ratio | load |"
echo "|---|---|---|---|---|---|---|"
for f in "$@"; do
  for t in q4_k q5_k q6_k q5_0 q8_0 q4_0 f16; do
    out=$(flock "$LOCK" "$B/tests/bench-decode-gemv" -t 1 -s 2 -g "$f" -T "$t" 2>/dev/null) || continue
    echo "$out" | awk -v f="$(basename "$f")" -v t="$t" -v l="$(load)" '
      /^bytes_per_step/{b=$2} /^cpu_gbs/{c=$2} /^read_cpu_gbs/{r=$2} /^cpu_ratio/{x=$2}
      END{printf "| %s | %s | %.1f | %s | %s | %s | %s |\n", f, t, b / 1e6, c, r, x, l}'
  done
done
