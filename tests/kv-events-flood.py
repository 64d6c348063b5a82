# Description: test client for kv-events-flood.sh (not a test by itself): floods allm-engined's KV-events replay socket (issue 49 item 2) and asserts the mechanism, not a timing: a snapshot is built at most once per sequence number however many peers ask for one; a peer's burst gets one replay at a time (the rest dropped_peer); peers that left before their answer are dropped_gone; more peers than replay slots are dropped_busy; every request is accounted for (served + dropped + active); a victim's request is still served, and its latency with and without a flood is printed (not asserted).
# usage: python kv-events-flood.py (env ALLM, CTL, NAME, PID: the engine's, EP, REPLAY)
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

import zmq

ALLM, CTL, NAME, PID = os.environ["ALLM"], os.environ["CTL"], os.environ["NAME"], int(os.environ["PID"])
EP, REPLAY = os.environ["EP"], os.environ["REPLAY"]
END = (-1).to_bytes(8, "big", signed=True)
SLOTS = 16  # KV_REPLAY_ACTIVE
fails = 0


def ok(m):
    print("ok: " + m, flush=True)


def fail(m):
    global fails
    print("FAIL: " + m, flush=True)
    fails += 1


def status():
    out = subprocess.run([CTL, "--name", NAME, "status", "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["kv_events"]


def gen(seed, n=40, max_tokens=8):
    ids = [1 + (i * (31 + 2 * seed) + 7 * seed) % 400 for i in range(n)]
    t = time.time()
    subprocess.run([ALLM, "--name", NAME, "generate", "--prompt-ids", ",".join(map(str, ids)),
                    "--max-tokens", str(max_tokens), "--temperature", "0"], check=True, capture_output=True)
    return time.time() - t


ctx = zmq.Context()


def dealer(c=ctx):
    s = c.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 2000)
    s.connect(REPLAY)
    return s


def ask(s, start):
    s.send_multipart([start.to_bytes(8, "big")])


def answer(s, timeout_ms):
    """Reads one replay to its end marker; the seqs received, or None on timeout."""
    seqs = []
    while s.poll(timeout_ms):
        fr = s.recv_multipart()
        if fr[0] == END:
            return seqs
        seqs.append(int.from_bytes(fr[0], "big"))
    return None


def answers(socks, quiet_ms=1500):
    """How many of socks get a whole replay (to its end marker), read together
    until none has anything for quiet_ms."""
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    done = set()
    while True:
        ready = poller.poll(quiet_ms)
        if not ready:
            return len(done)
        for s, _ in ready:
            if s.recv_multipart()[0] == END:
                done.add(s)


def connected(socks):
    """Every socket has its connection up: one round trip each (a replay from the
    future: only the end marker), SLOTS at a time so none is dropped_busy."""
    future = status()["next_seq"] + 10**9
    for i in range(0, len(socks), SLOTS):
        batch = socks[i:i + SLOTS]
        for s in batch:
            ask(s, future)
        for s in batch:
            if answer(s, 10000) is None:
                raise TimeoutError("no round trip on a fresh replay socket")


def counters():
    r = status()["replay"]
    return r


def delta(a, b):
    return {k: b[k] - a[k] for k in b if isinstance(b[k], int)}


def accounted(d, what):
    dropped = d["dropped_gone"] + d["dropped_peer"] + d["dropped_busy"] + d["dropped_stalled"]
    if d["requests"] == d["served"] + dropped + d["active"]:
        ok(f"{what}: every request accounted for: {d['requests']} = {d['served']} served + {dropped} dropped "
           f"+ {d['active']} active")
    else:
        fail(f"{what}: requests {d['requests']} != served + dropped + active: {d}")


class Stopped:
    """The engine stopped (SIGSTOP) while peers queue requests, so that they all wait
    in its socket together when it resumes: what a flood looks like to it."""

    def __enter__(self):
        os.kill(PID, signal.SIGSTOP)

    def __exit__(self, *a):
        os.kill(PID, signal.SIGCONT)


# --- a cache with blocks, and more batches than the ring keeps (8 under the test hook) ---
for s in range(12):
    gen(s)
seq0 = status()["next_seq"]
if seq0 > 9:
    ok(f"{seq0} batches published: a replay from 0 needs a snapshot")
else:
    fail(f"only {seq0} batches")

# --- 1. snapshots shared: 200 peers ask for seq 0 while nothing is published ---------
peers = [dealer() for _ in range(200)]
connected(peers)
c0 = counters()
s0 = status()["next_seq"]
answered = 0
for i in range(0, len(peers), SLOTS):
    batch = peers[i:i + SLOTS]
    for p in batch:
        ask(p, 0)
    for p in batch:
        got = answer(p, 10000)
        if got and got[0] >= 8:
            answered += 1
c1 = counters()
d = delta(c0, c1)
s1 = status()["next_seq"]
if answered == len(peers) and d["snapshots_built"] <= (s1 - s0) + 1:
    ok(f"{answered} replays from seq 0 (older than the ring) built {d['snapshots_built']} snapshot(s) for "
       f"{s1 - s0 + 1} sequence number(s)")
else:
    fail(f"snapshot flood: {answered}/{len(peers)} answered, {d['snapshots_built']} snapshots built, "
         f"seq {s0}..{s1}")
accounted(d, "snapshot flood")

# --- 2. one peer's burst: one replay at a time, the rest dropped_peer -----------------
burst = peers[0]
c0 = counters()
with Stopped():
    for _ in range(50):
        ask(burst, 0)
got = 0
while answer(burst, 1500) is not None:
    got += 1
d = delta(c0, counters())
if d["dropped_peer"] >= 1 and got + d["dropped_peer"] == 50 and d["served"] == got:
    ok(f"a burst of 50 from one peer: {got} answered, {d['dropped_peer']} dropped_peer")
else:
    fail(f"burst: {got} answered, counters {d}")
accounted(d, "one peer's burst")

# --- 3. more peers than replay slots: the rest dropped_busy ----------------------------
# (64: even if the engine read them over 4 turns, one turn would see more than 16)
many = peers[1:65]
c0 = counters()
with Stopped():
    for p in many:
        ask(p, 0)
got = answers(many)
d = delta(c0, counters())
if d["dropped_busy"] >= 1 and got + d["dropped_busy"] == len(many) and got >= SLOTS:
    ok(f"{len(many)} peers at once: {got} answered, {d['dropped_busy']} dropped_busy ({SLOTS} slots)")
else:
    fail(f"busy: {got} answered, counters {d}")
accounted(d, "more peers than slots")

# --- 4. peers that leave before their answer: dropped_gone ----------------------------
lctx = zmq.Context()
leavers = [dealer(lctx) for _ in range(SLOTS - 4)]
connected(leavers)
c0 = counters()
with Stopped():
    for p in leavers:
        ask(p, 0)
        p.close()
    lctx.term()  # returns once every request is on the wire (LINGER), the connections closed
deadline = time.time() + 10
while time.time() < deadline:
    d = delta(c0, counters())
    if d["requests"] >= len(leavers) and d["active"] == 0:
        break
    time.sleep(0.1)
if d["dropped_gone"] >= 1:
    ok(f"{len(leavers)} peers that left: {d['dropped_gone']} dropped_gone (nothing built or queued for them)")
else:
    fail(f"leavers: counters {d}")
accounted(d, "peers that left")

# --- 5. a victim under a flood: still served (latency printed, not asserted) ------------
base = [gen(100 + i) for i in range(5)]
stop = threading.Event()


def flood(socks):
    while not stop.is_set():
        for p in socks:
            ask(p, 0)
        for p in socks:
            answer(p, 200)


flooders = [threading.Thread(target=flood, args=(peers[100 + 10 * i:110 + 10 * i],)) for i in range(4)]
for t in flooders:
    t.start()
try:
    under = [gen(200 + i) for i in range(5)]
finally:
    stop.set()
    for t in flooders:
        t.join()
mb, mu = statistics.median(base), statistics.median(under)
ok(f"a victim's 8-token request under a replay flood: median {mu * 1e3:.0f} ms, {mb * 1e3:.0f} ms without "
   f"(x{mu / mb:.1f}; the allm CLI's start included; printed, not asserted)")
st = status()
print("kv_events:", json.dumps(st["replay"]), flush=True)
accounted({k: v for k, v in st["replay"].items()}, "whole run")
print(f"{fails} failures" if fails else "kv-events-flood.py: all checks passed")
sys.exit(1 if fails else 0)
