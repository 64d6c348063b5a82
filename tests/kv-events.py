# Description: test client for kv-events.sh (not a test by itself): subscribes to allm-engined's KV cache events with pyzmq, decodes every batch with msgspec against vLLM's published schema (vllm/distributed/kv_events.py: KVEventBatch, BlockStored, BlockRemoved, AllBlocksCleared as tagged arrays), keeps an index of which block sits in which medium as a router would, and checks it against the engine's own cache (allmctl status) after fills, shared prefixes, evictions down the tiers, a gap replayed from the buffer, a gap older than the buffer (snapshot), hostile replay requests and cache resets.
# usage: python kv-events.py (env ALLM, CTL, NAME, PORT: the PUB port; replay on PORT+1)
import json
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import msgspec
import zmq


# --- vLLM's schema, as vllm/distributed/kv_events.py publishes it ----------------------
# (array_like structs; events tagged by class name; ExternalBlockHash = bytes | int)
class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    """Base class for all KV cache-related events"""


class BlockStored(KVCacheEvent):
    block_hashes: list[bytes | int]
    parent_block_hash: bytes | int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[bytes | int]
    medium: str | None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
END_SEQ = (-1).to_bytes(8, "big", signed=True)
TIERS = {"GPU": "device", "CPU": "host", "DISK": "disk"}

fails = 0


def ok(m):
    print("ok: " + m, flush=True)


def fail(m):
    global fails
    print("FAIL: " + m, flush=True)
    fails += 1


ALLM, CTL, NAME, PORT = os.environ["ALLM"], os.environ["CTL"], os.environ["NAME"], int(os.environ["PORT"])
BS = 16


def status():
    out = subprocess.run([CTL, "--name", NAME, "status", "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def gen(ids, max_tokens=12):
    out = subprocess.run([ALLM, "--name", NAME, "generate", "--prompt-ids", ",".join(map(str, ids)),
                          "--max-tokens", str(max_tokens), "--temperature", "0", "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def prompt(seed, n):
    return [1 + (i * (31 + 2 * seed) + 7 * seed) % 400 for i in range(n)]


class Index:
    """A router's view: which block hash sits in which medium, with its tokens and parent."""

    def __init__(self):
        self.where, self.tokens, self.parent = {}, {}, {}
        self.errors = []
        self.stored = []  # every BlockStored seen, for the checks below
        self.removed = []

    def apply(self, batch):
        for ev in batch.events:
            if isinstance(ev, AllBlocksCleared):
                self.where.clear()
            elif isinstance(ev, BlockStored):
                self.stored.append(ev)
                if ev.block_size != BS or len(ev.token_ids) != BS * len(ev.block_hashes) or ev.lora_id is not None:
                    self.errors.append(f"BlockStored shape: {ev}")
                if ev.medium not in TIERS:
                    self.errors.append(f"medium {ev.medium!r}")
                parent = ev.parent_block_hash
                for i, h in enumerate(ev.block_hashes):
                    if not isinstance(h, int) or not 0 <= h < 2**64:
                        self.errors.append(f"hash {h!r} is not vLLM's 64-bit int form")
                    if h in self.where:
                        self.errors.append(f"block {h:#x} stored in {ev.medium} while in {self.where[h]}")
                    self.where[h] = ev.medium
                    self.tokens[h] = ev.token_ids[i * BS:(i + 1) * BS]
                    self.parent[h] = parent
                    parent = h
            elif isinstance(ev, BlockRemoved):
                self.removed.append(ev)
                for h in ev.block_hashes:
                    if self.where.get(h) != ev.medium:
                        self.errors.append(f"block {h:#x} removed from {ev.medium}, index has {self.where.get(h)}")
                    self.where.pop(h, None)

    def counts(self):
        c = Counter(self.where.values())
        return {TIERS[m]: c.get(m, 0) for m in TIERS}

    def chain(self, h):
        """The tokens of the whole prefix ending with block h, walking parents."""
        out = []
        while h is not None:
            if h not in self.tokens:
                return None
            out = self.tokens[h] + out
            h = self.parent[h]
        return out


ctx = zmq.Context()


class Subscriber:
    def __init__(self, index):
        self.index = index
        self.last = -1
        self.replayed = []  # (start, [seqs]) of each replay
        self.connect()
        self.rep = ctx.socket(zmq.DEALER)
        self.rep.setsockopt(zmq.LINGER, 0)
        self.rep.connect(f"tcp://127.0.0.1:{PORT + 1}")

    def connect(self):
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.connect(f"tcp://127.0.0.1:{PORT}")
        self.sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
        time.sleep(0.3)  # ZeroMQ's slow joiner: what is published before this is lost (and replayed)

    def disconnect(self):
        self.sub.close()

    def replay(self, start):
        """vLLM's replay: the starting seq, 8 bytes big-endian; batches come back, then an empty end marker."""
        self.rep.send_multipart([b"", start.to_bytes(8, "big")])
        got = []
        while True:
            if not self.rep.poll(5000):
                raise TimeoutError(f"replay from {start}: no end marker")
            fr = self.rep.recv_multipart()
            assert len(fr) == 3 and fr[0] == b"", fr
            if fr[1] == END_SEQ:
                assert fr[2] == b""
                break
            seq = int.from_bytes(fr[1], "big")
            got.append(seq)
            if seq > self.last:
                self.index.apply(decoder.decode(fr[2]))
                self.last = seq
        self.replayed.append((start, got))
        return got

    def drain(self, quiet=0.3, limit=5.0):
        """Reads what the PUB sends until it is quiet for `quiet` s; replays gaps."""
        end, idle = time.time() + limit, time.time() + quiet
        while time.time() < min(end, idle):
            if not self.sub.poll(50):
                continue
            topic, seqb, payload = self.sub.recv_multipart()
            if not topic.startswith(b"kv@" + NAME.encode() + b"@"):
                self.index.errors.append(f"topic {topic!r}")
            seq = int.from_bytes(seqb, "big")
            batch = decoder.decode(payload)  # strict: a wrong shape raises here
            if seq > self.last + 1:
                self.replay(self.last + 1)
            if seq > self.last:
                self.index.apply(batch)
                self.last = seq
            idle = time.time() + quiet


def agree(sub, what):
    sub.drain()
    want = status()["prefix_cache"]["cached_blocks"]
    have = sub.index.counts()
    if sub.index.errors:
        fail(f"{what}: index errors: {sub.index.errors[:5]}")
        sub.index.errors.clear()
    elif have != want:
        fail(f"{what}: the events say {have}, the engine's cache {want}")
    else:
        ok(f"{what}: the events' index matches the engine's cache {want}")
    return want


idx = Index()
sub = Subscriber(idx)

# --- start: seq 0 is an AllBlocksCleared (a restarted engine's old blocks are gone) ---
got = sub.replay(0)
if got and got[0] == 0:
    ok(f"replay from 0 at start: batches {got}")
else:
    fail(f"replay from 0 at start: {got}")
sub.rep.send_multipart([b"", (0).to_bytes(8, "big")])
fr = sub.rep.recv_multipart()
b0 = decoder.decode(fr[2])
while sub.rep.recv_multipart()[1] != END_SEQ:
    pass
if isinstance(b0.events[0], AllBlocksCleared) and b0.data_parallel_rank == 0 and b0.ts > 1.6e9:
    ok("batch 0: [ts, [AllBlocksCleared, ...], 0]")
else:
    fail(f"batch 0: {b0}")

# --- fills: prompt A's full blocks stored on the GPU, chained, with its tokens -----------
A = prompt(1, 40)
ra = gen(A)
agree(sub, "after prompt A")
stored = [e for e in idx.stored if e.medium == "GPU"]
seqA = A + ra["generated_ids"]
firsts = [h for e in stored for h in e.block_hashes[:1] if e.parent_block_hash is None]
hA = [h for h, t in idx.tokens.items() if t == A[:BS] and idx.parent[h] is None]
if len(hA) == 1:
    h1 = [h for h, p in idx.parent.items() if p == hA[0] and idx.tokens[h] == A[BS:2 * BS]]
    full = len(seqA) // BS
    last = [h for h in idx.where if idx.chain(h) == seqA[:full * BS]]
    if h1 and last:
        ok(f"prompt A: {full} full blocks (prompt and generated ids) stored on the GPU, chained by parent hash, "
           "with their token ids")
    else:
        fail(f"prompt A's chain: second block {h1}, whole chain {last}; stored {stored}")
else:
    fail(f"prompt A's first block: {hA}; stored {stored}")

# --- a shared prefix: B's own blocks chain onto A's second block -------------------------
B = A[:2 * BS] + prompt(2, 8)
n_stored = len(idx.stored)
rb = gen(B)
agree(sub, "after prompt B (two blocks shared with A)")
new = idx.stored[n_stored:]
a2 = h1[0] if hA and h1 else None
if rb["cached_tokens"] == 2 * BS and new and new[0].parent_block_hash == a2 and \
        idx.chain(new[0].block_hashes[-1]) == (B + rb["generated_ids"])[:BS * (2 + len(new[0].block_hashes))]:
    ok("prompt B: a 32-token hit, its new blocks stored once with A's second block as parent")
else:
    fail(f"prompt B: cached {rb['cached_tokens']}, new events {new}, A's second block {a2}")

# --- evictions: blocks leave the GPU for the CPU pool, and leave it ------------------------
for s in range(10, 22):
    gen(prompt(s, 64))
w = agree(sub, "after 12 prompts through 24 device blocks")
moved = {h for e in idx.removed if e.medium == "GPU" for h in e.block_hashes} & \
        {h for e in idx.stored if e.medium == "CPU" for h in e.block_hashes}
if moved and w["host"] > 0:
    ok(f"evictions: {len(moved)} blocks removed from GPU and stored on CPU under the same hash")
else:
    fail(f"evictions: moved {len(moved)}, engine {w}")
# a restore: A's prefix back from the host pool
ra2 = gen(A)
agree(sub, "after prompt A again (restored or recomputed)")

# --- a gap inside the replay buffer (8 batches under the test hook) -----------------------
sub.disconnect()
before = sub.last
gen(prompt(40, 40))
sub.connect()
gen(prompt(41, 40))
agree(sub, "after a gap of one request")
start, seqs = sub.replayed[-1] if sub.replayed else (None, [])
if start == before + 1 and seqs and seqs[0] == before + 1 and seqs == list(range(seqs[0], seqs[-1] + 1)):
    ok(f"gap: replayed from the buffer, batches {seqs[0]}..{seqs[-1]}")
else:
    fail(f"gap: replays {sub.replayed[-1:]}, last before {before}")

# --- a gap older than the buffer: one snapshot batch brings the index back --------------
sub.disconnect()
before = sub.last
for s in range(50, 62):
    gen(prompt(s, 40))
sub.connect()
n_rep = len(sub.replayed)
gen(prompt(62, 40))
agree(sub, "after a gap longer than the replay buffer")
# the snapshot (the cache after its seq), then the batches after it the buffer holds
snap = sub.replayed[n_rep][1] if len(sub.replayed) > n_rep else []
if snap and snap[0] > before + 8 and snap == list(range(snap[0], snap[0] + len(snap))) and len(snap) <= 9:
    ok(f"long gap: one snapshot batch (seq {snap[0]}) instead of the lost ones, then {len(snap) - 1} after it")
else:
    fail(f"long gap: replays {sub.replayed[n_rep:]}, last before {before}")

# --- hostile replay requests: ignored, the next good one is answered ---------------------
bad = ctx.socket(zmq.DEALER)
bad.setsockopt(zmq.LINGER, 0)
bad.connect(f"tcp://127.0.0.1:{PORT + 1}")
bad.send_multipart([b"", b"xyz"])
bad.send_multipart([b"", b"1", b"2", b"3", b"4"])
bad.send(b"x" * 200)  # over the request size: ZeroMQ drops the peer
time.sleep(0.3)
try:
    got = sub.replay(sub.last)
    ok(f"hostile replay requests ignored; a good one still answered ({got})")
except TimeoutError as e:
    fail(str(e))
bad.close()

# --- cache reset: AllBlocksCleared, and the index empties with the cache ----------------
n_before = len(idx.where)
subprocess.run([CTL, "--name", NAME, "cache", "reset"], check=True, capture_output=True)
w = agree(sub, "after allmctl cache reset")
if n_before and sum(w.values()) == 0 and not idx.where:
    ok(f"cache reset: AllBlocksCleared emptied an index of {n_before} blocks")
else:
    fail(f"cache reset: index {len(idx.where)}, engine {w}")
gen(A)
agree(sub, "after prompt A once more")
subprocess.run([CTL, "--name", NAME, "set", "prefix_caching=off"], check=True, capture_output=True)
w = agree(sub, "after set prefix_caching=off")
if not idx.where:
    ok("prefix_caching=off: AllBlocksCleared")

print(f"{fails} failures" if fails else "kv-events.py: all checks passed")
sys.exit(1 if fails else 0)
