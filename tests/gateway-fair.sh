#!/usr/bin/env bash
# Description: fairness between HTTP users inside the gateway (issue 37 item 2): one user's flood of 40 requests x n 16 (640 choices: the engine's whole per-client cap here) leaves three other users served at once, none 429, while the flood still waits — users told apart by their address (127.0.0.1-4) and, with several --api-key, by their key; the flood's own requests past --max-queued-per-user get a 429 naming it; when the flood hangs up, nothing of it is left in the engine or the gateway; an engine whose per-client cap is below what the gateway keeps there refuses, and the gateway waits instead of answering 429. Before, the gateway was one client with one queue: the flood filled the engine's per-client cap and the others got 429.
. "$(dirname "$0")/gateway-common.sh"
ulimit -n 4096 2>/dev/null

# a slow engine (a random model of some size, 2 sequences at a time) whose per-client
# cap the flood fills and keeps full: its first request takes many seconds
ctl_start gwfair --dummy small --profile "$tmp/profile-small.json" --max-num-seqs 2 --max-num-batched-tokens 64 \
	--max-queued-per-client 640

# flood GATEWAY-PORT MODE [KEYS...]: user 1 floods; users 2-4 each send one request
# while it waits; MODE addr: users by address, keys: by API key (KEYS[i] is user i's)
flood() {
	python3 - "$@" <<'PY'
import http.client, json, socket, sys, threading, time
port, mode, keys = int(sys.argv[1]), sys.argv[2], sys.argv[3:]

def conn(user):
    addr = "127.0.0.%d" % (user if mode == "addr" else 1)
    return http.client.HTTPConnection("127.0.0.1", port, timeout=300, source_address=(addr, 0))

def headers(user):
    h = {"Content-Type": "application/json"}
    if keys:
        h["Authorization"] = "Bearer " + keys[user - 1]
    return h

FLOOD = {"prompt": [1, 2, 3], "n": 16, "max_tokens": 1000, "ignore_eos": True, "temperature": 1}
conns, results = [], {}
def flood_one(i):
    c = conn(1)
    conns.append(c)
    try:
        c.request("POST", "/v1/completions", json.dumps(FLOOD), headers(1))
        r = c.getresponse()
        results[i] = (r.status, r.read())
    except (OSError, http.client.HTTPException) as e:
        results[i] = (None, str(e).encode())
ths = [threading.Thread(target=flood_one, args=(i,), daemon=True) for i in range(40)]
for t in ths:
    t.start()
time.sleep(2)  # every flood request is in (and most wait)
others = {}
def other(user):
    t0 = time.time()
    c = conn(user)
    c.request("POST", "/v1/completions", json.dumps({"prompt": [1, 5, 7], "max_tokens": 8, "temperature": 0}),
              headers(user))
    r = c.getresponse()
    others[user] = (r.status, r.read(), time.time() - t0)
ots = [threading.Thread(target=other, args=(u,)) for u in (2, 3, 4)]
for t in ots:
    t.start()
for t in ots:
    t.join()
done_flood = sum(1 for v in results.values() if v[0] == 200)
for u in (2, 3, 4):
    st, body, dt = others[u]
    print(("ok: user %d served during the flood (%.1f s)" if st == 200 else "FAIL: user %d got %s") %
          (u, dt if st == 200 else "%s %s" % (st, body[:200])))
n429 = [v for v in results.values() if v[0] == 429]
print("flood: %d answered 429, %d finished, %d still waiting when the others were served" %
      (len(n429), done_flood, 40 - len(results)))
print(("ok: the flood still waits (%d of 40 requests) while the others were served" if 40 - len(results) >= 10 else
       "FAIL: the flood did not wait (%d of 40 left): the test tests nothing") % (40 - len(results)))
if n429:
    e = json.loads(n429[0][1])["error"]
    print(("ok: the flood's own 429: %s" if "--max-queued-per-user" in e["message"] and
           e["type"] == "rate_limit_exceeded" else "FAIL: the flood's 429: %s") % e["message"])
print("flood-429 %d" % len(n429))
for c in conns:  # hang up: the gateway cancels what runs and drops what waits
    try:
        c.sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass
PY
}

# left_in_engine: waits until the engine holds no request (the flood hung up)
left_in_engine() {
	local n i
	for i in $(seq 200); do
		"$CTL" --name gwfair status --json >"$tmp/st.json" 2>/dev/null
		n=$(ctl_json "$tmp/st.json" queues.waiting)$(ctl_json "$tmp/st.json" queues.running)
		[ "$n" = 00 ] && break
		sleep 0.1
	done
	[ "$n" = 00 ] && ok "$1: the flood hung up: nothing of it left in the engine" ||
		fail "$1: waiting+running left in the engine: $n"
}

# --- users by address --------------------------------------------------------------
gw_start gwfair
gw_up "$GW_URL" || exit 1
flood "$GW_PORT" addr >"$tmp/addr.out" 2>&1
cat "$tmp/addr.out"
grep -q "^FAIL" "$tmp/addr.out" && fail "users by address (above)"
[ "$(grep -c '^ok: user' "$tmp/addr.out")" = 3 ] || fail "users by address: the client did not finish"
grep -q "^flood-429 0$" "$tmp/addr.out" && ok "by address: the flood itself was never refused (640 choices < 4096)" ||
	fail "by address: the flood got 429s under the default quota"
left_in_engine "by address"
gw_stop "$GW_PID" "gateway, users by address"

# --- users by API key (one address), a per-user quota the flood passes ---------------------
gw_start gwfair --api-key ka --api-key kb --api-key kc --api-key kd --max-queued-per-user 320
gw_up "$GW_URL" || exit 1
flood "$GW_PORT" keys ka kb kc kd >"$tmp/keys.out" 2>&1
cat "$tmp/keys.out"
grep -q "^FAIL" "$tmp/keys.out" && fail "users by key (above)"
[ "$(grep -c '^ok: user' "$tmp/keys.out")" = 3 ] || fail "users by key: the client did not finish"
grep -q "^flood-429 20$" "$tmp/keys.out" && ok "by key: 20 flood requests past --max-queued-per-user 320 got 429" ||
	fail "by key: flood 429s: $(grep flood-429 "$tmp/keys.out")"
left_in_engine "by key"
gw_stop "$GW_PID" "gateway, users by key"
daemon_stop "engine under the flood"

# --- an engine cap below what the gateway keeps there: its refusals wait, not 429 ----------
ctl_start gwcap --model "$M" --profile "$tmp/profile.json" --max-queued-per-client 4
gw_start gwcap --max-inflight 64
gw_up "$GW_URL" || exit 1
python3 - "$GW_PORT" <<'PY' >"$tmp/cap.out" 2>&1
import http.client, json, sys, threading
port, res = int(sys.argv[1]), []
# all ten sent at once and each long enough (4 x 128 tokens) to overlap the next: with
# 16 tokens a client starved of CPU once sent them one after another, under the cap
go = threading.Barrier(10)
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    go.wait()
    c.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "n": 4, "max_tokens": 128,
                                                     "ignore_eos": True, "seed": i}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    res.append((r.status, r.read()))
ths = [threading.Thread(target=one, args=(i,)) for i in range(10)]
for t in ths:
    t.start()
for t in ths:
    t.join()
st = sorted(r[0] for r in res)
print(("ok: 10 requests x n 4 through an engine that holds 4 at a time: all 200" if st == [200] * 10 else
       "FAIL: statuses %s: %s") % ((st, [r[1][:160] for r in res if r[0] != 200][:2]) if st != [200] * 10 else ()))
PY
cat "$tmp/cap.out"
grep -q "^ok:" "$tmp/cap.out" || fail "the engine's own cap: refusals became 429s"
"$CTL" --name gwcap status --json >"$tmp/st.json"
rej=$(python3 -c 'import json,sys; print(sum(c["rejected"] for c in json.load(open(sys.argv[1]))["client_list"]))' "$tmp/st.json")
[ "$rej" -gt 0 ] && ok "... the engine did refuse $rej submissions (its cap was reached)" ||
	fail "the engine never refused: the test tests nothing"
gw_stop "$GW_PID" "gateway over an engine with a small cap"
daemon_stop "engine with a small cap"
finish
