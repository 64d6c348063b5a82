#!/usr/bin/env bash
# Installs the dependencies and builds into build/ (with the CUDA module when nvcc
# is installed). Sourced by demo.sh and test.sh so both build the same way.
bash tools/install-deps.sh
# nvcc lives outside PATH on a fresh machine; meson finds it there (DESIGN §4)
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
[ -f build/build.ninja ] || meson setup build
ninja -C build
