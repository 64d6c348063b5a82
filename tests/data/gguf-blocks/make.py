#!/usr/bin/env python3
"""Makes blocks.gguf (beside this file): tensors of random blocks in every GGUF block
format the engine reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, Q5_K), 3 rows of 512
values each, and beside each one ("NAME.ref", F32) what gguf-py's own numpy
dequantization (gguf.quants.dequantize, which follows ggml's dequantize_row_*) gives
for those bytes: a reference for the engine's dequantizer (kernels/qblock.c) that
nobody here wrote. Q5_K came last (a format added later: the others keep their
bytes).
The blocks are random bytes, their f16 scales drawn from [2^-10, 2^-3) (either
sign) so that every value is finite. Made once, by hand:

    python3 -m venv /tmp/g && /tmp/g/bin/pip install gguf==0.19.0  (tools/venv-pins.txt)
    /tmp/g/bin/python tests/data/gguf-blocks/make.py
"""
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

ROWS, COLS = 3, 512
rng = np.random.default_rng(20261127)


def f16s(n, signed=True):
    v = (2.0 ** rng.uniform(-10, -3, n)).astype(np.float16)
    if signed:
        v *= rng.choice(np.array([-1, 1], dtype=np.float16), n)
    return v.view(np.uint8).reshape(n, 2)


# byte offsets of the f16 fields of each block (everything else: random quants)
FORMATS = {
    T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
    T.Q4_K: [0, 2], T.Q6_K: [208], T.Q5_K: [0, 2],
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "blocks.gguf")
w = gguf.GGUFWriter(out, "blocks")
for qt, halves in FORMATS.items():
    block, size = gguf.GGML_QUANT_SIZES[qt]
    n = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for off in halves:
        raw[:, off:off + 2] = f16s(n, signed=qt not in (T.Q4_K, T.Q5_K))
    raw = raw.reshape(ROWS, COLS // block * size)
    ref = gguf.quants.dequantize(raw, qt).astype(np.float32)
    assert ref.shape == (ROWS, COLS) and np.isfinite(ref).all()
    w.add_tensor(qt.name.lower(), raw, raw_dtype=qt)
    w.add_tensor(qt.name.lower() + ".ref", ref)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out, os.path.getsize(out))
