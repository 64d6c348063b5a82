#!/usr/bin/env bash
# Description: allm-gateway's HTTP edges (issue 37 item 5): a request with both Content-Length and Transfer-Encoding gets 400 and its connection closed (what a client pipelines after it is never read as a request: RFC 9112 §6.3, request smuggling), two Content-Length that differ get 400 (the same one twice is fine), a transfer coding other than chunked 501; --metrics-api-key guards GET /metrics (its own key, not an API key) while /health stays open; with the engine stopped (SIGSTOP) 8 scrapers of /metrics hold no HTTP thread: /health and 401s keep answering, /health turns 503 saying the engine has not answered for a while (--engine-timeout), and 200 again once it runs (SIGCONT).
. "$(dirname "$0")/gateway-common.sh"

ctl_start gwhttp --model "$M" --profile "$tmp/profile.json"
gw_start gwhttp --api-key secret --metrics-api-key scrape --engine-timeout 2
gw_up "$GW_URL" || exit 1

# --- framing -------------------------------------------------------------------------
python3 - "$GW_PORT" <<'PY' >"$tmp/framing.out" 2>&1
import json, socket, sys
port = int(sys.argv[1])

def exchange(raw):
    """Sends raw bytes, reads until the server closes or goes quiet: every response."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(raw)
    got, closed = b"", False
    try:
        while True:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            got += b
    except socket.timeout:
        pass
    s.close()
    return got, closed

def check(what, ok, detail):
    print(("ok: %s" if ok else "FAIL: %s: " + detail.replace("%", "%%")) % what)

body = b'{"prompt": "x", "max_tokens": 1}'
follow = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n\r\n"
# both headers: a proxy trusting Content-Length would see the pipelined request as body,
# a server reading chunked sees it as a second request; refused, and nothing after it read
got, closed = exchange(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                       b"Content-Type: application/json\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"%x\r\n%s\r\n0\r\n\r\n" % (len(body) + 7, len(body), body) + follow)
check("Content-Length and Transfer-Encoding: 400", got.startswith(b"HTTP/1.1 400"), repr(got[:200]))
check("... and the connection closed, the request after it never answered",
      closed and got.count(b"HTTP/1.1 ") == 1 and b'"object":"list"' not in got, repr(got[-300:]))
check("... the error says why", b"Transfer-Encoding" in got and b"bad_framing" in got, repr(got[-300:]))
got, closed = exchange(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                       b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), len(body) + 4, body) + follow)
check("two Content-Length that differ: 400, closed", got.startswith(b"HTTP/1.1 400") and closed and
      got.count(b"HTTP/1.1 ") == 1, repr(got[:200]))
got, closed = exchange(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                       b"Content-Length: %d, %d\r\n\r\n%s" % (len(body), len(body) + 4, body))
check("Content-Length: a, b (differing list): 400", got.startswith(b"HTTP/1.1 400"), repr(got[:200]))
got, closed = exchange(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                       b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), len(body), body) + follow)
check("the same Content-Length twice: served, and the next request too",
      got.startswith(b"HTTP/1.1 200") and got.count(b"HTTP/1.1 200") == 2, repr(got[:300]))
got, closed = exchange(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                       b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
check("a transfer coding other than chunked: 501", got.startswith(b"HTTP/1.1 501") and closed, repr(got[:200]))
PY
cat "$tmp/framing.out"
grep -q "^FAIL" "$tmp/framing.out" && fail "framing (above)"
[ "$(grep -c '^ok:' "$tmp/framing.out")" = 7 ] || fail "the framing client did not finish"

# --- /metrics behind its own key ------------------------------------------------------------
code() { curl -s -o "$tmp/body" -w '%{http_code}' --max-time 10 "$@"; }
[ "$(code "$GW_URL/metrics")" = 401 ] && ok "/metrics without a key: 401" || fail "/metrics without a key: $(cat "$tmp/body")"
[ "$(code -H 'Authorization: Bearer secret' "$GW_URL/metrics")" = 401 ] &&
	ok "/metrics with an API key (not the metrics key): 401" || fail "/metrics with the API key: not 401"
[ "$(code -H 'Authorization: Bearer scrape' "$GW_URL/metrics")" = 200 ] && grep -q "^vllm:num_requests_running" "$tmp/body" &&
	ok "/metrics with the metrics key: 200, Prometheus text" || fail "/metrics with its key: $(head -c 200 "$tmp/body")"
[ "$(code "$GW_URL/health")" = 200 ] && ok "/health needs no key" || fail "/health: $(cat "$tmp/body")"

# --- a frozen engine holds no HTTP thread ---------------------------------------------------
kill -STOP "$DPID"
for i in $(seq 8); do
	curl -s -o "$tmp/scrape-$i" -w '%{http_code}\n' --max-time 60 -H 'Authorization: Bearer scrape' \
		"$GW_URL/metrics" >"$tmp/scrape-$i.code" 2>/dev/null &
	SCRAPERS+=($!)
done
sleep 0.5 # the scrapers are waiting for the engine
h=$(code "$GW_URL/health")
[ -n "$h" ] && [ "$h" != 000 ] && ok "engine stopped, 8 scrapers waiting: /health answers ($h)" ||
	fail "engine stopped, 8 scrapers waiting: /health did not answer"
[ "$(code "$GW_URL/v1/models")" = 401 ] && ok "engine stopped, 8 scrapers waiting: a 401 is answered" ||
	fail "engine stopped: no 401"
for i in $(seq 100); do
	[ "$(code "$GW_URL/health")" = 503 ] && break
	sleep 0.1
done
[ "$(code "$GW_URL/health")" = 503 ] && grep -q "has not answered for" "$tmp/body" &&
	ok "/health after --engine-timeout 2: 503 ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["message"])' "$tmp/body"))" ||
	fail "/health with the engine stopped: $(cat "$tmp/body")"
kill -CONT "$DPID"
for p in "${SCRAPERS[@]}"; do wait "$p"; done
n=$(cat "$tmp"/scrape-*.code | grep -c -E '^(200|503)$')
[ "$n" = 8 ] && ok "the 8 scrapes ended (200 or 503: $(cat "$tmp"/scrape-*.code | sort | uniq -c | xargs))" ||
	fail "scrapes: $(cat "$tmp"/scrape-*.code | xargs)"
for i in $(seq 100); do
	[ "$(code "$GW_URL/health")" = 200 ] && break
	sleep 0.1
done
[ "$(code "$GW_URL/health")" = 200 ] && ok "/health 200 again once the engine runs (SIGCONT)" ||
	fail "/health after SIGCONT: $(cat "$tmp/body")"
gw_stop "$GW_PID" "gateway"
daemon_stop "engine"
finish
