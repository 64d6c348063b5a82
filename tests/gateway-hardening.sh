#!/usr/bin/env bash
# Description: the gateway's part of issue 49, on loopback where 127.0.0.1, .2 and .3 are three client addresses: a keyless gateway scopes the prefix cache by the user the quotas count (its address) so another address sending the same prompt hits nothing, not even with the same "EMPTY" key, and a ring client of the gateway's uid shares nothing with HTTP users (item 3); one address holds at most --max-connections-per-address connections, and a peer that trickles headers is closed after --header-timeout, not --timeout, while another address is served (item 4); a client that hangs up on n=64 has its choices cancelled at once though the gateway's pump never idles (item 6); the admin and metrics keys come from files and the environment, never argv (item 7); /metrics needs a key once any key is set, and is answered at once, from figures the gateway keeps, while the engine is stopped mid-step (item 8).
. "$(dirname "$0")/gateway-common.sh"
ALLM=$BUILD_DIR/clientlib/allm
[ -x "$ALLM" ] || { echo "FAIL: $ALLM not built"; exit 1; }
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0)); s.close()' 2>/dev/null ||
	{ echo "SKIP: cannot bind 127.0.0.2 (loopback is not 127/8 here)"; exit 77; }

ctl_start gwhard --model "$M" --profile "$tmp/profile.json" --max-num-seqs 4
printf '# the admin key\nadm-from-file\n' >"$tmp/admin.key"
printf 'scrape-from-file\n' >"$tmp/metrics.key"
chmod 600 "$tmp/admin.key" "$tmp/metrics.key"
# a keyless gateway (item 3, 4, 6); its pump never idles, as under a flood of events
# (the test hook): only its busy-time look at the sockets can see item 6's hang-up
ALLM_GW_TEST_PUMP_BUSY=1 gw_start gwhard --max-connections 40 --max-connections-per-address 8 --header-timeout 1 --timeout 60
K_URL=$GW_URL K_PID=$GW_PID K_PORT=$GW_PORT K_LOG=$GW_LOG
# keys from files and the environment (items 7, 8)
ALLM_METRICS_API_KEY=scrape-from-env gw_start gwhard --api-key user-key --admin-api-key-file "$tmp/admin.key"
E_URL=$GW_URL E_PID=$GW_PID
gw_start gwhard --api-key user-key --metrics-api-key-file "$tmp/metrics.key"
F_URL=$GW_URL F_PID=$GW_PID
gw_up "$K_URL" && gw_up "$E_URL" && gw_up "$F_URL" || exit 1

# --- items 3, 4, 6 -------------------------------------------------------------------------
python3 - "$K_URL" "$K_PORT" "$ALLM" gwhard "$CTL" <<'PY' >"$tmp/keyless.out" 2>&1
import http.client, json, socket, subprocess, sys, time
url, port, allm, engine, ctl = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def ok(m): print("ok: " + m)
def fail(m): print("FAIL: " + m)

def post(path, body, src="127.0.0.1", key=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(src, 0))
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    c.request("POST", path, json.dumps(body), h)
    r = c.getresponse()
    out = json.loads(r.read())
    c.close()
    return r.status, out

def prompt(seed):
    # 96 token ids of one user's private prompt: 6 blocks of 16
    return [(seed * 37 + i * 13) % 480 + 20 for i in range(96)]

def cached(ids, src="127.0.0.1", key=None):
    st, r = post("/v1/completions", {"prompt": ids, "max_tokens": 1, "temperature": 0}, src, key)
    return r["usage"]["prompt_tokens_details"]["cached_tokens"] if st == 200 else "HTTP %d" % st

def ring_cached(ids):
    out = subprocess.run([allm, "--name", engine, "generate", "--prompt-ids", ",".join(map(str, ids)),
                          "--max-tokens", "1", "--temperature", "0", "--json"], capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["cached_tokens"] if out.returncode == 0 else out.stderr

# item 3: the prefix cache by user
P = prompt(1)
a1, a2 = cached(P), cached(P)
(ok if a1 == 0 and a2 >= 64 else fail)("127.0.0.1 twice: cached_tokens %s then %s (its own prefix)" % (a1, a2))
b1, b2 = cached(P, "127.0.0.2"), cached(P, "127.0.0.2")
(ok if b1 == 0 and b2 >= 64 else fail)(
    "127.0.0.2, the same prompt: cached_tokens %s (not 127.0.0.1's), then %s (its own)" % (b1, b2))
Q = prompt(2)
e1, e2 = cached(Q, "127.0.0.1", "EMPTY"), cached(Q, "127.0.0.3", "EMPTY")
(ok if e1 == 0 and e2 == 0 else fail)("two addresses with the SDK's api_key=\"EMPTY\": %s, %s (nothing shared)" % (e1, e2))
r1 = ring_cached(P)
(ok if r1 == 0 else fail)("a ring client of the gateway's uid, the HTTP users' prompt: cached_tokens %s" % r1)
R = prompt(3)
r2, h2 = ring_cached(R), cached(R)
(ok if r2 == 0 and h2 == 0 else fail)("a ring client's prompt, then an HTTP user's: cached_tokens %s (nothing shared)" % h2)

# item 4: per-address cap, the header deadline
def trickler(src):
    s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    return s

def closed(s, wait):
    s.settimeout(wait)
    try:
        s.sendall(b"X")
        return s.recv(1) == b""
    except (socket.timeout, TimeoutError):
        return False
    except OSError:
        return True

slow = [trickler("127.0.0.1") for _ in range(8)]
time.sleep(0.3)
ninth = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.1", 0))
(ok if closed(ninth, 2) else fail)("the 9th connection from 127.0.0.1 (--max-connections-per-address 8): closed at once")
st, r = post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4}, "127.0.0.2", timeout=10)
(ok if st == 200 else fail)("meanwhile 127.0.0.2 is served (%s)" % st)
t0 = time.monotonic()
n = 0
for s in slow:
    n += closed(s, max(0.1, 4 - (time.monotonic() - t0)))
sec = time.monotonic() - t0 + 0.3
(ok if n == 8 and sec < 4.5 else fail)(
    "8 peers trickling headers closed within %.1f s (--header-timeout 1, --timeout 60): %d/8" % (sec, n))
for s in slow + [ninth]:
    s.close()

# item 6: a hang-up cancels every choice at once (the engine runs 4 at a time; 60 wait here),
# though the pump is never idle (ALLM_GW_TEST_PUMP_BUSY: on a small model it idles between
# steps and its idle poll saw the hang-up even before the fix)
def engine_status():
    return json.loads(subprocess.run([ctl, "--name", engine, "status", "--json"], capture_output=True,
                                     text=True).stdout)
# from another address: 127.0.0.1's slots may still be freeing on a loaded machine
c = http.client.HTTPConnection("127.0.0.1", port, timeout=0.8, source_address=("127.0.0.4", 0))
c.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "n": 64, "max_tokens": 400,
                                                 "ignore_eos": True, "temperature": 1}),
          {"Content-Type": "application/json"})
try:
    c.getresponse()
except (socket.timeout, TimeoutError):
    pass
c.sock.shutdown(socket.SHUT_RDWR)
c.close()
t0 = time.monotonic()
s = engine_status()
done0 = s["requests"]["finished"] + s["requests"]["failed"] + s["queues"]["running"] + s["queues"]["waiting"]
while time.monotonic() - t0 < 10:
    s = engine_status()
    if s["queues"]["running"] + s["queues"]["waiting"] == 0:
        break
    time.sleep(0.05)
sec = time.monotonic() - t0
ran = s["requests"]["finished"] + s["requests"]["failed"] - done0
(ok if sec < 2 and ran <= 4 else fail)(
    "n=64 hung up after 0.8 s: the engine idle %.2f s later, %d more choices reached it after the hang-up" % (sec, ran))
PY
cat "$tmp/keyless.out"
grep -q "^FAIL" "$tmp/keyless.out" && fail "keyless checks (above)"
[ "$(grep -c '^ok:' "$tmp/keyless.out")" = 9 ] || fail "the keyless checks did not all run"

# --- item 7: keys from a file and the environment, never on argv ---------------------------------
code() { curl -s -o "$tmp/body" -w '%{http_code}' --max-time 10 "$@"; }
tr '\0' ' ' <"/proc/$E_PID/cmdline" | grep -q -- "adm-from-file\|scrape-from" &&
	fail "a key on the gateway's command line" || ok "no key on the gateways' command lines (ps shows none)"
[ "$(code -X POST -H 'Authorization: Bearer adm-from-file' "$E_URL/reset_prefix_cache")" = 200 ] &&
	ok "--admin-api-key-file: POST /reset_prefix_cache with the file's key: 200" ||
	fail "--admin-api-key-file: $(cat "$tmp/body")"
[ "$(code -X POST -H 'Authorization: Bearer # the admin key' "$E_URL/reset_prefix_cache")" = 401 ] &&
	ok "... a comment line is no key" || fail "the file's comment taken as a key"
[ "$(code -H 'Authorization: Bearer scrape-from-env' "$E_URL/metrics")" = 200 ] &&
	ok "\$ALLM_METRICS_API_KEY: GET /metrics with it: 200" || fail "\$ALLM_METRICS_API_KEY: $(cat "$tmp/body")"
[ "$(code -H 'Authorization: Bearer scrape-from-file' "$F_URL/metrics")" = 200 ] &&
	[ "$(code -H 'Authorization: Bearer user-key' "$F_URL/metrics")" = 401 ] &&
	ok "--metrics-api-key-file: its key 200, a user's key 401" || fail "--metrics-api-key-file: $(cat "$tmp/body")"

# --- item 8: /metrics behind a key once any is set; answered while the engine is stopped --------
gw_start gwhard --api-key user-key --admin-api-key adm
A_URL=$GW_URL A_PID=$GW_PID
gw_up "$A_URL" || exit 1
[ "$(code "$A_URL/metrics")" = 401 ] && [ "$(code -H 'Authorization: Bearer user-key' "$A_URL/metrics")" = 401 ] &&
	ok "API keys set, no metrics key: /metrics refuses no key and a user's key (401)" ||
	fail "/metrics with API keys set: $(cat "$tmp/body")"
[ "$(code -H 'Authorization: Bearer adm' "$A_URL/metrics")" = 200 ] && ok "... and takes the admin key" ||
	fail "/metrics with the admin key: $(cat "$tmp/body")"
grep -qi "warn.*GET /metrics is open to anyone" "$K_LOG" &&
	ok "a keyless gateway says loudly that /metrics is open" || fail "no warning that /metrics is open"
kill -STOP "$DPID"
t0=$(date +%s.%N)
c=$(code -H 'Authorization: Bearer adm' --max-time 5 "$A_URL/metrics")
t1=$(date +%s.%N)
kill -CONT "$DPID"
sec=$(python3 -c "print(round($t1 - $t0, 2))")
[ "$c" = 200 ] && grep -q "^vllm:num_requests_running" "$tmp/body" && python3 -c "import sys; sys.exit($sec >= 1)" &&
	ok "the engine stopped mid-step: /metrics answered in $sec s with the kept figures" ||
	fail "/metrics with the engine stopped: $c after $sec s"

gw_stop "$K_PID" "keyless gateway"
gw_stop "$E_PID" "gateway with keys from a file and the environment"
gw_stop "$F_PID" "gateway with a metrics key file"
gw_stop "$A_PID" "gateway with keys"
daemon_stop "engine"
finish
