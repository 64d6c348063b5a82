#!/usr/bin/env bash
# Description: --cpu-isa and --quant through allm-run: the device string names the level asked for, bad values get one clear error, and on every level this CPU has (GGUF q8_0/q4_0/q4_1 blocks, and --quant int8, an alias that must give q8_0's outputs and report q8_0 weights; f32 weights on the portable and the default level; bf16 weights on avx512-bf16 and the AMX levels) a workload gives the same outputs_sha256 with plentiful blocks, under recompute and swap preemption, and on 1 and 2 threads (batch invariance end to end); the block formats give the same outputs on every x86 level (their GEMM's bits are the same everywhere; the portable level's attention differs).
set -u
RUN=${BUILD_DIR:?}/tools/allm-run
M=${DATA_DIR:?}/models/stories260K
[ -d "$M" ] || { echo "FAIL: $M is missing from the checkout"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval('d'+sys.argv[2]))" "$@"; }

# bad values: one clear error, nothing run
for bad in "--cpu-isa sse9" "--quant int4" "--cpu-isa"; do
  if "$RUN" --model "$M" --prompt-ids 1,2 --max-tokens 2 $bad >"$tmp/bad.out" 2>"$tmp/bad.err"; then
    echo "FAIL: '$bad' was accepted"; fail=1
  elif ! grep -q -- "${bad%% *}" "$tmp/bad.err"; then
    echo "FAIL: '$bad': the error does not name the flag"; cat "$tmp/bad.err"; fail=1
  else
    echo "'$bad' refused: $(head -n1 "$tmp/bad.err")"
  fi
done

W=(--model "$M" --device cpu --workload chatbot -n 16 --max-output 24 --seed 3 --temperature 0 --json --profile "$tmp/profile.json")
levels=$("$RUN" --help 2>&1 | grep -A2 -- '--cpu-isa' | tr -s ' ,' '\n' | grep -E '^(portable|avx2|avx2-vnni|avx512|avx512-vnni|avx512-bf16|amx-bf16|amx-int8)$')
[ -n "$levels" ] || { echo "FAIL: no levels in --help"; exit 1; }
best=$("$RUN" --model "$M" --prompt-ids 1 --max-tokens 1 2>&1 | sed -n 's/.*gemm: \([a-z0-9-]*\)).*/\1/p' | head -n1)
tested=0
for isa in $levels; do
  if ! "$RUN" --model "$M" --prompt-ids 1,403,407 --max-tokens 2 --ids --cpu-isa "$isa" >/dev/null 2>"$tmp/probe.err"; then
    grep -q "cannot run --cpu-isa $isa" "$tmp/probe.err" \
      && { echo "$isa: not on this CPU (clear error)"; continue; } \
      || { echo "FAIL: --cpu-isa $isa failed without saying why"; cat "$tmp/probe.err"; fail=1; continue; }
  fi
  grep -q "gemm: $isa)" "$tmp/probe.err" || { echo "FAIL: --cpu-isa $isa: device string"; cat "$tmp/probe.err"; fail=1; }
  qs="q8_0 q4_0 q4_1" # f32 weights: the GEMM's bits per level are test-cpu-gemm's; two levels here
  [ "$isa" = portable ] || [ "$isa" = "$best" ] && qs="none $qs"
  # bf16 weights where the level has its own bf16 kernel (bf16 activations)
  case $isa in avx512-bf16|amx-bf16|amx-int8) qs="$qs bf16" ;; esac
  for q in $qs; do
    base=$tmp/$isa-$q
    if [ "$q" = bf16 ]; then wq=(--dtype bf16 --quant none); else wq=(--quant "$q"); fi
    "$RUN" "${W[@]}" --cpu-isa "$isa" "${wq[@]}" >"$base.json" 2>"$base.err" \
      || { echo "FAIL: $isa $q plentiful run"; cat "$base.err"; fail=1; continue; }
    ref=$(field "$base.json" "['outputs_sha256']")
    if [ "$q" = q8_0 ]; then # --quant int8: another name for q8_0, nothing else printed
      "$RUN" "${W[@]}" --cpu-isa "$isa" --quant int8 >"$base.int8.json" 2>"$base.int8.err" \
        || { echo "FAIL: $isa --quant int8 run"; cat "$base.int8.err"; fail=1; }
      [ "$(field "$base.int8.json" "['outputs_sha256']" 2>/dev/null)" = "$ref" ] \
        || { echo "FAIL: $isa: --quant int8 does not give --quant q8_0's outputs"; fail=1; }
      grep -q "q8_0 weights" "$base.int8.err" && ! grep -qi "int8 weights" "$base.int8.err" \
        || { echo "FAIL: $isa: --quant int8 not reported as q8_0 weights"; cat "$base.int8.err"; fail=1; }
    fi
    # the paper's engine (no admission headroom), so that the tight pools do preempt
    vs=("--gpu-blocks 10 --cpu-blocks 6 --preempt recompute --admit-lookahead 0" "--gpu-blocks 10 --cpu-blocks 6 --preempt swap --admit-lookahead 0" "--threads 1 --max-num-seqs 3")
    # the block formats' GEMM is one family per few levels (cpu-gemm-qblock.h):
    # preemption on the best and the portable level, one thread everywhere
    case $q in q8_0|q4_0|q4_1) [ "$isa" = portable ] || [ "$isa" = "$best" ] || vs=("${vs[2]}") ;; esac
    for v in "${vs[@]}"; do
      "$RUN" "${W[@]}" --cpu-isa "$isa" "${wq[@]}" $v >"$base.v.json" 2>/dev/null \
        || { echo "FAIL: $isa $q $v run"; fail=1; continue; }
      h=$(field "$base.v.json" "['outputs_sha256']")
      [ "$h" = "$ref" ] || { echo "FAIL: $isa --quant $q: '$v' changed the outputs"; fail=1; }
      case $v in *preempt*)
        [ "$(field "$base.v.json" "['preemptions']['swap'] + d['preemptions']['recompute']")" -gt 0 ] \
          || { echo "FAIL: $isa $q '$v': no preemption"; fail=1; } ;;
      esac
    done
    echo "$isa --quant $q: outputs_sha256 ${ref:0:16}... equal under recompute, swap, 1 thread"
    case $q in q8_0|q4_0|q4_1) # one result on every x86 level
      [ "$isa" = portable ] && continue
      first=$tmp/first-$q
      [ -f "$first" ] || echo "$isa $ref" >"$first"
      read -r first_isa first_ref <"$first"
      [ "$ref" = "$first_ref" ] || { echo "FAIL: --quant $q: $isa's outputs differ from $first_isa's"; fail=1; } ;;
    esac
  done
  tested=$((tested + 1))
done
[ "$tested" -ge 2 ] || { echo "FAIL: fewer than two levels tested"; fail=1; }
exit $fail
