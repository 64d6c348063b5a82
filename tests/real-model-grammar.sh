#!/usr/bin/env bash
# Description: 16 random JSON Schemas (seeded) constrain SmolLM2-135M-Instruct (GGUF Q4_1, tools/models.sh; SKIP without PyPI) at temperature 1, asked for JSON in its chat format: every output that ended validates against its schema (jsonschema), no mask left the model without a token, and each output has the unconstrained run's ids up to the first token its grammar refuses (tests/grammar-schemas.py).
set -u
. "$(dirname "$0")/venv-common.sh"
. "$(dirname "$0")/real-model-common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
venv_need jsonschema
real_model_need
prompt=$'<|im_start|>system\nYou are a helpful assistant. Answer in JSON.<|im_end|>\n<|im_start|>user\nGive me an example.<|im_end|>\n<|im_start|>assistant\n'
"$PY" "$(dirname "$0")/grammar-schemas.py" "$BUILD_DIR/tests/grammar-run" "$SMOLLM2" 16 7 "$prompt"
