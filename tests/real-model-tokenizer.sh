#!/usr/bin/env bash
# Description: the tokenizers of the real models Gemma 3 270M (SentencePiece, 262k pieces) and Qwen2.5-Coder-0.5B-Instruct (byte-level BPE, qwen2 pre-tokenizer), read from their GGUF files (tools/models.sh fetches them; a model that cannot be had is skipped, both: SKIP), against llama.cpp's ids on the same files (tests/data/gemma3, tests/data/qwen2.5-coder: tokenizer-reference.json): test-tokenizer-real on each.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ran=0 fails=0
for m in gemma3 qwen2.5-coder; do
	if ! path=$(bash "$ROOT/tools/models.sh" "$m" 2>/tmp/models-$$.err); then
		echo "skip $m: $(cat /tmp/models-$$.err)"
		continue
	fi
	ran=$((ran + 1))
	"$BUILD_DIR/tests/test-tokenizer-real" "$path" "$ROOT/tests/data/$m/tokenizer-reference.json" ||
		fails=$((fails + 1))
done
rm -f /tmp/models-$$.err
[ $fails = 0 ] || exit 1
[ $ran -gt 0 ] || { echo "SKIP: neither real model is installed"; exit 77; }
