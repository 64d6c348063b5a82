#!/usr/bin/env bash
# Builds the daemon's SQE/arena fuzz target with clang + libFuzzer (+ ASan/UBSan)
# and runs it. Usage: tools/fuzz.sh [RUNS (default 1000000)] [extra libFuzzer flags]
# New crashing inputs land in build-fuzz/; copy the interesting ones into
# tests/fuzz/corpus-sqe/ so the replay test (meson suite "fuzz") keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}; shift || true
OUT=build-fuzz; mkdir -p "$OUT/corpus"
cp -n tests/fuzz/corpus-sqe/* "$OUT/corpus/" 2>/dev/null || true
SRC=(common/common.c kernels/backend.c kernels/cpu/*.c shm/*.c tests/fuzz-sqe.c)
# the daemon's main and the control server (ZeroMQ) are not under test here
ENGINE_DIRS=(tokenizer model kv exec sched workload serve)
INC=(-Icommon -Ikernels -Ikernels/cpu -Ishm -Iinclude -Iengined/ctlserver -Ictl)
for d in "${ENGINE_DIRS[@]}"; do
  INC+=("-Iengined/$d")
  for f in engined/$d/*.c; do [ "$f" = engined/serve/daemon.c ] || SRC+=("$f"); done
done
echo "fuzz.sh: building $OUT/fuzz-sqe (${#SRC[@]} files)" >&2
clang -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${INC[@]}" $(pkg-config --cflags jansson liburing) \
  "${SRC[@]}" -o "$OUT/fuzz-sqe" $(pkg-config --libs jansson liburing) -lopenblas -lm -lpthread -ldl
echo "fuzz.sh: running $RUNS executions" >&2
exec "$OUT/fuzz-sqe" -runs="$RUNS" -max_len=4096 -artifact_prefix="$OUT/" -print_final_stats=1 "$@" "$OUT/corpus"
