#!/usr/bin/env bash
# Description: 200 random JSON Schemas (seeded) constrain stories260K at temperature 1 through the engine in-process (tests/grammar-run, batched): every output that ended validates against its schema with jsonschema (PyPI, pinned), no mask left the model without a token, and each output has the unconstrained run's ids up to the first token its grammar refuses (tests/grammar-schemas.py).
set -u
. "$(dirname "$0")/venv-common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
venv_need jsonschema
"$PY" "$(dirname "$0")/grammar-schemas.py" "$BUILD_DIR/tests/grammar-run" "$DATA_DIR/models/stories260K" 200 1
