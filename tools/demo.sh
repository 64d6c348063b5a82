#!/usr/bin/env bash
# The main job in one command: install dependencies, build, and generate text.
# Uses ../shared/models/stories260K (a real trained tiny Llama) when present,
# otherwise the embedded default model (random weights: its text is noise).
# Extra arguments go to allm-run, e.g. tools/demo.sh --prompt "The dog" --max-tokens 80
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
MODEL=(); PROMPT=(--prompt "Once upon a time")
if [ -d ../shared/models/stories260K ]; then MODEL=(--model ../shared/models/stories260K); fi
exec build/tools/allm-run "${MODEL[@]}" "${PROMPT[@]}" --max-tokens 200 --temperature 0 "$@"
