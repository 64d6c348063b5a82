#!/usr/bin/env bash
# Description: llama.cpp's example GBNF grammars (tests/data/grammars, ORIGIN.md) compile and constrain stories260K at temperature 1, 5 seeds each: every output that ended parses with lark (PyPI, pinned: an independent parser, the grammar translated by tests/grammar-gbnf.py's own reading of GBNF), no mask left the model without a token, and the grammar keeps the unconstrained ids up to its first refusal.
set -u
. "$(dirname "$0")/venv-common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
venv_need lark
"$PY" "$(dirname "$0")/grammar-gbnf.py" "$BUILD_DIR/tests/grammar-run" "$DATA_DIR/models/stories260K" \
	"$(dirname "$0")/data/grammars" 5
