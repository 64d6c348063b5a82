#!/usr/bin/env bash
# Description: a chat with Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M, arch qwen2, tools/models.sh qwen2.5-coder; SKIP where it is not installed) through allm-engined --model FILE.gguf and allm-gateway, driven by the openai Python SDK as docs/USAGE.md shows it: the gateway renders the file's own Jinja chat template (Qwen2.5's, whose default system message "You are Qwen, created by Alibaba Cloud..." it adds) into exactly llama.cpp's prompt (tests/data/real-archs/qwen2.json, token for token through /tokenize), and the answers, streamed or not, are the engine's own greedy answers to that prompt (allm-run in-process), ending at the template's <|im_end|>.
. "$(dirname "$0")/gateway-common.sh"
venv_need openai
root=$(cd "$(dirname "$0")/.." && pwd)
if ! QWEN=$(bash "$root/tools/models.sh" --path qwen2.5-coder 2>"$tmp/models.err"); then
	echo "SKIP: $(cat "$tmp/models.err")"
	exit 77
fi
REF=$root/tests/data/real-archs/qwen2.json

# a profile of its own: only the first run of a build calibrates on this model
ctl_start qwen --model "$QWEN" --profile "$BUILD_DIR/real-model-qwen-profile.json" \
	--max-num-batched-tokens 256 --gpu-blocks 64 --cpu-blocks 64
gw_start qwen
gw_up "$GW_URL" || exit 1
file_has "$GW_LOG" "chat: jinja sha256:" && ok "the gateway renders the file's own chat template (Jinja)" ||
	fail "chat template not found: $(grep -i chat "$GW_LOG" | head -n 2)"

# the engine's answers in-process (allm-run, no daemon, no HTTP) to llama.cpp's
# rendering of the two chat prompts
for i in 0 1; do
	ids=$(python3 -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["greedy"][int(sys.argv[2])]["prompt_ids"])))' "$REF" "$i")
	"$RUN" --model "$QWEN" --device cpu --prompt-ids "$ids" --max-tokens 24 --temperature 0 --json \
		>"$tmp/inproc-$i.json" 2>/dev/null || fail "allm-run on chat prompt $i"
done

"$PY" - "$GW_URL" "$REF" "$tmp" <<'PY' || fail "the openai SDK chat"
import json, sys, urllib.request
import openai

url, ref, tmp = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
model = client.models.list().data[0].id
bad = 0
def check(cond, what):
    global bad
    print(("ok: " if cond else "FAIL: ") + what)
    bad += not cond

for i, g in enumerate(ref["greedy"][:2]):  # one user turn each, the template's default system message
    user = g["prompt"].split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    messages = [{"role": "user", "content": user}]
    # the rendered prompt, token for token: the gateway's /tokenize reads messages as chat does
    req = urllib.request.Request(url + "/tokenize", data=json.dumps({"model": model, "messages": messages}).encode(),
                                 headers={"Content-Type": "application/json"})
    toks = json.load(urllib.request.urlopen(req, timeout=60))["tokens"]
    check(toks == g["prompt_ids"], f"{user!r}: the template gives llama.cpp's prompt ({len(toks)} tokens)")
    inproc = json.load(open(f"{tmp}/inproc-{i}.json"))
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0)
    text = r.choices[0].message.content
    print(f"  {user!r} -> {text!r} ({r.choices[0].finish_reason})")
    check(r.usage.prompt_tokens == len(g["prompt_ids"]), f"usage.prompt_tokens {r.usage.prompt_tokens}")
    check(text == inproc["text"] and r.usage.completion_tokens == inproc["generated_tokens"],
          f"{user!r}: the engine's own greedy answer (allm-run: {inproc['text']!r})")
    check(r.choices[0].finish_reason == inproc["finish_reason"], f"finish_reason {r.choices[0].finish_reason}")
    chunks = client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0,
                                            stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(streamed == text, f"{user!r}: streamed, the same text")

# a short answer ends at the template's end of turn, which is not in the text
r = client.chat.completions.create(model=model, max_tokens=40, temperature=0, messages=[
    {"role": "system", "content": "Answer with one word."},
    {"role": "user", "content": "What is the capital of France?"}])
text = r.choices[0].message.content
print(f"  one word -> {text!r} ({r.choices[0].finish_reason})")
check(r.choices[0].finish_reason == "stop" and "Paris" in text and "<|im_end|>" not in text,
      "a short answer stops at <|im_end|>")
sys.exit(1 if bad else 0)
PY

gw_stop "$GW_PID" "qwen"
daemon_stop "qwen"
finish
