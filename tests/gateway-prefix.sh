#!/usr/bin/env bash
# Description: allm-gateway and the prefix cache, driven by the official openai Python SDK: a prompt sent twice reports usage.prompt_tokens_details.cached_tokens 0 then 32 (completions, chat, and the streamed usage chunk) with the same text; requests with different cache_salt values, or different API keys, never hit each other's cache while the same salt and key do; a bad cache_salt is a 400; POST /reset_prefix_cache is refused (401) without the --admin-api-key key and with it drops the cached blocks, as allmctl cache reset does (the next request hits nothing).
. "$(dirname "$0")/gateway-common.sh"
. "$(dirname "$0")/venv-common.sh"
venv_need openai

daemon_start gwpc --gpu-blocks 256 --cpu-blocks 64
# chat needs a template: stories260K's files with ChatML's (tests/chat-templates)
d=$tmp/model-chatml
mkdir -p "$d"
cp "$M"/config.json "$M"/generation_config.json "$M"/special_tokens_map.json "$M"/tokenizer.json "$d"/
python3 - "$M/tokenizer_config.json" "$TESTS_DIR/chat-templates/chatml.json" "$d/tokenizer_config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["chat_template"] = json.load(open(sys.argv[2]))["chat_template"]
json.dump(cfg, open(sys.argv[3], "w"), ensure_ascii=False)
PY
gw_start gwpc --model "$d" --served-model-name pc --admin-api-key adm-key
gw_up "$GW_URL" || finish

"$PY" - "$GW_URL" "$BUILD_DIR/ctl/allmctl" <<'PY' >"$tmp/py.out" 2>&1 && ok "$(tail -n 1 "$tmp/py.out")" || fail "openai SDK: $(cat "$tmp/py.out")"
import json, sys
import openai

url = sys.argv[1]
A = [1 + (i * 37) % 500 for i in range(40)]   # 40 ids: two full blocks of 16 can be cached
B = [1 + (i * 53 + 7) % 500 for i in range(40)]

def client(key="key-1"):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)

def complete(prompt, key="key-1", salt=None):
    extra = {"cache_salt": salt} if salt is not None else None
    r = client(key).completions.create(model="pc", prompt=prompt, max_tokens=8, temperature=0,
                                       extra_body=extra)
    return r.usage.prompt_tokens_details.cached_tokens, r.choices[0].text, r.usage.prompt_tokens

def check(what, got, want):
    if got != want:
        raise SystemExit(f"{what}: got {got!r}, want {want!r}")

c1, t1, p1 = complete(A)
c2, t2, p2 = complete(A)
check("the first request's cached_tokens", c1, 0)
check("the second request's cached_tokens", c2, 32)
check("the second request's text", t2, t1)
check("prompt_tokens", (p1, p2), (40, 40))

# salts: another salt misses, the same salt hits; the unsalted cache is not theirs
check("salt s1, first", complete(A, salt="s1")[0], 0)
check("salt s2 after s1", complete(A, salt="s2")[0], 0)
check("salt s1 again", complete(A, salt="s1")[0], 32)
# API keys (the gateway scopes by the key presented): another key misses
check("key-2 after key-1", complete(A, key="key-2")[0], 0)
check("key-2 again", complete(A, key="key-2")[0], 32)
check("key-1 with salt s1, after key-2 with s1", complete(B, key="key-2", salt="s1")[0], 0)
check("key-1 with salt s1 on B", complete(B, key="key-1", salt="s1")[0], 0)

# the streamed usage chunk
usage = None
for ch in client().completions.create(model="pc", prompt=A, max_tokens=8, temperature=0, stream=True,
                                      stream_options={"include_usage": True}):
    if ch.usage is not None:
        usage = ch.usage
check("streamed usage cached_tokens", usage.prompt_tokens_details.cached_tokens if usage else None, 32)

# chat: the rendered conversation is a prompt like any other
msgs = [{"role": "system", "content": "You are a story teller. Tell short stories about animals, "
                                      "friends and the park, in simple words for small children."},
        {"role": "user", "content": "Once upon a time"}]
r1 = client().chat.completions.create(model="pc", messages=msgs, max_tokens=8, temperature=0)
r2 = client().chat.completions.create(model="pc", messages=msgs, max_tokens=8, temperature=0)
n = r1.usage.prompt_tokens
check("chat: first cached_tokens", r1.usage.prompt_tokens_details.cached_tokens, 0)
check("chat: second cached_tokens", r2.usage.prompt_tokens_details.cached_tokens, (n - 1) // 16 * 16)
check("chat: same reply", r2.choices[0].message.content, r1.choices[0].message.content)

# a bad salt: one clear 400
for bad in ("", 7, ["x"]):
    try:
        complete(A, salt=bad)
        raise SystemExit(f"cache_salt {bad!r} accepted")
    except openai.BadRequestError as e:
        if "cache_salt" not in str(e):
            raise SystemExit(f"cache_salt {bad!r}: {e}")

# POST /reset_prefix_cache (vLLM's route): the admin key only, then the cache is empty
import urllib.request, urllib.error
def reset(key):
    req = urllib.request.Request(url + "/reset_prefix_cache", data=b"", method="POST",
                                 headers={"Authorization": "Bearer " + key} if key else {})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
check("A cached before the reset", complete(A)[0], 32)
for key in (None, "key-1", "adm-ke"):
    st, body = reset(key)
    check(f"reset with key {key!r}", (st, body["error"]["code"]), (401, "invalid_api_key"))
check("A still cached after refused resets", complete(A)[0], 32)
st, body = reset("adm-key")
if st != 200 or body.get("dropped_blocks", 0) < 2:
    raise SystemExit(f"reset with the admin key: {st} {body}")
dropped = body["dropped_blocks"]
check("after POST /reset_prefix_cache", complete(A)[0], 0)
check("A cached again", complete(A)[0], 32)

# allmctl cache reset: every cached block dropped, the next request hits nothing
import subprocess
subprocess.run([sys.argv[2], "--name", "gwpc", "cache", "reset"], check=True, stdout=subprocess.DEVNULL)
check("after allmctl cache reset", complete(A)[0], 0)
print(f"cached_tokens 0 then 32 (completions, stream, chat {n} tokens); salts and keys isolate; "
      f"bad salts refused; POST /reset_prefix_cache refused without the admin key, with it "
      f"dropped {dropped} blocks; allmctl cache reset empties it")
PY
"$BUILD_DIR/ctl/allmctl" --name gwpc status --json | python3 -c "
import json, sys
d = json.load(sys.stdin)['prefix_cache']
assert d['hit_tokens'] > 0 and d['queried_tokens'] > d['hit_tokens'], d
print('engine status: %d of %d prompt tokens hit' % (d['hit_tokens'], d['queried_tokens']))" >"$tmp/st.out" 2>&1 &&
	ok "$(cat "$tmp/st.out")" || fail "status: $(cat "$tmp/st.out")"
gw_stop "$GW_PID" gateway
daemon_stop gwpc
finish
