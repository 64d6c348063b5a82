# Description: test client for kv-events-ipc.sh and kv-events-curve.sh (not a test by itself): subscribes to allm-engined's KV events as a router would (SUB on the PUB, DEALER on the replay socket, optionally with ZeroMQ CURVE keys), asks for a replay from seq 0 and counts the batches it can decode with msgspec (vLLM's KVEventBatch) until its deadline; prints {"pub": N, "replay": N, "end": bool} as JSON.
# usage: python kv-events-probe.py PUB_EP REPLAY_EP [--server-key Z85] [--client-key FILE] [--wait S] [--want-pub N]
#   --client-key FILE: a file with two lines, the client's public then secret key (Z85)
import argparse
import json
import time
from typing import Any

import msgspec
import zmq


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
    data_parallel_rank: Any = None


ap = argparse.ArgumentParser()
ap.add_argument("pub")
ap.add_argument("replay")
ap.add_argument("--server-key")
ap.add_argument("--client-key")
ap.add_argument("--wait", type=float, default=3.0)
ap.add_argument("--want-pub", type=int, default=0, help="stop early once this many PUB batches decoded")
a = ap.parse_args()

dec = msgspec.msgpack.Decoder(type=KVEventBatch)
END = (-1).to_bytes(8, "big", signed=True)
ctx = zmq.Context()


def sock(kind):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    if a.server_key:
        pub, sec = open(a.client_key).read().split()[:2] if a.client_key else zmq.curve_keypair()
        s.curve_serverkey = a.server_key.encode() if isinstance(a.server_key, str) else a.server_key
        s.curve_publickey = pub.encode() if isinstance(pub, str) else pub
        s.curve_secretkey = sec.encode() if isinstance(sec, str) else sec
    return s


sub = sock(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect(a.pub)
rep = sock(zmq.DEALER)
rep.connect(a.replay)
rep.send_multipart([(0).to_bytes(8, "big")])  # queued until the handshake, if ever, succeeds

n_pub = n_rep = 0
end = False
poller = zmq.Poller()
poller.register(sub, zmq.POLLIN)
poller.register(rep, zmq.POLLIN)
deadline = time.time() + a.wait
while time.time() < deadline and not (end and n_pub >= a.want_pub):
    for s, _ in poller.poll(50):
        fr = s.recv_multipart()
        if s is sub and len(fr) == 3:
            dec.decode(fr[2])
            n_pub += 1
        elif s is rep and len(fr) == 2:
            if fr[0] == END:
                end = True
            else:
                dec.decode(fr[1])
                n_rep += 1
print(json.dumps({"pub": n_pub, "replay": n_rep, "end": end}), flush=True)
