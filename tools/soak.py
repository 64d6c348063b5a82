#!/usr/bin/env python3
"""The soak (issue 49): ring clients (the adaptivellm package) and HTTP clients (the
OpenAI completions API through allm-gateway) against one allm-engined with the
prefix cache on, `allmctl cache reset` every few seconds, for --minutes N; every
answer (greedy) compared with the same prompt's answer from a second engine and
gateway with the prefix cache off; both processes' memory (RSS) sampled; a router
subscribed to the engine's KV events (ipc) whose index must match the engine's
cache at the end. Prints the figures; exits 1 on any mismatch, error, growing
memory or unclean stop.

Run through tools/soak.sh, which builds the venv and finds the binaries."""
import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import adaptivellm
import msgspec
import zmq

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", required=True, help="the build directory (allm-engined, allm-gateway, allmctl)")
ap.add_argument("--model", required=True, help="model directory or .gguf for both engines")
ap.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
ap.add_argument("--ring-clients", type=int, default=4, help="ring client threads (default 4)")
ap.add_argument("--http-clients", type=int, default=4, help="HTTP client threads (default 4)")
ap.add_argument("--reset-every", type=float, default=2.0, help="seconds between cache resets (default 2)")
ap.add_argument("--prompts", type=int, default=48, help="distinct prompts (default 48)")
ap.add_argument("--gpu-blocks", type=int, default=96, help="the cached engine's device blocks: few, so "
                "blocks move down the tiers (default 96)")
ap.add_argument("--cpu-blocks", type=int, default=96, help="its host blocks (default 96)")
ap.add_argument("--vocab", type=int, default=500, help="prompt ids are drawn from 1..VOCAB (default 500)")
ap.add_argument("--seed", type=int, default=1, help="prompt pool seed")
ap.add_argument("--keep", action="store_true", help="keep the scratch directory (logs)")
ap.add_argument("--no-kv-events", action="store_true", help="without the KV events subscriber")
a = ap.parse_args()

ENGINED = os.path.join(a.build, "engined", "allm-engined")
GATEWAY = os.path.join(a.build, "engined", "allm-gateway")
CTL = os.path.join(a.build, "ctl", "allmctl")
tmp = tempfile.mkdtemp(prefix="allm-soak.")
os.environ["ALLM_RUNTIME_DIR"] = os.path.join(tmp, "run")
procs = []


def log(msg):
    print(f"soak: {msg}", flush=True)


def start(argv, logname):
    f = open(os.path.join(tmp, logname), "w")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def wait_for(cond, what, timeout=60.0):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise SystemExit(f"soak: {what} did not happen within {timeout:.0f} s (logs in {tmp})")


def engine(name, *flags):
    p = start([ENGINED, "--name", name, "--model", a.model, "--device", "cpu",
               "--profile", os.path.join(tmp, "profile.json"), *flags], name + ".log")
    sock = os.path.join(os.environ["ALLM_RUNTIME_DIR"], name + ".sock")
    wait_for(lambda: os.path.exists(sock) or p.poll() is not None, f"engine {name} start")
    if p.poll() is not None:
        raise SystemExit(f"soak: engine {name} exited: {open(os.path.join(tmp, name + '.log')).read()[-2000:]}")
    return p


def gateway(name):
    p = start([GATEWAY, "--engine", name, "--port", "0", "--served-model-name", "soak"], name + "-gw.log")
    path = os.path.join(tmp, name + "-gw.log")

    def port():
        for line in open(path):
            if "listening on http://" in line:
                return int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
        if p.poll() is not None:
            raise SystemExit(f"soak: gateway {name} exited: {open(path).read()[-2000:]}")
        return None
    return p, wait_for(port, f"gateway {name} start")


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def status(name):
    out = subprocess.run([CTL, "--name", name, "status", "--json"], capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout) if out.returncode == 0 else None


class Http:
    """One keep-alive connection to a gateway."""

    def __init__(self, port):
        self.port = port
        self.c = None

    def complete(self, ids, max_tokens):
        body = json.dumps({"model": "soak", "prompt": ids, "max_tokens": max_tokens, "temperature": 0})
        for attempt in (0, 1):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                self.c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
                r = self.c.getresponse()
                data = r.read()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
                j = json.loads(data)
                return j["choices"][0]["text"], j["usage"]["prompt_tokens_details"]["cached_tokens"]
            except (http.client.HTTPException, ConnectionError) as e:
                self.c = None  # the server closed a kept-alive connection: once more on a new one
                if attempt:
                    raise RuntimeError(f"connection: {e}") from e
        raise AssertionError("unreachable")


# --- a router's view of the KV events (vLLM's KVEventBatch, ctl/PROTOCOL.md) ----------
class BlockStored(msgspec.Struct, array_like=True, tag=True):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class BlockRemoved(msgspec.Struct, array_like=True, tag=True):
    block_hashes: list[int]
    medium: str | None


class AllBlocksCleared(msgspec.Struct, array_like=True, tag=True):
    pass


class KVEventBatch(msgspec.Struct, array_like=True):
    ts: float
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


class KvRouter:
    """Subscribes to the engine's KV events, replays gaps, counts the blocks of each
    (hash, medium); errors are what a router could not make sense of (a remove of
    what was never stored, counts unequal to the engine's at the end). A hash stored
    in a second medium while the first still holds it breaks PROTOCOL.md's "one tier
    at a time": counted (`dual`) and failed (the cause, a chain stored again while a
    child of its dropped parent stayed cached, is fixed: tests/test-prefix-cache.c)."""
    MEDIA = {"GPU": "device", "CPU": "host", "DISK": "disk"}

    def __init__(self, ep):
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(ep)
        self.rep = self.ctx.socket(zmq.DEALER)
        self.rep.connect(ep + ".replay")
        self.dec = msgspec.msgpack.Decoder(type=KVEventBatch)
        self.where, self.last = {}, -1
        self.batches = self.events = self.replays = self.dual = 0
        self.dual_seen = []
        self.errors = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def apply(self, seq, payload):
        if seq <= self.last:
            return
        self.last = seq
        self.batches += 1
        for ev in self.dec.decode(payload).events:
            self.events += 1
            if isinstance(ev, AllBlocksCleared):
                self.where.clear()
            elif isinstance(ev, BlockStored):
                for h in ev.block_hashes:
                    other = [m for m in self.MEDIA if m != ev.medium and (h, m) in self.where]
                    if other:
                        self.dual += 1
                        if len(self.dual_seen) < 3:
                            self.dual_seen.append(f"seq {seq}: {h:#x} stored in {ev.medium} while in {other[0]}")
                    self.where[(h, ev.medium)] = self.where.get((h, ev.medium), 0) + 1
            else:
                for h in ev.block_hashes:
                    n = self.where.pop((h, ev.medium), 0)
                    if n > 1:
                        self.where[(h, ev.medium)] = n - 1
                    elif not n and len(self.errors) < 10:
                        self.errors.append(f"seq {seq}: block {h:#x} removed from {ev.medium}, never stored there")

    def replay(self, start):
        self.replays += 1
        self.rep.send(start.to_bytes(8, "big"))
        while self.rep.poll(10000):
            seqb, payload = self.rep.recv_multipart()
            if seqb == b"\xff" * 8:
                return
            self.apply(int.from_bytes(seqb, "big"), payload)
        self.errors.append(f"replay from {start}: no end marker in 10 s")

    def run(self):
        self.replay(0)  # what was published before the subscription took
        while not self.stop.is_set():
            if not self.sub.poll(100):
                continue
            _, seqb, payload = self.sub.recv_multipart()
            seq = int.from_bytes(seqb, "big")
            if seq > self.last + 1:
                self.replay(self.last + 1)
            self.apply(seq, payload)

    def counts(self):
        c = {m: 0 for m in self.MEDIA.values()}
        for (_, m), n in self.where.items():
            c[self.MEDIA[m]] += n
        return c

    def close(self):
        self.stop.set()
        self.t.join()
        self.ctx.destroy(linger=0)


# --- the prompt pool: groups sharing 16/32/48-token prefixes (whole blocks), then ---
# --- their own tail, so hits, partial hits and misses all happen --------------------
rng = random.Random(a.seed)
pool = []
for g in range(max(1, a.prompts // 6)):
    prefix = [rng.randint(1, a.vocab) for _ in range(48)]
    for j in range(6):
        shared = 16 * rng.randint(0, 3)
        tail = [rng.randint(1, a.vocab) for _ in range(rng.randint(4, 70))]
        pool.append((prefix[:shared] + tail, rng.randint(4, 24)))
pool = pool[:a.prompts]

try:
    kv_ep = None if a.no_kv_events else "ipc://" + os.path.join(tmp, "kv", "events")
    cached = engine("soak", "--gpu-blocks", str(a.gpu_blocks), "--cpu-blocks", str(a.cpu_blocks),
                    "--prefix-caching", "on", *(["--kv-events-endpoint", kv_ep] if kv_ep else []))
    router = KvRouter(kv_ep) if kv_ep else None
    ref = engine("soak-ref", "--prefix-caching", "off")
    gw, gw_port = gateway("soak")
    gw_ref, gw_ref_port = gateway("soak-ref")
    wait_for(lambda: Http(gw_port).complete([1, 2, 3], 1), "the gateway's first answer")
    wait_for(lambda: Http(gw_ref_port).complete([1, 2, 3], 1), "the reference gateway's first answer")

    # the reference answers, from the engine and gateway without a prefix cache
    t0 = time.time()
    with adaptivellm.Client(name="soak-ref") as rc:
        want_ids = [rc.generate(prompt_ids=ids, max_tokens=n, temperature=0).ids for ids, n in pool]
    href = Http(gw_ref_port)
    want_text = [href.complete(ids, n)[0] for ids, n in pool]
    log(f"{len(pool)} prompts ({min(len(p) for p, _ in pool)}-{max(len(p) for p, _ in pool)} ids), reference "
        f"answers from the cache-off engine in {time.time() - t0:.1f} s")
    ref.send_signal(signal.SIGTERM)
    gw_ref.send_signal(signal.SIGTERM)

    stop = threading.Event()
    lock = threading.Lock()
    counts = {"ring": 0, "http": 0, "ring_mismatch": 0, "http_mismatch": 0, "errors": 0, "resets": 0,
              "http_cached_tokens": 0}
    problems = []
    noted = set()

    def note(what):
        """Keeps the first 20 problems, one per kind and prompt."""
        key = what.split(":")[0]
        with lock:
            if len(problems) < 20 and key not in noted:
                noted.add(key)
                problems.append(what)

    def ring_client(k):
        r = random.Random(1000 + k)
        with adaptivellm.Client(name="soak") as c:
            while not stop.is_set():
                i = r.randrange(len(pool))
                ids, n = pool[i]
                try:
                    got = c.generate(prompt_ids=ids, max_tokens=n, temperature=0).ids
                except adaptivellm.AllmError as e:
                    with lock:
                        counts["errors"] += 1
                    note(f"ring prompt {i}: {e}")
                    continue
                with lock:
                    counts["ring"] += 1
                    if got != want_ids[i]:
                        counts["ring_mismatch"] += 1
                if got != want_ids[i]:
                    note(f"ring prompt {i}: {got} != {want_ids[i]}")

    def http_client(k):
        r = random.Random(2000 + k)
        h = Http(gw_port)
        while not stop.is_set():
            i = r.randrange(len(pool))
            ids, n = pool[i]
            try:
                text, hit = h.complete(ids, n)
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    counts["errors"] += 1
                note(f"http prompt {i}: {e}")
                continue
            with lock:
                counts["http"] += 1
                counts["http_cached_tokens"] += hit
                if text != want_text[i]:
                    counts["http_mismatch"] += 1
            if text != want_text[i]:
                note(f"http prompt {i}: {text!r} != {want_text[i]!r}")

    def resetter():
        while not stop.wait(a.reset_every):
            out = subprocess.run([CTL, "--name", "soak", "cache", "reset"], capture_output=True, text=True,
                                 timeout=30)
            with lock:
                if out.returncode == 0:
                    counts["resets"] += 1
                else:
                    counts["errors"] += 1
            if out.returncode:
                note(f"cache reset: {out.stderr.strip()}")

    rss = []  # (t, engine KiB, gateway KiB)

    def sampler():
        t_start = time.time()
        while not stop.wait(1.0):
            rss.append((time.time() - t_start, rss_kib(cached.pid), rss_kib(gw.pid)))

    threads = [threading.Thread(target=ring_client, args=(k,)) for k in range(a.ring_clients)]
    threads += [threading.Thread(target=http_client, args=(k,)) for k in range(a.http_clients)]
    threads += [threading.Thread(target=resetter), threading.Thread(target=sampler)]
    load0 = os.getloadavg()
    t_start = time.time()
    for t in threads:
        t.start()
    deadline = t_start + a.minutes * 60
    last_print = t_start
    while time.time() < deadline:
        time.sleep(min(1.0, max(0.0, deadline - time.time())))
        if time.time() - last_print >= 30 and a.minutes >= 1:
            last_print = time.time()
            with lock:
                c = dict(counts)
            log(f"{time.time() - t_start:5.0f} s: {c['ring']} ring + {c['http']} HTTP answers, "
                f"{c['ring_mismatch'] + c['http_mismatch']} mismatches, {c['errors']} errors, {c['resets']} resets, "
                f"engine RSS {rss[-1][1] / 1024 if rss and rss[-1][1] else 0:.0f} MiB")
    stop.set()
    for t in threads:
        t.join()
    wall = time.time() - t_start
    load1 = os.getloadavg()
    st = status("soak") or {}
    pc = st.get("prefix_cache", {})
    fails = []
    if router:
        # the engine is idle now: the router's index must come to equal its cache
        want = pc.get("cached_blocks")
        kv_next = lambda: ((status("soak") or {}).get("kv_events") or {}).get("next_seq", 0)  # noqa: E731
        wait_for(lambda: router.last + 1 >= kv_next(), "the KV events subscriber catching up", 30)
        router.close()
        kv = {"batches": router.batches, "events": router.events, "replays": router.replays,
              "index": router.counts(), "engine": want, "dual": router.dual, "dual_seen": router.dual_seen}
        if router.errors or router.counts() != want:
            fails.append(f"the KV events' index {router.counts()} != the engine's cache {want}: "
                         f"{router.errors[:3]}")
        if router.dual:
            fails.append(f"{router.dual} block hashes stored in two tiers at once: {router.dual_seen}")

    # memory: the first samples after a warm-up against the last ones
    summary = {"minutes": round(wall / 60, 2), **counts, **({"kv_events": kv} if router else {}),
               "answers_per_s": round((counts["ring"] + counts["http"]) / wall, 1),
               "engine_prefix_hit_tokens": pc.get("hit_tokens"), "engine_queried_tokens": pc.get("queried_tokens"),
               "loadavg_before": [round(x, 2) for x in load0], "loadavg_after": [round(x, 2) for x in load1]}
    for col, who in ((1, "engine"), (2, "gateway")):
        xs = [s[col] for s in rss if s[col]]
        if len(xs) < 4:
            continue
        q = max(1, len(xs) // 4)
        early, late = statistics.mean(xs[q:2 * q] or xs[:q]), statistics.mean(xs[-q:])
        summary[f"{who}_rss_mib"] = {"first": round(xs[0] / 1024, 1), "early": round(early / 1024, 1),
                                     "late": round(late / 1024, 1), "max": round(max(xs) / 1024, 1)}
        # flat: what the last quarter holds is within 10% + 16 MiB of the second quarter
        if wall >= 120 and late > early * 1.10 + 16 * 1024:
            fails.append(f"{who} RSS grew from {early / 1024:.0f} to {late / 1024:.0f} MiB")
    for p, what in ((cached, "engine"), (gw, "gateway")):
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        if rc != 0:
            fails.append(f"{what} exit status {rc} at SIGTERM")
    tail = open(os.path.join(tmp, "soak.log")).read()
    if "stopped; KV blocks in use: GPU 0, CPU 0;" not in tail:
        fails.append("the engine's last line is not 'stopped; KV blocks in use: GPU 0, CPU 0'")
    for p in (ref, gw_ref):
        p.wait(60)
    if counts["ring_mismatch"] or counts["http_mismatch"]:
        fails.append(f"{counts['ring_mismatch']} ring and {counts['http_mismatch']} HTTP answers differ from "
                     "the cache-off reference")
    if counts["errors"]:
        fails.append(f"{counts['errors']} errors")
    if not counts["ring"] or not counts["http"] or (a.minutes * 60 >= 2 * a.reset_every and not counts["resets"]):
        fails.append("a kind of client (or the resets) did nothing")
    print(json.dumps(summary, indent=1), flush=True)
    for p in problems:
        log("  " + p)
    if fails:
        log("FAIL: " + "; ".join(fails) + f" (logs in {tmp})")
        a.keep = True
        sys.exit(1)
    log(f"ok: {counts['ring']} ring + {counts['http']} HTTP answers in {wall:.0f} s, all equal to the cache-off "
        f"reference, {counts['resets']} cache resets, memory flat"
        + (f", the KV events' index equal to the cache after {router.batches} batches" if router else ""))
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if not a.keep:
        subprocess.run(["rm", "-rf", tmp])
    else:
        log(f"kept {tmp}")
