#!/usr/bin/env bash
# Description: what real clients hit (issue 48), with curl and Python's standard library against a real engine and gateway: a browser's CORS preflight (204 with Access-Control-Allow-* for an allowed origin, no key needed; 403 for another origin, and on a gateway without --allowed-origins) and Access-Control-Allow-Origin on answers, errors and streams; GET /v1/models/{id} and a real `created`; every body field applied or refused with a 400 naming it (min_p applied: seeded text at min_p 1 is the greedy text; tools on completions, typical_p, audio... and unknown keys refused (structured output is applied: gateway-structured); user, metadata, store accepted; docs/USAGE.md lists every refused and accepted-without-effect field); the developer role rendered as system and an assistant's null content accepted; /metrics labelled with --served-model-name, not the model's path; a byte token's log-probability bytes its own; HEAD /health; --max-tokens-default (and in --help); POST /tokenize (text and chat messages, as generation counts them) and /detokenize.
. "$(dirname "$0")/gateway-common.sh"

T0=$(date +%s)
ctl_start gwapi --model "$M" --profile "$tmp/profile.json"
python3 -c 'import json, sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["chat_template"])' \
	"$TESTS_DIR/chat-templates/chatml.json" "$tmp/chatml.jinja"
gw_start gwapi --api-key secret --allowed-origins "http://ok.example, http://two.example" \
	--served-model-name stories --chat-template "$tmp/chatml.jinja" --metrics-api-key scrape --log-level debug
A_URL=$GW_URL A_PID=$GW_PID A_LOG=$GW_LOG
gw_start gwapi --max-tokens-default 5
B_URL=$GW_URL B_PID=$GW_PID
gw_up "$A_URL" && gw_up "$B_URL" || exit 1

"$GATEWAY" --help | grep -q -- "--max-tokens-default N" && ok "--help says --max-tokens-default N" ||
	fail "--help lacks --max-tokens-default"

# --- CORS: a browser-style preflight, with curl --------------------------------------------
pre() { # pre URL ORIGIN: the preflight's status; headers in $tmp/pre
	curl -s -o /dev/null -D "$tmp/pre" -w '%{http_code}' -X OPTIONS "$1/v1/chat/completions" \
		-H "Origin: $2" -H "Access-Control-Request-Method: POST" \
		-H "Access-Control-Request-Headers: authorization, content-type"
}
[ "$(pre "$A_URL" http://ok.example)" = 204 ] && grep -qi '^access-control-allow-origin: http://ok.example' "$tmp/pre" &&
	grep -qi '^access-control-allow-methods: .*POST' "$tmp/pre" &&
	grep -qi '^access-control-allow-headers: .*authorization' "$tmp/pre" &&
	ok "preflight from an allowed origin, no key: 204 with Access-Control-Allow-Origin/Methods/Headers" ||
	fail "preflight from an allowed origin: $(tr -d '\r' <"$tmp/pre" | head -12 | xargs)"
[ "$(pre "$A_URL" http://evil.example)" = 403 ] && ! grep -qi '^access-control-allow-origin' "$tmp/pre" &&
	ok "preflight from another origin: 403, no Access-Control-Allow-Origin" ||
	fail "preflight from another origin: $(head -1 "$tmp/pre")"
[ "$(pre "$B_URL" http://ok.example)" = 403 ] && ok "a gateway without --allowed-origins: preflight 403" ||
	fail "no --allowed-origins: preflight $(head -1 "$tmp/pre")"
c=$(curl -s -o "$tmp/body" -D "$tmp/h" -w '%{http_code}' "$A_URL/v1/completions" -H "Origin: http://two.example" \
	-H "Authorization: Bearer secret" -H "Content-Type: application/json" \
	-d '{"prompt": "Once", "max_tokens": 2}')
[ "$c" = 200 ] && grep -qi '^access-control-allow-origin: http://two.example' "$tmp/h" && grep -qi '^vary: origin' "$tmp/h" &&
	ok "an answer to an allowed origin carries Access-Control-Allow-Origin and Vary: Origin" ||
	fail "answer's CORS headers ($c): $(tr -d '\r' <"$tmp/h" | xargs)"
c=$(curl -s -o /dev/null -D "$tmp/h" -w '%{http_code}' "$A_URL/v1/completions" -H "Origin: http://two.example" \
	-H "Authorization: Bearer secret" -d '{"prompt": "Once", "max_tokens": 2, "typical_p": 0.5}')
[ "$c" = 400 ] && grep -qi '^access-control-allow-origin: http://two.example' "$tmp/h" &&
	ok "... and so does an error (a page can read why)" || fail "error's CORS headers ($c)"
curl -s -N -D "$tmp/h" -o /dev/null "$A_URL/v1/completions" -H "Origin: http://ok.example" \
	-H "Authorization: Bearer secret" -d '{"prompt": "Once", "max_tokens": 2, "stream": true}'
grep -qi '^access-control-allow-origin: http://ok.example' "$tmp/h" && ok "... and so does a stream" ||
	fail "stream's CORS headers: $(tr -d '\r' <"$tmp/h" | xargs)"

# --- HEAD /health ------------------------------------------------------------------------------
c=$(curl -s -I -o "$tmp/h" -w '%{http_code}' "$A_URL/health")
[ "$c" = 200 ] && ok "HEAD /health: 200" || fail "HEAD /health: $c"

# --- the rest through Python's standard library -------------------------------------------------
"$GATEWAY" --list-fields >"$tmp/fields.txt"
python3 - "$A_URL" "$B_URL" "$M" "$T0" "$tmp/fields.txt" "$TESTS_DIR/../docs/USAGE.md" "$A_LOG" <<'PY' >"$tmp/api.out" 2>&1
import json, re, sys, time, urllib.error, urllib.request
a_url, b_url, mdir, t0, fields_txt, readme, a_log = sys.argv[1:8]
KEY = {"Authorization": "Bearer secret"}

def ok(m): print("ok: " + m)
def fail(m): print("FAIL: " + m)

def call(url, path, body=None, headers=None, method=None):
    h = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(url + path, data, h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw[:1] == b"{" else raw.decode())

# /v1/models/{id}, created
st, lst = call(a_url, "/v1/models", headers=KEY)
card = lst["data"][0] if st == 200 else {}
now = time.time()
(ok if card.get("id") == "stories" and int(t0) - 2 <= card.get("created", 0) <= now else fail)(
    "/v1/models: id stories, created %s = when the engine started (test began %s)" % (card.get("created"), t0))
st, one = call(a_url, "/v1/models/stories", headers=KEY)
(ok if st == 200 and one == card else fail)("GET /v1/models/stories: the same card (%s %s)" % (st, one))
st, e = call(a_url, "/v1/models/gpt-4", headers=KEY)
(ok if st == 404 and e["error"]["code"] == "model_not_found" else fail)("GET /v1/models/gpt-4: 404 (%s)" % st)

# fields: applied, accepted without effect, refused by name
def comp(extra, url=a_url):
    body = dict({"model": "stories", "prompt": "Once upon a time", "max_tokens": 24}, **extra)
    if url == b_url:
        body.pop("model")
        body.pop("max_tokens")
    return call(url, "/v1/completions", body, KEY)
st, greedy = comp({"temperature": 0})
st1, hot = comp({"temperature": 1.5, "seed": 7})
st2, cut = comp({"temperature": 1.5, "seed": 7, "min_p": 1.0})
(ok if st == st1 == st2 == 200 and cut["choices"][0]["text"] == greedy["choices"][0]["text"] != hot["choices"][0]["text"]
 else fail)("min_p applied: seeded at temperature 1.5, min_p 1 gives the greedy text, without it another (%s %s %s)"
            % (st, st1, st2))
st, e = comp({"min_p": 1.5})
(ok if st == 400 and e["error"]["param"] == "min_p" else fail)("min_p 1.5: 400 naming min_p (%s)" % st)
refused = {"typical_p": 0.5, "tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": "auto", "suffix": "x", "no_such_field": 1, "messages": [{"role": "user", "content": "x"}]}
for k, v in refused.items():
    st, e = comp({k: v})
    (ok if st == 400 and e["error"]["param"] == k and e["error"]["type"] == "invalid_request_error" else fail)(
        "completions %s: 400 naming it (%s: %s)" % (k, st, e["error"]["message"] if st != 200 else "200"))
chat_refused = {"audio": {"voice": "alloy", "format": "wav"}, "modalities": ["text", "audio"],
                "prediction": {"type": "content", "content": "x"}, "reasoning_effort": "low",
                "web_search_options": {}, "functions": [{"name": "f"}], "echo": True, "prompt": "x"}
base = {"model": "stories", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
for k, v in chat_refused.items():
    st, e = call(a_url, "/v1/chat/completions", dict(base, **{k: v}), KEY)
    (ok if st == 400 and e["error"]["param"] == k else fail)(
        "chat %s: 400 naming it (%s: %s)" % (k, st, e["error"]["message"] if st != 200 else "200"))
st, r = call(a_url, "/v1/chat/completions", dict(base, user="u1", metadata={"a": "b"}, store=False,
                                                  modalities=["text"], response_format={"type": "text"},
                                                  tool_choice="none", tools=[]), KEY)
(ok if st == 200 else fail)("user, metadata, store and neutral modalities/response_format/tools: accepted (%s)" % st)
st, e = call(a_url, "/v1/chat/completions", dict(base, messages=[{"role": "user", "content": "Hi", "weight": 1}]), KEY)
(ok if st == 400 and e["error"]["param"] == "messages[0].weight" else fail)(
    "an unknown message key: 400 naming messages[0].weight (%s)" % st)
# one list, in docs/USAGE.md: every refused and accepted-without-effect field
text = open(readme).read()
sec = text[text.index("## OpenAI-compatible HTTP"):]
sec = sec[:sec.index("\n## ", 3)]
missing = [l.split()[2].rstrip(":") for l in open(fields_txt)
           if l.split()[1] in ("refused", "accepted-without-effect") and "`%s`" % l.split()[2].rstrip(":") not in sec]
n_listed = sum(1 for l in open(fields_txt) if l.split()[1] != "applied")
(ok if not missing and n_listed > 12 else fail)(
    "docs/USAGE.md's gateway section names every one of the %d refused or accepted-without-effect fields%s"
    % (n_listed, ": missing " + ", ".join(missing) if missing else ""))

# roles: developer is system; an assistant's null content
def prompt_logged(n_before):
    lines = [l for l in open(a_log) if "chat prompt (" in l]
    return json.loads(lines[-1].split("): ", 1)[1]) if len(lines) > n_before else None
def n_logged():
    return sum(1 for l in open(a_log) if "chat prompt (" in l)
n0 = n_logged()
st, _ = call(a_url, "/v1/chat/completions", dict(base, messages=[{"role": "developer", "content": "Be brief."},
                                                                 {"role": "user", "content": "Hi"}]), KEY)
p = prompt_logged(n0)
(ok if st == 200 and p and p.startswith("<|im_start|>system\nBe brief.<|im_end|>") else fail)(
    "developer role rendered as system (%s: %r)" % (st, p))
n0 = n_logged()
msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": None},
        {"role": "user", "content": "Again"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "Go"}]
st, _ = call(a_url, "/v1/chat/completions", dict(base, messages=msgs), KEY)
p = prompt_logged(n0)
(ok if st == 200 and p and "<|im_start|>assistant\n<|im_end|>" in p else fail)(
    "assistant content null (alone, and with tool_calls): accepted as empty (%s)" % st)
st, e = call(a_url, "/v1/chat/completions", dict(base, messages=[{"role": "user", "content": None}]), KEY)
(ok if st == 400 and e["error"]["param"] == "messages[0].content" else fail)("a user's null content: 400 (%s)" % st)

# /metrics: labelled with the served name, never the model's path
st, text = call(a_url, "/metrics", headers={"Authorization": "Bearer scrape"})
(ok if st == 200 and 'model_name="stories"' in text and mdir not in text else fail)(
    "/metrics labels say model_name=\"stories\", not the model's path (%s)" % st)

# log-probability bytes: a byte token's own byte, not U+FFFD's three
vocab = json.load(open(mdir + "/tokenizer.json"))["model"]["vocab"]
byte_id = vocab["<0xC3>"]
st, r = call(a_url, "/v1/chat/completions", dict(base, max_tokens=1, temperature=0, logprobs=True, top_logprobs=2,
                                                  logit_bias={str(byte_id): 100}), KEY)
lp = r["choices"][0]["logprobs"]["content"][0] if st == 200 else {}
(ok if lp.get("bytes") == [0xC3] and lp.get("token") == "\ufffd" else fail)(
    "a byte token's logprobs: bytes [195] (its own), token U+FFFD (%s %s)" % (st, lp))
tops = lp.get("top_logprobs", [])
(ok if tops and all(t["bytes"] == list(t["token"].encode()) or t["token"] == "\ufffd" for t in tops) else fail)(
    "its alternatives' bytes too (%s)" % tops)

# --max-tokens-default (gateway B: 5)
st, r = comp({"ignore_eos": True}, url=b_url)
(ok if st == 200 and r["usage"]["completion_tokens"] == 5 else fail)(
    "--max-tokens-default 5: a request without max_tokens makes 5 tokens (%s %s)" % (st, r.get("usage")))
st, r = call(b_url, "/v1/completions", {"prompt": "Once", "max_tokens": 7, "ignore_eos": True})
(ok if st == 200 and r["usage"]["completion_tokens"] == 7 else fail)("... and one that sets it gets it (%s)" % st)

# /tokenize, /detokenize
text = "Once upon a time, there was a dog."
st, t = call(a_url, "/tokenize", {"model": "stories", "prompt": text}, KEY)
st2, r = comp({"prompt": text, "max_tokens": 1})
(ok if st == st2 == 200 and t["count"] == len(t["tokens"]) == r["usage"]["prompt_tokens"] else fail)(
    "/tokenize: %s tokens, as many as the completion's prompt_tokens (%s)" % (t.get("count"), r.get("usage")))
st, d = call(a_url, "/detokenize", {"model": "stories", "tokens": t.get("tokens", [])}, KEY)
(ok if st == 200 and d["prompt"] == text else fail)("/detokenize gives the text back (%s %r)" % (st, d))
msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
st, t = call(a_url, "/tokenize", {"model": "stories", "messages": msgs}, KEY)
st2, r = call(a_url, "/v1/chat/completions", dict(base, messages=msgs, max_tokens=1), KEY)
(ok if st == st2 == 200 and t["count"] == r["usage"]["prompt_tokens"] else fail)(
    "/tokenize messages: the chat template applied, %s tokens as the chat's prompt_tokens %s"
    % (t.get("count"), r.get("usage", {}).get("prompt_tokens")))
st, e = call(a_url, "/tokenize", {"prompt": text, "foo": 1}, KEY)
(ok if st == 400 and e["error"]["param"] == "foo" else fail)("/tokenize with an unknown field: 400 naming it (%s)" % st)
st, e = call(a_url, "/tokenize", {"prompt": text})
(ok if st == 401 else fail)("/tokenize without the API key: 401 (%s)" % st)
PY
cat "$tmp/api.out"
grep -q "^FAIL" "$tmp/api.out" && fail "API checks (above)"
[ "$(grep -c '^ok:' "$tmp/api.out")" -ge 35 ] || fail "the API checks did not all run ($(grep -c '^ok:' "$tmp/api.out") ok)"

gw_stop "$A_PID" "gateway A"
gw_stop "$B_PID" "gateway B"
daemon_stop "engine"
finish
