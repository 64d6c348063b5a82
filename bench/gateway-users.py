#!/usr/bin/env python3
"""One scenario of bench/gateway-users.sh against a running allm-gateway: a heavy user
(127.0.0.1) loads the gateway while other users (127.0.0.2-4) send requests whose
time to first token (TTFT) is measured. Prints one JSON object.

usage: gateway-users.py PORT SCENARIO [seconds]
  idle   the other users alone
  small  user 1 sends 4 x (n 128, max_tokens 480) non-streamed, no log-probabilities
  huge   the same with logprobs 10: 17 MB of JSON each (issue 37 item 1)
  flood  user 1 sends 40 x (n 128, max_tokens 480) at once (issue 37 item 2), and
         hangs up when the others are done
The other users each send streamed requests of max_tokens 400 (one after another,
a TTFT probe: the connection closes after the first token) and one whole one;
stdlib only (http.client)."""
import http.client
import json
import socket
import sys
import threading
import time

PORT, SCENARIO = int(sys.argv[1]), sys.argv[2]
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 20


def conn(user, timeout=900):
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout,
                                      source_address=("127.0.0.%d" % user, 0))


def post(user, body):
    c = conn(user)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()


def ttft(user, whole):
    """One streamed 400-token request: (status, seconds to its first token or None,
    tokens generated: its usage, when whole)."""
    t0 = time.monotonic()
    c = conn(user, timeout=300)
    body = {"prompt": "The little dog", "max_tokens": 400, "ignore_eos": True, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        return r.status, None, 0
    first, n = None, 0
    for line in r:
        if line.startswith(b"data: {") and b'"text":""' not in line and first is None:
            first = time.monotonic() - t0
            if not whole:
                break
        elif line.startswith(b"data: {") and b'"usage":{' in line:
            n = json.loads(line[6:])["usage"]["completion_tokens"]
        elif line.startswith(b"data: [DONE]"):
            break
    c.close()
    return 200, first, n


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


heavy = []  # (status, bytes, seconds) of user 1's requests
heavy_conns = []


def heavy_one(body):
    t0 = time.monotonic()
    c = conn(1)
    heavy_conns.append(c)
    try:
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        st, b = r.status, r.read()
    except (OSError, http.client.HTTPException):
        st, b = "hung up", b""
    heavy.append((st, len(b), time.monotonic() - t0))


threads = []
if SCENARIO in ("small", "huge"):
    for i in range(4):
        b = {"prompt": "Once upon a time", "n": 128, "max_tokens": 480, "ignore_eos": True, "temperature": 1,
             "seed": i}
        if SCENARIO == "huge":
            b["logprobs"] = 10
        threads.append(threading.Thread(target=heavy_one, args=(b,)))
elif SCENARIO == "flood":
    for i in range(40):
        b = {"prompt": "Once upon a time", "n": 128, "max_tokens": 480, "ignore_eos": True, "temperature": 1,
             "seed": i}
        threads.append(threading.Thread(target=heavy_one, args=(b,)))
for t in threads:
    t.start()
if threads:
    time.sleep(3)  # the heavy user's work is in the engine (and its answers are being written)

# the other users: probes for SECONDS, then one whole request each
others = {u: [] for u in (2, 3, 4)}


def user(u):
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        others[u].append(ttft(u, False))
        time.sleep(0.2)
    others[u].append(ttft(u, True) + ("whole",))


us = [threading.Thread(target=user, args=(u,)) for u in (2, 3, 4)]
for t in us:
    t.start()
for t in us:
    t.join()
heavy_busy = sum(1 for t in threads if t.is_alive())
if SCENARIO == "flood":  # what is left of the flood is not waited for: it hangs up
    for c in heavy_conns:
        try:
            c.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
for t in threads:
    t.join()
samples = [s for v in others.values() for s in v]
ttfts = [s[1] for s in samples if s[1] is not None]
statuses = {}
for s in samples:
    statuses[str(s[0])] = statuses.get(str(s[0]), 0) + 1
whole = [s for s in samples if len(s) == 4]
hst = {}
for h in heavy:
    hst[str(h[0])] = hst.get(str(h[0]), 0) + 1
print(json.dumps({
    "scenario": SCENARIO,
    "others": {"requests": len(samples), "statuses": statuses, "ttft_ms": {
        "p50": round(pct(ttfts, 0.5) * 1e3, 1) if ttfts else None,
        "p99": round(pct(ttfts, 0.99) * 1e3, 1) if ttfts else None,
        "max": round(max(ttfts) * 1e3, 1) if ttfts else None},
        "whole_400_token_ok": sum(1 for s in whole if s[0] == 200 and s[2] == 400), "whole": len(whole)},
    "heavy": {"requests": len(heavy), "statuses": hst,
              "answer_mb": round(max((h[1] for h in heavy), default=0) / 1e6, 1),
              "busy_while_others_ran": heavy_busy,
              "seconds_max": round(max((h[2] for h in heavy), default=0), 1)},
}))
