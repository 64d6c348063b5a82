#!/usr/bin/env bash
# The whole test suite in one command: install dependencies, build (with the CUDA
# module when nvcc is available), run every suite. GPU tests skip (exit 77)
# without a GPU. Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
# nvcc lives outside PATH on a fresh machine; meson finds it there (DESIGN §4)
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
[ -f build/build.ninja ] || meson setup build
ninja -C build
meson test -C build --print-errorlogs --num-processes "$(nproc)" "$@"
