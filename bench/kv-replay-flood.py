#!/usr/bin/env python3
"""A KV-events replay flood against allm-engined builds side by side (issue 49 item
2): each engine gets a prefix cache of --blocks blocks (distinct 480-id prompts),
a replay ring of 8 batches (ALLM_KV_EVENTS_TEST_RING) so that a replay from seq 0
needs a snapshot of the whole cache, then a flood of --requests replay requests over
--flood-s seconds, each from a fresh peer that sends [seq 0] and leaves (the
issue's attacker). A victim sends 8-token requests one after another before,
during and after the flood; the script prints its latencies and how long the
engine stayed slow. Sides alternate run by run.

usage: build/venv/bin/python bench/kv-replay-flood.py --side NAME=ENGINED_PATH ... [--runs N]
(env ALLM_LIBRARY: the build's libadaptivellm; pyzmq and adaptivellm in that venv)"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import adaptivellm
import zmq

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--side", action="append", required=True, help="NAME=PATH of an allm-engined")
ap.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "..", "data", "models", "stories260K"))
ap.add_argument("--ctl", default=os.path.join(os.path.dirname(__file__), "..", "build", "ctl", "allmctl"))
ap.add_argument("--blocks", type=int, default=36000)
ap.add_argument("--requests", type=int, default=752)
ap.add_argument("--flood-s", type=float, default=5.0)
ap.add_argument("--runs", type=int, default=2)
a = ap.parse_args()
sides = [s.split("=", 1) for s in a.side]
tmp = tempfile.mkdtemp(prefix="allm-flood.")
os.environ["ALLM_RUNTIME_DIR"] = os.path.join(tmp, "run")


def free_port_pair():
    import random
    import socket
    for _ in range(200):
        p = random.randint(20000, 60000)
        try:
            for q in (p, p + 1):
                s = socket.socket()
                s.bind(("127.0.0.1", q))
                s.close()
            return p
        except OSError:
            pass
    raise SystemExit("no free port pair")


def victim_loop(stop, out, name):
    with adaptivellm.Client(name=name) as c:
        i = 0
        while not stop.is_set():
            ids = [1 + (i * 7 + j * 13) % 500 for j in range(8)]
            t = time.time()
            c.generate(prompt_ids=ids, max_tokens=8, temperature=0, ignore_eos=True)
            out.append((t, time.time() - t))
            i += 1


def one(side, path, run):
    name = f"fl{run}{side}"
    port = free_port_pair()
    env = dict(os.environ, ALLM_KV_EVENTS_TEST_RING="8")
    log = open(os.path.join(tmp, name + ".log"), "w")
    p = subprocess.Popen([path, "--name", name, "--model", a.model, "--device", "cpu", "--gpu-blocks",
                          str(a.blocks + 2000), "--cpu-blocks", "16", "--profile", os.path.join(tmp, "profile.json"),
                          "--kv-events-endpoint", f"tcp://127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
                         env=env)
    sock = os.path.join(os.environ["ALLM_RUNTIME_DIR"], name + ".sock")
    while not os.path.exists(sock):
        if p.poll() is not None:
            raise SystemExit(open(log.name).read())
        time.sleep(0.05)
    t = time.time()
    with adaptivellm.Client(name=name) as c:
        for k in range(a.blocks // 30 + 1):
            ids = [1 + (k * 31 + j * (k % 97 + 3)) % 500 for j in range(480)]
            c.generate(prompt_ids=ids, max_tokens=1, temperature=0)
    fill = time.time() - t
    st = json.loads(subprocess.run([a.ctl, "--name", name, "status", "--json"], capture_output=True,
                                   text=True).stdout)
    cached = sum(st["prefix_cache"]["cached_blocks"].values())
    stop, lat = threading.Event(), []
    vt = threading.Thread(target=victim_loop, args=(stop, lat, name))
    vt.start()
    time.sleep(3)
    ctx = zmq.Context()
    f0 = time.time()
    for i in range(a.requests):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 500)
        s.connect(f"tcp://127.0.0.1:{port + 1}")
        s.send((0).to_bytes(8, "big"))
        s.close()
        time.sleep(max(0.0, f0 + (i + 1) * a.flood_s / a.requests - time.time()))
    f1 = time.time()
    ctx.term()
    # after the flood: until the victim is back to its baseline, 30 s at most
    base = [d for t0, d in lat if t0 < f0]
    b50 = statistics.median(base)
    end = f1 + 30
    while time.time() < end:
        recent = [d for t0, d in lat[-5:]]
        if len(lat) > 5 and lat[-5][0] > f1 and max(recent) < 3 * b50 + 0.005:
            break
        time.sleep(0.1)
    stop.set()
    vt.join()
    during = [d for t0, d in lat if f0 <= t0 and t0 + d <= end]
    slow_until = max([t0 + d for t0, d in lat if t0 + d > f0 and d > 3 * b50 + 0.005] or [f0])
    st = json.loads(subprocess.run([a.ctl, "--name", name, "status", "--json"], capture_output=True,
                                   text=True).stdout)
    kv = (st.get("kv_events") or {}).get("replay", {})
    p.send_signal(signal.SIGTERM)
    p.wait(60)
    return {"side": side, "run": run, "cached_blocks": cached, "fill_s": round(fill, 1),
            "victim_base_ms": round(b50 * 1e3, 1),
            "victim_flood_p50_ms": round(statistics.median(during) * 1e3, 1),
            "victim_flood_max_ms": round(max(during) * 1e3, 1),
            "slow_for_s": round(slow_until - f0, 1), "flood_s": round(f1 - f0, 1),
            "snapshots_built": kv.get("snapshots_built", "n/a"), "dropped_gone": kv.get("dropped_gone", "n/a"),
            "load": [round(x, 1) for x in os.getloadavg()]}


rows = []
for run in range(a.runs):
    order = sides if run % 2 == 0 else sides[::-1]
    for k, (side, path) in enumerate(order):
        r = one(side, path, run * len(sides) + k)
        print(json.dumps(r), flush=True)
        rows.append(r)
subprocess.run(["rm", "-rf", tmp])
