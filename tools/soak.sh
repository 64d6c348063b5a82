#!/usr/bin/env bash
# The soak (issue 49): ring and HTTP clients against one allm-engined + allm-gateway
# with the prefix cache on and `allmctl cache reset` every few seconds, every answer
# compared with a cache-off engine's, memory sampled (tools/soak.py does the work).
#
#   bash tools/soak.sh [--minutes N] [--model DIR|FILE.gguf] [soak.py flags...]
#
# Defaults: 5 minutes on stories260K (the repo's model), 4 ring + 4 HTTP clients, a
# reset every 2 s; `--help` lists the rest. Uses build/ (or $BUILD_DIR) and the venv
# tools/venv.sh makes (the adaptivellm package, built from this tree, offline).
# Exit status: 0 all answers equal and memory flat; 1 otherwise; 77 no venv.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
export ALLM_BUILD_DIR=$BUILD_DIR
PY=$(bash "$ROOT/tools/venv.sh" adaptivellm pyzmq msgspec) || exit $?
# the package must load this build's library, not one found elsewhere
ALLM_LIBRARY="$BUILD_DIR/clientlib/$(readlink "$BUILD_DIR/clientlib/libadaptivellm.so" 2>/dev/null)"
export ALLM_LIBRARY
model=$ROOT/data/models/stories260K
for ((i = 1; i <= $#; i++)); do
	[ "${!i}" = --model ] && model=
done
exec "$PY" "$ROOT/tools/soak.py" --build "$BUILD_DIR" ${model:+--model "$model"} "$@"
