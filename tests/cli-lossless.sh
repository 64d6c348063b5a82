#!/usr/bin/env bash
# Description: preemption, the disk tier and chunked prefill lose nothing: allm-run --workload gives the same outputs_sha256 with plentiful blocks and with --gpu-blocks 16 --cpu-blocks 8 under each of --preempt adaptive, recompute and swap, and the constrained runs report preemptions of the expected kinds (recompute under fcfs: there fair's headroom admits only what can run to its end, so it never preempts); fair and fcfs agree too, with --chunked-prefill on (prompts split into 24-token chunks, mixed steps reported) and off (no mixed step), and with the paper's fair (no headroom, no aging), and with a disk tier under each policy (disk swaps under swap and adaptive, none under recompute, nothing left in its directory; an unusable directory is a warning, not a failure); 16-bit K/V (--kv-cache-dtype f16, bf16) doubles the blocks and keeps its outputs under recompute and swap; repetition / frequency / presence penalties change the outputs and keep them under recompute and swap; --min-tokens holds EOS back; the prefix cache (prompts sharing system prompts) gives the same outputs off and on under every policy, chunked prefill on and off, with host and disk tiers under tight device blocks; a corrupted profile is ignored with a warning and rewritten. QUANT=FORMAT runs all of it on quantized weights.
set -u
RUN=${BUILD_DIR:?}/tools/allm-run
M=${DATA_DIR:?}/models/stories260K
[ -d "$M" ] || { echo "FAIL: $M is missing from the checkout"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
W=(--model "$M" --device cpu --workload chatbot -n 64 --max-output 48 --seed 1 --temperature 0 --json --profile "$tmp/profile.json")
# QUANT=q8_0|q4_0|q4_1: the same runs on weights quantized at load (tests/meson.build)
[ -n "${QUANT:-}" ] && W+=(--quant "$QUANT") && echo "weights: --quant $QUANT"

field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval('d'+sys.argv[2]))" "$@"; }

"$RUN" "${W[@]}" >"$tmp/plenty.json" 2>"$tmp/plenty.err" || { echo "FAIL: plentiful run"; cat "$tmp/plenty.err"; exit 1; }
ref=$(field "$tmp/plenty.json" "['outputs_sha256']")
echo "plentiful blocks: outputs_sha256 $ref"
[ "$(field "$tmp/plenty.json" "['requests']")" = 64 ] || { echo "FAIL: not 64 requests"; fail=1; }

# fair under --preempt recompute leaves room for every admitted request's whole
# growth (a victim would be recomputed), so it never preempts: fcfs does
sched_for() { [ "$1" = recompute ] && echo fcfs || echo fair; }
for p in adaptive recompute swap; do
  out=$tmp/$p.json
  if ! "$RUN" "${W[@]}" --gpu-blocks 16 --cpu-blocks 8 --preempt "$p" --sched "$(sched_for "$p")" \
    >"$out" 2>"$tmp/$p.err"; then
    echo "FAIL: constrained $p run failed"; cat "$tmp/$p.err"; fail=1; continue
  fi
  h=$(field "$out" "['outputs_sha256']"); sw=$(field "$out" "['preemptions']['swap']"); rc=$(field "$out" "['preemptions']['recompute']")
  echo "--preempt $p --gpu-blocks 16 --cpu-blocks 8: sha $h swap $sw recompute $rc"
  [ "$h" = "$ref" ] || { echo "FAIL: $p changed the outputs"; fail=1; }
  [ $((sw + rc)) -gt 0 ] || { echo "FAIL: $p: no preemption under 16 GPU blocks"; fail=1; }
  case $p in
    recompute) [ "$sw" = 0 ] && [ "$rc" -gt 0 ] || { echo "FAIL: recompute mode swapped or never recomputed"; fail=1; } ;;
    swap) [ "$sw" -gt 0 ] || { echo "FAIL: swap mode never swapped"; fail=1; } ;;
  esac
done

for s in fair fcfs; do
  out=$tmp/sched-$s.json
  "$RUN" "${W[@]}" --gpu-blocks 16 --cpu-blocks 8 --sched "$s" --max-num-seqs 8 >"$out" 2>/dev/null \
    || { echo "FAIL: --sched $s run failed"; fail=1; continue; }
  h=$(field "$out" "['outputs_sha256']")
  echo "--sched $s --max-num-seqs 8: sha $h turnaround $(field "$out" "['mean_weighted_turnaround']")"
  [ "$h" = "$ref" ] || { echo "FAIL: --sched $s changed the outputs"; fail=1; }
done
for c in on off; do
  for s in fair fcfs; do
    out=$tmp/chunk-$c-$s.json
    "$RUN" "${W[@]}" --gpu-blocks 16 --cpu-blocks 8 --sched "$s" --chunked-prefill "$c" \
      --max-num-batched-tokens 24 >"$out" 2>/dev/null || { echo "FAIL: --chunked-prefill $c --sched $s failed"; fail=1; continue; }
    h=$(field "$out" "['outputs_sha256']"); mixed=$(field "$out" "['steps']['mixed']")
    echo "--chunked-prefill $c --sched $s --max-num-batched-tokens 24: sha $h, $mixed mixed steps"
    [ "$h" = "$ref" ] || { echo "FAIL: --chunked-prefill $c --sched $s changed the outputs"; fail=1; }
    if [ $c = on ]; then [ "$mixed" -gt 0 ] || { echo "FAIL: chunked prefill never mixed a step"; fail=1; }
    else [ "$mixed" = 0 ] || { echo "FAIL: --chunked-prefill off mixed $mixed steps"; fail=1; }; fi
  done
done
# the disk tier: a third place for victims, same outputs under every policy
mkdir -p "$tmp/kv"
for p in adaptive swap recompute; do
  out=$tmp/disk-$p.json
  "$RUN" "${W[@]}" --gpu-blocks 16 --cpu-blocks 4 --disk-swap-space 0.01 --disk-swap-dir "$tmp/kv" \
    --preempt "$p" >"$out" 2>"$tmp/disk-$p.err" || { echo "FAIL: disk tier, --preempt $p"; cat "$tmp/disk-$p.err"; fail=1; continue; }
  h=$(field "$out" "['outputs_sha256']"); dk=$(field "$out" "['preemptions']['disk']")
  echo "--disk-swap-space 0.01 --cpu-blocks 4 --preempt $p: sha $h, $dk to disk"
  [ "$h" = "$ref" ] || { echo "FAIL: the disk tier changed the outputs ($p)"; fail=1; }
  case $p in
    recompute) [ "$dk" = 0 ] || { echo "FAIL: recompute policy went to disk"; fail=1; } ;;
    swap) [ "$dk" -gt 0 ] || { echo "FAIL: swap policy never used the disk with a full host pool"; fail=1; } ;;
  esac
  grep -q 'disk KV tier: .* in '"$tmp/kv" "$tmp/disk-$p.err" || { echo "FAIL: no line says how the disk tier was opened"; fail=1; }
done
[ -z "$(ls -A "$tmp/kv")" ] || { echo "FAIL: files left in the disk swap directory: $(ls -A "$tmp/kv")"; fail=1; }
# a directory that cannot hold it: a warning, and the run goes on with two tiers
touch "$tmp/not-a-dir"
"$RUN" "${W[@]}" -n 8 --disk-swap-space 0.01 --disk-swap-dir "$tmp/not-a-dir" >"$tmp/nodir.json" 2>"$tmp/nodir.err" &&
  grep -q 'warning: .*not a directory.*serving without a disk tier' "$tmp/nodir.err" &&
  echo "an unusable --disk-swap-dir: a warning, served without the tier" ||
  { echo "FAIL: an unusable --disk-swap-dir: $(cat "$tmp/nodir.err")"; fail=1; }
out=$tmp/paper.json
"$RUN" "${W[@]}" --gpu-blocks 16 --cpu-blocks 8 --chunked-prefill off --admit-lookahead 0 \
  --max-wait-factor 0 >"$out" 2>/dev/null || { echo "FAIL: the paper's fair failed"; fail=1; }
[ "$(field "$out" "['outputs_sha256']")" = "$ref" ] && echo "the paper's fair (no headroom, no aging): same outputs" ||
  { echo "FAIL: the paper's fair changed the outputs"; fail=1; }
# 16-bit K/V (--kv-cache-dtype): twice the blocks in the same memory, and the same
# outputs with and without preemption under each policy (recompute rebuilds the K/V
# in the same dtype the swap keeps)
for kd in f16 bf16; do
  "$RUN" "${W[@]}" --kv-cache-dtype $kd >"$tmp/kv-$kd.json" 2>"$tmp/kv-$kd.err" ||
    { echo "FAIL: --kv-cache-dtype $kd"; cat "$tmp/kv-$kd.err"; fail=1; continue; }
  kref=$(field "$tmp/kv-$kd.json" "['outputs_sha256']")
  g16=$(field "$tmp/kv-$kd.json" "['blocks']['gpu']"); g32=$(field "$tmp/plenty.json" "['blocks']['gpu']")
  echo "--kv-cache-dtype $kd: sha $kref, $g16 GPU blocks (f32: $g32)"
  [ "$g16" -ge $((2 * g32 - 1)) ] || { echo "FAIL: $kd K/V did not double the blocks ($g16 vs $g32)"; fail=1; }
  grep -q "block size 16, $kd," "$tmp/kv-$kd.err" || { echo "FAIL: the KV line does not name $kd"; fail=1; }
  for p in recompute swap; do
    out=$tmp/kv-$kd-$p.json
    "$RUN" "${W[@]}" --kv-cache-dtype $kd --gpu-blocks 16 --cpu-blocks 8 --preempt $p \
      --sched "$(sched_for $p)" >"$out" 2>/dev/null ||
      { echo "FAIL: --kv-cache-dtype $kd --preempt $p"; fail=1; continue; }
    h=$(field "$out" "['outputs_sha256']"); n=$(field "$out" "['preemptions']['$p']")
    echo "--kv-cache-dtype $kd --preempt $p --gpu-blocks 16: sha $h, $n preemptions"
    [ "$h" = "$kref" ] || { echo "FAIL: $kd K/V: --preempt $p changed the outputs"; fail=1; }
    [ "$n" -gt 0 ] || { echo "FAIL: $kd K/V: --preempt $p never preempted"; fail=1; }
  done
done
# penalties depend on the whole sequence so far: a swapped or recomputed request
# must see the same history (its generated tokens still output, not prompt)
PEN=(--repetition-penalty 1.2 --frequency-penalty 0.4 --presence-penalty 0.3)
"$RUN" "${W[@]}" "${PEN[@]}" >"$tmp/pen.json" 2>/dev/null || { echo "FAIL: penalized run"; fail=1; }
pref=$(field "$tmp/pen.json" "['outputs_sha256']")
[ "$pref" != "$ref" ] || { echo "FAIL: penalties changed no output"; fail=1; }
for p in recompute swap; do
  out=$tmp/pen-$p.json
  "$RUN" "${W[@]}" "${PEN[@]}" --gpu-blocks 16 --cpu-blocks 8 --preempt $p --sched "$(sched_for $p)" \
    >"$out" 2>/dev/null || { echo "FAIL: penalized --preempt $p"; fail=1; continue; }
  h=$(field "$out" "['outputs_sha256']"); n=$(field "$out" "['preemptions']['$p']")
  echo "penalties, --preempt $p --gpu-blocks 16: sha $h, $n preemptions"
  [ "$h" = "$pref" ] || { echo "FAIL: penalties: --preempt $p changed the outputs"; fail=1; }
  [ "$n" -gt 0 ] || { echo "FAIL: penalties: --preempt $p never preempted"; fail=1; }
done
# --min-tokens: greedy "One day" ends with EOS at 251 tokens; asked for 300 at least, later
mt() { "$RUN" --model "$M" --device cpu --prompt "One day" --max-tokens 500 --temperature 0 --json "$@" 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["generated_tokens"], d["finish_reason"])'; }
read -r n0 f0 <<<"$(mt)"; read -r n1 f1 <<<"$(mt --min-tokens 300)"
echo "min_tokens: $n0 tokens ($f0) without, $n1 ($f1) with 300"
[ "$f0" = stop ] && [ "$n0" -lt 300 ] && [ "$f1" = stop ] && [ "$n1" -ge 300 ] ||
  { echo "FAIL: --min-tokens 300 did not hold EOS back"; fail=1; }
# the prefix cache: 64 prompts of 4 "system prompts" (96 ids) + their own 24 ids;
# caching off and on, under each policy, chunked prefill on and off, with tight
# device blocks and a host and disk tier under it, give the plentiful run's outputs
python3 - "$tmp/shared.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(64):
        g = i % 4
        sysp = [1 + (g * 131 + k * 17) % 500 for k in range(96)]
        own = [1 + (i * 71 + k * 13) % 500 for k in range(24)]
        f.write(json.dumps({"prompt_ids": sysp + own}) + "\n")
PY
S=(--model "$M" --device cpu --workload "$tmp/shared.jsonl" -n 64 --max-output 24 --temperature 0 --json --profile "$tmp/profile.json")
"$RUN" "${S[@]}" --prefix-caching off >"$tmp/pc-ref.json" 2>/dev/null || { echo "FAIL: shared-prefix reference"; fail=1; }
pcref=$(field "$tmp/pc-ref.json" "['outputs_sha256']")
for c in on off; do
  for p in adaptive recompute swap; do
    for pc in off on; do
      out=$tmp/pc-$c-$p-$pc.json
      "$RUN" "${S[@]}" --prefix-caching $pc --chunked-prefill $c --preempt $p --gpu-blocks 24 --cpu-blocks 12 \
        --disk-swap-space 0.01 --disk-swap-dir "$tmp/kv" --max-num-batched-tokens 64 >"$out" 2>"$tmp/pc.err" ||
        { echo "FAIL: prefix caching $pc, chunked $c, --preempt $p"; cat "$tmp/pc.err"; fail=1; continue; }
      h=$(field "$out" "['outputs_sha256']"); hit=$(field "$out" "['prefix_cache']['hit_tokens']")
      q=$(field "$out" "['prefix_cache']['queried_tokens']"); tiers=$(field "$out" "['prefix_cache']['hit_tokens_by_tier']")
      echo "prefix caching $pc, chunked $c, --preempt $p, 24 GPU + 12 host blocks + disk: sha $h, $hit of $q tokens hit $tiers"
      [ "$h" = "$pcref" ] || { echo "FAIL: prefix caching $pc (chunked $c, $p) changed the outputs"; fail=1; }
      # recompute never restores from a lower tier: its hits are the device's alone
      if [ $pc = off ]; then [ "$hit" = 0 ] || { echo "FAIL: prefix caching off: $hit tokens hit"; fail=1; }
      elif [ $p = recompute ]; then [ "$(field "$out" "['prefix_cache']['restored_tokens']")" = 0 ] ||
        { echo "FAIL: --preempt recompute restored cached tokens"; fail=1; }
      else [ "$hit" -gt $((q / 2)) ] || { echo "FAIL: prefix caching on: only $hit of $q tokens hit"; fail=1; }; fi
    done
  done
done
[ -z "$(ls -A "$tmp/kv")" ] || { echo "FAIL: files left in the disk swap directory: $(ls -A "$tmp/kv")"; fail=1; }
# a corrupted profile is ignored with a warning and recalibrated; the run still succeeds
echo '{"version": 1, "key": {' >"$tmp/bad-profile.json"
if "$RUN" "${W[@]}" -n 4 --profile "$tmp/bad-profile.json" --calibrate-at-start >"$tmp/bad.json" 2>"$tmp/bad.err"; then
  grep -q "ignored" "$tmp/bad.err" || { echo "FAIL: corrupted profile not reported"; cat "$tmp/bad.err"; fail=1; }
  python3 -c "import json; json.load(open('$tmp/bad-profile.json'))['recompute']" 2>/dev/null \
    || { echo "FAIL: profile not rewritten after recalibration"; fail=1; }
else
  echo "FAIL: a corrupted profile made the run fail"; cat "$tmp/bad.err"; fail=1
fi
exit $fail
