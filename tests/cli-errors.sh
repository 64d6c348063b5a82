#!/usr/bin/env bash
# Description: allm-run and allm-mkmodel refuse bad input with a non-zero exit and one clear error line, never a crash (a missing or wrong OpenBLAS under --gemm openblas included).
set -u

BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
DATA_DIR=${DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}
RUN=$BUILD_DIR/tools/allm-run
MK=$BUILD_DIR/tools/allm-mkmodel

for b in "$RUN" "$MK"; do
	[ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-cli-err.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0

# A model with a 512-token context and a tokenizer: stories260K.
M=$DATA_DIR/models/stories260K
[ -f "$M/model.safetensors" ] || { echo "FAIL: $M is missing from the checkout"; exit 1; }

# expect_error NAME REGEX CMD...: CMD must exit non-zero without a signal, and
# stderr must hold a line matching REGEX (case-insensitive) that says what is wrong.
expect_error() {
	local name=$1 re=$2
	shift 2
	n=$((n + 1))
	"$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$? msg
	msg=$(grep -iE -- "$re" "$tmp/err" | head -n 1)
	if [ $rc -eq 0 ]; then
		echo "FAIL: $name: exit status 0"
		fails=$((fails + 1))
	elif [ $rc -ge 128 ]; then
		echo "FAIL: $name: killed by signal $((rc - 128)) (crash); stderr: $(tail -n 3 "$tmp/err")"
		fails=$((fails + 1))
	elif [ -z "$msg" ]; then
		echo "FAIL: $name: exit $rc but no error line matching /$re/; stderr: $(tail -n 3 "$tmp/err")"
		fails=$((fails + 1))
	elif grep -qiE 'assert|segmentation|abort|core dumped|sanitizer' "$tmp/err"; then
		echo "FAIL: $name: looks like a crash: $(grep -iE 'assert|segmentation|abort|sanitizer' "$tmp/err" | head -n 1)"
		fails=$((fails + 1))
	elif [ "$(grep -ciE -- "$re" "$tmp/err")" -ne 1 ] || [ "$(wc -l <"$tmp/err")" -gt 4 ]; then
		echo "FAIL: $name: more than one error line:"
		sed 's/^/    /' "$tmp/err" | head -n 8
		fails=$((fails + 1))
	elif [ -s "$tmp/out" ] && grep -q '^generated:' "$tmp/out"; then
		echo "FAIL: $name: printed generated ids despite the error"
		fails=$((fails + 1))
	else
		echo "ok: $name (exit $rc): $msg"
	fi
}

R="$RUN --device cpu --model $M --temperature 0 --max-tokens 4"

# --- prompts -------------------------------------------------------------------------
expect_error "id outside the vocabulary" 'vocabulary' $R --prompt-ids 1,99999
expect_error "negative id" 'vocabulary' $R --prompt-ids 1,-3
expect_error "malformed ids" 'integers|unexpected' $R --prompt-ids 1,x
expect_error "trailing junk in ids" 'integers|unexpected' $R --prompt-ids 1,2x
expect_error "empty ids" 'empty|integers' $R --prompt-ids ''
long=$(seq -s, 1 600 | sed 's/[0-9]\+/5/g')
expect_error "prompt longer than the context" 'context' $R --prompt-ids "$long"
expect_error "no prompt" 'prompt' $RUN --device cpu --model "$M"
expect_error "admit-overcommit below 0.1" 'admit-overcommit.*0\.1\.\.1000000' $R --admit-overcommit 0.05 --prompt-ids 1,2
expect_error "admit-overcommit not a number" 'admit-overcommit' $R --admit-overcommit abc --prompt-ids 1,2
expect_error "both prompts" 'prompt' $R --prompt hi --prompt-ids 1,2

# --- models ---------------------------------------------------------------------------
expect_error "nonexistent model" '/nonexistent' $RUN --device cpu --model /nonexistent --prompt-ids 1,2
# --gemm openblas opens the library only then: a missing one is that flag's error
expect_error "OpenBLAS missing" 'openblas.*cannot load' env ALLM_OPENBLAS=/nonexistent/libopenblas.so.0 \
	$R --gemm openblas --prompt-ids 1,2
expect_error "not OpenBLAS" 'openblas.*lacks cblas_sgemm' env ALLM_OPENBLAS=libc.so.6 $R --gemm openblas --prompt-ids 1,2
mkdir -p "$tmp/trunc"
cp "$M"/*.json "$tmp/trunc/"
head -c 100000 "$M/model.safetensors" >"$tmp/trunc/model.safetensors"
expect_error "truncated safetensors" 'truncated|too short|model\.safetensors' $R --model "$tmp/trunc" --prompt-ids 1,2
mkdir -p "$tmp/nocfg"
expect_error "directory without config.json" 'config\.json' $RUN --device cpu --model "$tmp/nocfg" --prompt-ids 1,2
expect_error "unknown --dummy preset" 'unknown preset.*nosuch|nosuch.*known' $RUN --device cpu --dummy nosuch --prompt-ids 1,2

# --- flag values --------------------------------------------------------------------------
expect_error "--temperature -1" 'temperature' $R --prompt-ids 1,2 --temperature -1
expect_error "--top-p 0" 'top-p' $R --prompt-ids 1,2 --top-p 0
expect_error "--top-p 1.5" 'top-p' $R --prompt-ids 1,2 --top-p 1.5
expect_error "--top-k -1" 'top-k' $R --prompt-ids 1,2 --top-k -1
expect_error "--max-tokens 0" 'max-tokens' $R --prompt-ids 1,2 --max-tokens 0
expect_error "--block-size 0" 'block-size' $R --prompt-ids 1,2 --block-size 0
expect_error "--device tpu" 'device' $RUN --model "$M" --prompt-ids 1,2 --device tpu
expect_error "--dtype int4" 'dtype' $R --prompt-ids 1,2 --dtype int4
expect_error "--kv-cache-dtype int8" 'kv-cache-dtype' $R --prompt-ids 1,2 --kv-cache-dtype int8
expect_error "--seed abc" 'seed' $R --prompt-ids 1,2 --seed abc
expect_error "unknown flag" 'unknown flag.*--frobnicate' $R --prompt-ids 1,2 --frobnicate 3
expect_error "unknown flag at the end" 'unknown flag.*--frobnicate|missing value.*--frobnicate' $R --prompt-ids 1,2 --frobnicate
expect_error "missing value" 'model.*value|value.*model' $RUN --prompt-ids 1,2 --model

# --- workloads ----------------------------------------------------------------------------
printf '{"prompt_ids": [5, 6]}\n{"prompt": "Once upon a time"}\n' >"$tmp/text.jsonl"
# a --dummy model has no tokenizer.json: nothing can encode line 2
expect_error "text prompt without a tokenizer" 'line 2 .*tokenizer' "$RUN" --dummy tiny \
	--workload "$tmp/text.jsonl" -n 2 --max-output 4
printf '{"prompt_ids": [5, 6]}\n{"prompt_ids": "x"}\n' >"$tmp/bad.jsonl"
expect_error "malformed workload line" 'bad.jsonl:2:.*prompt_ids' "$RUN" --model "$M" --workload "$tmp/bad.jsonl" \
	-n 2 --max-output 4

# --- no GPU -------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
	echo "skip: --device cuda check (a GPU is present)"
else
	expect_error "--device cuda without a GPU" 'cuda|gpu|nvidia|driver' \
		$RUN --model "$M" --prompt-ids 1,2 --max-tokens 2 --device cuda
fi

# --- allm-mkmodel -------------------------------------------------------------------------
expect_error "mkmodel without --out" '--out' "$MK" --seed 1
expect_error "mkmodel --arch gpt2" 'arch' "$MK" --out "$tmp/x" --arch gpt2
expect_error "mkmodel unknown preset" 'preset' "$MK" --out "$tmp/x" --preset huge
expect_error "mkmodel --kv-heads 3" 'num_key_value_heads|kv' "$MK" --out "$tmp/x" --kv-heads 3
expect_error "mkmodel --dtype i8" 'dtype' "$MK" --out "$tmp/x" --dtype i8
expect_error "mkmodel --vocab 100" 'vocab' "$MK" --out "$tmp/x" --vocab 100

if [ $fails -ne 0 ]; then
	echo "cli-errors: $fails of $n checks failed"
	exit 1
fi
echo "cli-errors: all $n checks ok"
exit 0
