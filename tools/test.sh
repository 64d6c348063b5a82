#!/usr/bin/env bash
# The whole test suite in one command: install dependencies, build (with the CUDA
# module when nvcc is available), run every suite. GPU tests skip (exit 77)
# without a GPU. Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/build.sh
meson test -C build --print-errorlogs --num-processes "$(nproc)" "$@"
