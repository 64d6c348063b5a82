#!/usr/bin/env bash
# Description: allm-gateway through clients no one here wrote: the openai Python SDK (models, completions plain / streamed / with stop strings / with penalties / with logprobs equal to allm-run's, 20 alternatives included, and 21 refused by name / with a logit bias / with min_tokens / with echo, with n > 1 (whole, streamed, seeded, aborted), a stream it aborts, streamed chat on Llama 2, Llama 3, Mistral, ChatML and Qwen templates whose rendered prompts must equal Jinja's), curl -N for raw SSE, /metrics through prometheus-client's parser and byte-equal to allmctl metrics.
. "$(dirname "$0")/gateway-common.sh"
gw_py

daemon_start gwo
# one gateway follows the engine (its model directory); one per chat template reads a
# model directory whose tokenizer_config.json carries a real template
gw_start gwo
MAIN_URL=$GW_URL MAIN_PID=$GW_PID
CHAT='['
for t in llama-2-chat llama-3-instruct mistral-instruct-v0.1 chatml qwen2-instruct; do
	d=$tmp/model-$t
	mkdir -p "$d"
	cp "$M"/config.json "$M"/generation_config.json "$M"/special_tokens_map.json "$M"/tokenizer.json "$d"/
	python3 - "$M/tokenizer_config.json" "$TESTS_DIR/chat-templates/$t.json" "$d/tokenizer_config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["chat_template"] = json.load(open(sys.argv[2]))["chat_template"]
json.dump(cfg, open(sys.argv[3], "w"), ensure_ascii=False)
PY
	gw_start gwo --model "$d" --served-model-name "$t" --log-level debug
	CHAT="$CHAT{\"name\": \"$t\", \"model\": \"$t\", \"url\": \"$GW_URL\", \"log\": \"$GW_LOG\", \"cfg\": \"$d/tokenizer_config.json\"},"
done
CHAT="${CHAT%,}]"
gw_up "$MAIN_URL" || exit 1

# allm-run's log-probabilities of the same 40 tokens, 20 alternatives each (the most)
"$RUN" --model "$M" --device cpu --prompt "Once upon a time" --max-tokens 40 --temperature 0 --logprobs 20 \
	--json 2>/dev/null >"$tmp/lp.json"
printf '{"completion": %s, "penalized": %s, "logprobs": %s}\n' "$(reference_text "Once upon a time" 40)" \
	"$(reference_text "Once upon a time" 40 --repetition-penalty 1.3 --frequency-penalty 0.5 \
		--presence-penalty 0.2)" \
	"$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["logprobs"]))' "$tmp/lp.json")" \
	>"$tmp/ref.json"
GW_URL=$MAIN_URL GW_MODEL=$M GW_REF=$tmp/ref.json GW_CHAT=$CHAT GW_OUT=$tmp/chat.json \
	"$PY" "$TESTS_DIR/gateway-openai.py" >"$tmp/py.out" 2>&1
rc=$?
cat "$tmp/py.out"
[ $rc -eq 0 ] || fail "openai client checks (exit $rc)"

# the prompt each chat gateway rendered (its debug log) is the one Jinja renders
python3 - "$CHAT" "$tmp/chat.json" <<'PY' || fail "rendered chat prompts differ from Jinja's"
import json, re, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
chats, answers = json.loads(sys.argv[1]), json.load(open(sys.argv[2]))
bad = 0
for g in chats:
    cfg = json.load(open(g["cfg"]))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    want = env.from_string(cfg["chat_template"]).render(
        messages=answers[g["name"]]["messages"], add_generation_prompt=True,
        bos_token=cfg.get("bos_token"), eos_token=cfg.get("eos_token"))
    got = [json.loads(m.group(1)) for m in re.finditer(r"chat prompt \([^)]*\): (.*)$", open(g["log"]).read(), re.M)]
    if len(got) != (5 if g is chats[0] else 2) or any(p != want for p in got):  # the first: + n 2, logprobs, top_logprobs 20
        print("FAIL: %s rendered %r, Jinja %r" % (g["name"], got, want)); bad += 1
    else:
        print("ok: %s: the prompt sent to the engine is Jinja's rendering" % g["name"])
sys.exit(1 if bad else 0)
PY

# curl -N: raw server-sent events as they come
curl -sN -D "$tmp/sse.h" "$MAIN_URL/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "hi"}]}' \
	>"$tmp/nochat.json"
grep -q '"cannot render a chat prompt: the model has no chat template' "$tmp/nochat.json" && grep -q '^HTTP/1.1 400' "$tmp/sse.h" &&
	ok "a model without a chat template: chat is a 400 that says why" || fail "no-template chat: $(cat "$tmp/nochat.json")"
curl -sN -D "$tmp/sse.h" "$MAIN_URL/v1/completions" \
	-d '{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stream": true}' >"$tmp/sse.txt"
python3 - "$tmp/sse.txt" "$tmp/ref.json" <<'PY' && ok "curl -N: text/event-stream, one JSON event per data line, ending with [DONE]" || fail "curl -N stream: $(head -c 300 "$tmp/sse.txt")"
import json, sys
raw = open(sys.argv[1]).read()
events = [e for e in raw.split("\n\n") if e]
assert all(e.startswith("data: ") for e in events), events
assert events[-1] == "data: [DONE]", events[-1]
chunks = [json.loads(e[6:]) for e in events[:-1]]
text = "".join(c["choices"][0]["text"] for c in chunks)
assert chunks[-1]["choices"][0]["finish_reason"] == "length"
ref = json.load(open(sys.argv[2]))["completion"]
assert ref.startswith(text) and len(chunks) >= 12, (text, ref)
PY
grep -qi '^content-type: text/event-stream' "$tmp/sse.h" || fail "SSE content type: $(cat "$tmp/sse.h")"

# GET /metrics and `allmctl metrics`: the same bytes (one renderer), on an idle engine,
# but for the gateway's own gauge of their age (allm_gateway_metrics_age_seconds): the
# gateway answers from figures it refreshes once a probe period (never waiting on a
# step), so the copy from before the last requests ended is replaced within seconds
"$CTL" --name gwo metrics >"$tmp/m-ctl.txt"
for i in $(seq 50); do
	curl -s "$MAIN_URL/metrics" | grep -v 'allm_gateway_metrics_age_seconds' >"$tmp/m-http.txt"
	cmp -s "$tmp/m-http.txt" "$tmp/m-ctl.txt" && break
	sleep 0.2
done
[ -s "$tmp/m-http.txt" ] && cmp -s "$tmp/m-http.txt" "$tmp/m-ctl.txt" &&
	ok "GET /metrics and allmctl metrics print the same $(wc -l <"$tmp/m-http.txt") lines" ||
	fail "GET /metrics differs from allmctl metrics: $(diff "$tmp/m-http.txt" "$tmp/m-ctl.txt" | head -5)"

"$CTL" --name gwo metrics --json | python3 -c '
import json, sys
f = json.load(sys.stdin)["families"]
assert {"vllm:generation_tokens_total", "allm_blocks"} <= {x["name"] for x in f}
assert all(x["type"] in ("counter", "gauge", "histogram") and x["samples"] for x in f)' &&
	ok "allmctl metrics --json: the families as JSON" || fail "allmctl metrics --json"
"$CTL" --name nosuch --timeout 300 metrics >/dev/null 2>&1
[ $? -eq 3 ] && ok "allmctl metrics with no engine: exit 3" || fail "allmctl metrics, no engine: not exit 3"

gw_stop "$MAIN_PID" "main gateway"
daemon_stop "engine under six gateways"
finish
