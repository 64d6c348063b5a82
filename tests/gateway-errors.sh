#!/usr/bin/env bash
# Description: every error status of allm-gateway, in OpenAI's JSON shape, as the openai Python SDK and curl see them: 400 (malformed JSON, bad fields), 401 (--api-key), 404 (unknown model, route, the admin cache reset when no admin key is set), 405, 413 (prompt over the context, the engine's KV limit, bodies over the cap with and without Content-Length), 429 (the engine's per-client queue full), 503 (no engine yet, drained, engine restarted under the gateway and killed mid-stream) — and the gateway reconnects each time the engine comes back.
. "$(dirname "$0")/gateway-common.sh"
gw_py
ulimit -n 12000 2>/dev/null

code() { # code URL [curl args...]: the HTTP status; the body is in $tmp/body, headers in $tmp/head
	local u=$1
	shift
	curl -s -o "$tmp/body" -D "$tmp/head" -w '%{http_code}' "$@" "$u"
}
is_error() { # is_error TYPE: the last body is {"error": {message, type, ...}} of that type
	python3 - "$tmp/body" "$1" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert isinstance(e["message"], str) and e["message"] and e["type"] == sys.argv[2], e
assert "code" in e and "param" in e, e
PY
}
expect() { # expect WHAT STATUS TYPE URL [curl args...]
	local what=$1 want=$2 type=$3 got
	shift 3
	got=$(code "$@")
	if [ "$got" = "$want" ] && is_error "$type"; then
		ok "$what: $got $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["message"][:90])' "$tmp/body")"
	else
		fail "$what: got $got $(head -c 300 "$tmp/body")"
	fi
}
KEY=(-H "Authorization: Bearer secret")
COMPLETION='{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}'

# --- 503 before the engine exists; the gateway connects once it starts ------------
gw_start gwe --api-key secret --max-body-bytes 4096
E_URL=$GW_URL E_PID=$GW_PID
expect "no engine yet: /health" 503 service_unavailable "$E_URL/health"
expect "no engine yet: a completion" 503 service_unavailable "$E_URL/v1/completions" "${KEY[@]}" -d "$COMPLETION"
grep -qi '^retry-after: 1' "$tmp/head" && ok "503 says Retry-After" || fail "503 without Retry-After"
daemon_start gwe --gpu-blocks 8
gw_up "$E_URL" && ok "the gateway connected when the engine started"

# --- the openai SDK's view: 401, 404, 400, 413 ---------------------------------------
GW_URL=$E_URL "$PY" "$TESTS_DIR/gateway-errors.py" sdk >"$tmp/sdk.out" 2>&1
rc=$?
cat "$tmp/sdk.out"
[ $rc -eq 0 ] || fail "openai SDK error checks (exit $rc)"

# --- the same and more with curl ------------------------------------------------------
expect "400 malformed JSON" 400 invalid_request_error "$E_URL/v1/completions" "${KEY[@]}" -d '{"prompt": "x",'
# the parser's excerpt of this body is not UTF-8: still a 400 in JSON, not a dropped
# connection (found by tools/fuzz.sh gateway)
printf '{"prompt": ["Oh\\\xe2\x84\xa2y"], "n": 1}' >"$tmp/bad-utf8.json"
expect "400 malformed JSON whose excerpt is not UTF-8" 400 invalid_request_error "$E_URL/v1/completions" \
	"${KEY[@]}" --data-binary @"$tmp/bad-utf8.json"
expect "404 an unknown model whose name is cut inside a character" 404 invalid_request_error \
	"$E_URL/v1/completions" "${KEY[@]}" -d "{\"model\": \"$(printf 'a%.0s' $(seq 199))é\", \"prompt\": \"x\"}"
expect "400 body not an object" 400 invalid_request_error "$E_URL/v1/completions" "${KEY[@]}" -d '[1, 2]'
expect "400 a batch of prompts x n over 128 choices" 400 invalid_request_error "$E_URL/v1/completions" "${KEY[@]}" \
	-d "{\"prompt\": [$(printf '"a",%.0s' $(seq 64))\"a\"], \"n\": 2}"
expect "400 a batch with a prompt that is neither text nor ids" 400 invalid_request_error "$E_URL/v1/completions" \
	"${KEY[@]}" -d '{"prompt": ["a", {"x": 1}]}'
expect "400 unsupported field" 400 invalid_request_error "$E_URL/v1/chat/completions" "${KEY[@]}" \
	-d '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}'
expect "401 no API key" 401 invalid_request_error "$E_URL/v1/completions" -d "$COMPLETION"
grep -qi '^www-authenticate: Bearer' "$tmp/head" && ok "401 says WWW-Authenticate: Bearer" || fail "401 header"
expect "401 not Bearer" 401 invalid_request_error "$E_URL/v1/models" -H "Authorization: Basic c2VjcmV0"
# /metrics shows every user's traffic: with API keys set it needs a key of its own
# (gateway-keys.sh has the rest); /health stays open for load balancers
[ "$(code "$E_URL/health")" = 200 ] && [ "$(code "$E_URL/metrics")" = 401 ] &&
	ok "/health needs no key (load balancers); /metrics does while API keys are set" ||
	fail "/health or /metrics: $(cat "$tmp/body")"
expect "404 unknown route" 404 invalid_request_error "$E_URL/v2/completions" "${KEY[@]}" -d "$COMPLETION"
expect "405 GET on a POST route" 405 invalid_request_error "$E_URL/v1/completions" "${KEY[@]}"
# the cache reset exists only with --admin-api-key (gateway-prefix tests it there):
# without it, not even the users' key reaches it
expect "404 POST /reset_prefix_cache without --admin-api-key" 404 invalid_request_error \
	"$E_URL/reset_prefix_cache" "${KEY[@]}" -X POST
grep -q 'admin-api-key' "$tmp/body" && ok "the 404 names --admin-api-key" || fail "the 404 body: $(cat "$tmp/body")"
head -c 5000 /dev/zero | tr '\0' 'a' >"$tmp/big"
expect "413 body over --max-body-bytes (Content-Length)" 413 invalid_request_error "$E_URL/v1/completions" \
	"${KEY[@]}" --data-binary @"$tmp/big"
expect "413 body over --max-body-bytes (chunked)" 413 invalid_request_error "$E_URL/v1/completions" \
	"${KEY[@]}" -H "Transfer-Encoding: chunked" --data-binary @"$tmp/big"
[ "$(code "$E_URL/v1/completions" "${KEY[@]}" -d "$COMPLETION")" = 200 ] &&
	ok "the next request is served normally" || fail "served after errors: $(cat "$tmp/body")"

# --- 503 while drained, then resumed ----------------------------------------------------
"$CTL" --name gwe drain --no-wait >/dev/null
expect "503 engine drained (allmctl drain)" 503 service_unavailable "$E_URL/v1/completions" "${KEY[@]}" -d "$COMPLETION"
"$CTL" --name gwe resume >/dev/null
[ "$(code "$E_URL/v1/completions" "${KEY[@]}" -d "$COMPLETION")" = 200 ] && ok "served again after resume" ||
	fail "after resume: $(cat "$tmp/body")"

# --- the engine restarts under the gateway ------------------------------------------------
daemon_stop "first engine"
expect "503 after the engine stopped" 503 service_unavailable "$E_URL/v1/completions" "${KEY[@]}" -d "$COMPLETION"
expect "/health 503 while it is away" 503 service_unavailable "$E_URL/health"
daemon_start gwe --gpu-blocks 8
gw_up "$E_URL" && [ "$(code "$E_URL/v1/completions" "${KEY[@]}" -d "$COMPLETION")" = 200 ] &&
	ok "reconnected to the restarted engine: served" || fail "after the restart: $(cat "$tmp/body")"
gw_stop "$E_PID" "gateway with an API key"
daemon_stop "second engine"

# --- killed mid-stream, then the queue caps: a slow engine (one sequence at a time) ------
SLOW=(--dummy small --max-num-seqs 1 --max-num-batched-tokens 64 --profile "$tmp/profile-small.json")
ctl_start gwf "${SLOW[@]}"
gw_start gwf --max-connections 5000 --max-connections-per-address 5000 # one address floods
F_URL=$GW_URL F_PID=$GW_PID
gw_up "$F_URL"
curl -sN "$F_URL/v1/completions" -d '{"prompt": [1, 2, 3], "max_tokens": 1000, "ignore_eos": true, "stream": true}' \
	>"$tmp/killed.sse" &
CURL=$!
for i in $(seq 200); do [ "$(grep -c '^data: ' "$tmp/killed.sse")" -ge 5 ] && break; sleep 0.02; done
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
wait "$CURL"
python3 - "$tmp/killed.sse" <<'PY' && ok "engine killed mid-stream: the stream ends with an error event (503) and [DONE]" ||
import json, sys
ev = [e for e in open(sys.argv[1]).read().split("\n\n") if e]
assert len(ev) >= 7 and ev[-1] == "data: [DONE]", ev[-3:]
err = json.loads(ev[-2][6:])["error"]
assert err["type"] == "service_unavailable" and "went away" in err["message"], err
assert all("choices" in json.loads(e[6:]) for e in ev[:-2])
PY
	fail "killed stream: $(tail -c 400 "$tmp/killed.sse")"
expect "503 while the engine is dead" 503 service_unavailable "$F_URL/v1/completions" -d '{"prompt": [1, 2], "max_tokens": 2}'
ctl_start gwf "${SLOW[@]}"
gw_up "$F_URL" && ok "reconnected after kill -9 and restart"

# 4200 requests: the engine holds at most 4096 per client (ALLM_D_MAX_INFLIGHT) and
# answers the rest -EAGAIN, which the gateway turns into 429
GW_URL=$F_URL GW_FLOOD=4200 "$PY" "$TESTS_DIR/gateway-errors.py" flood >"$tmp/flood.out" 2>&1
rc=$?
cat "$tmp/flood.out"
[ $rc -eq 0 ] || fail "queue-cap checks (exit $rc)"
# every flooded request hung up: the gateway cancelled them all in the engine
for i in $(seq 200); do
	"$CTL" --name gwf status --json >"$tmp/st.json" 2>/dev/null
	n=$(ctl_json "$tmp/st.json" queues.waiting)$(ctl_json "$tmp/st.json" queues.running)
	[ "$n" = 00 ] && break
	sleep 0.05
done
[ "$n" = 00 ] && ok "all 4096 hung-up requests were cancelled in the engine" ||
	fail "requests left in the engine after the clients hung up: waiting+running $n"
gw_stop "$F_PID" "gateway on the slow engine"
kill -TERM "$DPID"
wait "$DPID"
DPID=
finish
