# How HAProxy's consistent hash, as deploy/haproxy-gen.sh configures it, splits keys over
# two equal engines (bench/README.md "Several engines behind HAProxy"): the share of 4000
# random bodies each engine gets (how even the ring is), and the home of each of
# bench/fleet.sh's 8 prefixes for the seeds it uses (1: uniform, 11-16: skewed), with
# the servers' default weight (16 ring points each) and with weight 100 (1600 each).
# HAProxy itself stands in for the gateways (http-request return 200): no engine needed.
# usage: python3 bench/fleet-ring.py            (needs haproxy)
import http.client
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = 30000 + os.getpid() % 20000


def config(weight):
    c = subprocess.run(["bash", f"{ROOT}/deploy/haproxy-gen.sh", "--bind", f"127.0.0.1:{PORT}",
                        f"127.0.0.1:{PORT + 1}", f"127.0.0.1:{PORT + 2}"],
                       capture_output=True, text=True, check=True).stdout
    c = c.replace(" check\n", f" check weight {weight}\n")
    for i in (1, 2):
        c += f"\nlisten s{i}\n    bind 127.0.0.1:{PORT + i}\n    http-request return status 200\n"
    return c


def body(prompt):
    """the layout tools/allm-load.py's openai SDK call writes (captured; deploy/README.md)"""
    return json.dumps({"model": "dummy:medium", "stream": True, "prompt": prompt, "max_tokens": 4,
                       "stream_options": {"include_usage": True}, "temperature": 0.0}, separators=(",", ":"))


def prefixes(seed, P=8, L=256, vocab=500):
    """allm-load.py's shared prefixes for --seed SEED"""
    return [[random.Random(seed * 1000 + i).randrange(3, vocab) for _ in range(L)] for i in range(P)]


def main():
    for weight in (1, 100):
        path = f"/tmp/fleet-ring-{os.getpid()}.cfg"
        with open(path, "w") as f:
            f.write(config(weight))
        hp = subprocess.Popen(["haproxy", "-f", path, "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            conn = http.client.HTTPConnection("127.0.0.1", PORT)

            def route(b):
                conn.request("POST", "/v1/completions", body=b, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                return r.getheader("X-Allm-Instance")

            rng = random.Random(7)
            n = 4000
            e1 = sum(route(body([rng.randrange(3, 500) for _ in range(300)])) == "e1" for _ in range(n))
            out = [f"weight {weight}: {n} random bodies, e1's share {e1 / n:.3f}; prefixes e1/e2"]
            for seed in (1, 11, 12, 13, 14, 15, 16):
                homes = [route(body(p + [rng.randrange(3, 500) for _ in range(32)])) for p in prefixes(seed)]
                out.append(f"seed {seed}: {homes.count('e1')}/{homes.count('e2')}")
            print(", ".join(out))
            sys.stdout.flush()
        finally:
            hp.terminate()
            hp.wait()
            os.unlink(path)


main()
