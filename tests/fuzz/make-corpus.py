#!/usr/bin/env python3
"""Writes the SQE fuzz seed/regression corpus: one file per hostile or edge-case
entry (128-byte SQE followed by arena bytes). Re-run to regenerate."""
import os, struct
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus-sqe')
os.makedirs(out, exist_ok=True)
NAN = float('nan'); INF = float('inf')

def sqe(op=1, flags=0, kind=1, ignore_eos=0, max_tokens=8, tag=7, rid=0, off=0, ln=0,
        temp=0.0, top_p=1.0, top_k=0, n_stop=0, seed=0, stops=(0, 0, 0, 0)):
    b = struct.pack('<BBBBiQQIIffiIQ4i', op, flags, kind, ignore_eos, max_tokens, tag, rid,
                    off & 0xffffffff, ln & 0xffffffff, temp, top_p, top_k, n_stop & 0xffffffff, seed, *stops)
    return b + b'\0' * (128 - len(b))

ids = lambda *v: struct.pack('<%di' % len(v), *v)
cases = {
    'ok-ids': sqe(ln=12) + ids(1, 5, 9),
    'ok-text': sqe(kind=0, ln=5) + b'Hello',
    'ok-sampled': sqe(ln=12, temp=0.8, top_p=0.9, top_k=20, seed=3) + ids(1, 5, 9),
    'ok-stop-ids': sqe(ln=12, n_stop=2, stops=(7, 8, 0, 0)) + ids(1, 5, 9),
    'off-past-arena': sqe(off=5000, ln=4) + ids(1),
    'off-len-overflow': sqe(off=0xfffffff0, ln=0x20) + ids(1),
    'len-huge': sqe(ln=0xffffffff) + ids(1),
    'len-not-multiple-of-4': sqe(ln=6) + ids(1, 2),
    'len-zero': sqe(ln=0),
    'id-out-of-vocab': sqe(ln=8) + ids(1, 99999),
    'id-negative': sqe(ln=8) + ids(1, -1),
    'text-invalid-utf8': sqe(kind=0, ln=4) + b'\xff\xfe\xc3\x28',
    'text-nul-bytes': sqe(kind=0, ln=4) + b'a\0b\0',
    'unknown-opcode': sqe(op=200),
    'nop': sqe(op=0),
    'max-tokens-zero': sqe(ln=4, max_tokens=0) + ids(1),
    'max-tokens-negative': sqe(ln=4, max_tokens=-5) + ids(1),
    'max-tokens-huge': sqe(ln=4, max_tokens=0x7fffffff) + ids(1),
    'n-stop-too-many': sqe(ln=4, n_stop=100) + ids(1),
    'temperature-nan': sqe(ln=4, temp=NAN) + ids(1),
    'temperature-negative': sqe(ln=4, temp=-1.0) + ids(1),
    'temperature-inf': sqe(ln=4, temp=INF) + ids(1),
    'top-p-zero': sqe(ln=4, top_p=0.0) + ids(1),
    'top-p-big': sqe(ln=4, top_p=5.0) + ids(1),
    'top-k-negative': sqe(ln=4, top_k=-3, temp=1.0) + ids(1),
    'flags-set': sqe(flags=0xff, ln=4) + ids(1),
    'prompt-kind-bad': sqe(kind=7, ln=4) + ids(1),
    'cancel-unknown': sqe(op=2, rid=123456),
    'cancel-huge-id': sqe(op=2, rid=0xffffffffffffffff),
    'prompt-longer-than-context': sqe(ln=4 * 600) + ids(*([5] * 600)),
    'short-input': b'\x01\x00',
}
for name, data in cases.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
print('wrote', len(cases), 'inputs to', out)
