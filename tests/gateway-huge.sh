#!/usr/bin/env bash
# Description: one HTTP user's huge answers cannot fail another's request (issue 37 item 1): four concurrent non-streamed /v1/completions of n 128, logprobs 10, max_tokens 480 (17 MB of JSON each; 120 tokens under a sanitizer) all complete whole (128 choices x 480 tokens, 10 alternatives each), while another user's 400-token request is served (before: the gateway's engine reader waited while an answer was built, the engine failed the gateway for not draining its completion queue, and everyone got 503); the gateway never holds a whole answer (peak RSS bounded); a request whose n x max_tokens x (1 + logprobs) passes the limit gets a 400 naming it.
. "$(dirname "$0")/gateway-common.sh"
# under a sanitizer the same paths run on a quarter of the tokens (ASan alone took
# 400 s for the whole load), and the gateway's RSS says nothing (shadow memory, the
# quarantine of freed blocks)
TOKENS=480
SANITIZED=
if ldd "$GATEWAY" 2>/dev/null | grep -q -E "lib(a|t)san"; then
	TOKENS=120
	SANITIZED=1
fi

daemon_start gwh
gw_start gwh
gw_up "$GW_URL" || exit 1

python3 - "$GW_PORT" "$TOKENS" <<'PY' >"$tmp/huge.out" 2>&1
import http.client, json, sys, threading, time
port, tokens = int(sys.argv[1]), int(sys.argv[2])

def post(body, addr="127.0.0.1"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600, source_address=(addr, 0))
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()

HUGE = {"prompt": "Once upon a time", "n": 128, "logprobs": 10, "max_tokens": tokens, "ignore_eos": True,
        "temperature": 1, "seed": 1}
res = [None] * 4
def huge(i):
    res[i] = post(dict(HUGE, seed=i))
ths = [threading.Thread(target=huge, args=(i,)) for i in range(4)]
for t in ths:
    t.start()
time.sleep(3)  # the engine is busy with them: 512 choices
st, body = post({"prompt": "The little dog", "max_tokens": 400, "ignore_eos": True, "temperature": 0}, "127.0.0.2")
if st == 200 and json.loads(body)["usage"]["completion_tokens"] == 400:
    print("ok: another user's 400-token request is served during the huge answers")
else:
    print("FAIL: another user's request: %d %s" % (st, body[:300]))
for t in ths:
    t.join()
for i, (st, body) in enumerate(res):
    if st != 200:
        print("FAIL: huge answer %d: %d %s" % (i, st, body[:300]))
        continue
    j = json.loads(body)
    ch = j["choices"]
    good = len(ch) == 128 and sorted(c["index"] for c in ch) == list(range(128)) and all(
        len(c["logprobs"]["tokens"]) == tokens and len(c["logprobs"]["token_logprobs"]) == tokens and
        len(c["logprobs"]["text_offset"]) == tokens and
        all(10 <= len(t) <= 11 for t in c["logprobs"]["top_logprobs"]) for c in ch) and \
        j["usage"]["completion_tokens"] == 128 * tokens
    print(("ok: huge answer %d whole: %d bytes, 128 choices x %d tokens" if good else
           "FAIL: huge answer %d is not whole (%d bytes, %d tokens asked)") % (i, len(body), tokens))

# past the limit on what one answer may hold: a 400 that names it
st, body = post({"prompt": "Hi", "n": 128, "logprobs": 10, "max_tokens": 4000})
e = json.loads(body).get("error", {}) if body.startswith(b"{") else {}
print(("ok: n x max_tokens x (1 + logprobs) over the limit: 400 (%s)" if st == 400 and "1048576" in e.get("message", "")
       and e.get("param") == "logprobs" else "FAIL: over the limit: %d %s") % ((e.get("message"),) if st == 400 and
       "1048576" in e.get("message", "") and e.get("param") == "logprobs" else (st, body[:300])))
PY
cat "$tmp/huge.out"
grep -q "^FAIL" "$tmp/huge.out" && fail "huge answers (above)"
[ "$(grep -c '^ok:' "$tmp/huge.out")" = 6 ] || fail "the client did not finish: $(tail -n 3 "$tmp/huge.out")"
grep -q "stopped draining" "$DLOG" && fail "the engine failed the gateway: $(grep "stopped draining" "$DLOG")" ||
	ok "the engine never saw the gateway stop draining its completion queue"
# the answers were written as they were read: the gateway held tokens, not documents
# (4 x 61440 tokens x 11 log-probabilities x 8 bytes: 22 MB; the JSON was 4 x 17 MB)
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$GW_PID/status")
if [ -n "$SANITIZED" ]; then
	echo "skip: the gateway's peak RSS under a sanitizer ($((hwm / 1024)) MiB) is not its own"
elif [ "$hwm" -lt $((96 * 1024)) ]; then
	ok "gateway peak RSS $((hwm / 1024)) MiB (< 96 MiB)"
else
	fail "gateway peak RSS $((hwm / 1024)) MiB: it held whole answers"
fi
gw_stop "$GW_PID" "gateway after huge answers"
daemon_stop "engine after huge answers"
finish
