#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) on a GGUF file, measured the way
`allm-run --bench` measures: the same 128-id prompt ((uint32)(i * 2654435761) % vocab), one
warm-up, then a prefill of it and greedy decode of N tokens one at a time. Times are
llama.cpp's own (llama_perf_context: the evaluation inside the library, none of
Python's work around it) where the build records them; else the wall time of each
eval call alone (the argmax between them not counted). Prints one line:
  llamacpp: prefill P tokens in MS ms = X tok/s | decode D tokens in MS ms = Y tok/s | ids ...

usage: llamacpp-bench.py FILE.gguf THREADS N_DECODE
"""
import sys
import time

import llama_cpp
import numpy as np


def main():
    path, threads, n_decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    llm = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=512,
                          n_batch=512, n_ubatch=512, verbose=False)
    vocab = llm.n_vocab()
    prompt = [((i * 2654435761) & 0xffffffff) % vocab for i in range(128)]  # allm-run: uint32

    def run(n):
        llm.reset()
        llama_cpp.llama_perf_context_reset(llm.ctx)
        t0 = time.perf_counter()
        llm.eval(prompt)
        wall_p, wall_d = time.perf_counter() - t0, 0.0
        ids = []
        for _ in range(n):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(vocab,))
            tok = int(np.argmax(logits))
            ids.append(tok)
            t0 = time.perf_counter()
            llm.eval([tok])
            wall_d += time.perf_counter() - t0
        p = llama_cpp.llama_perf_context(llm.ctx)
        if p.t_p_eval_ms > 0 and p.t_eval_ms > 0:
            return ids, p.t_p_eval_ms, p.t_eval_ms, "llama_perf"
        return ids, 1e3 * wall_p, 1e3 * wall_d, "wall"

    run(2)  # warm-up, as allm-run --bench does
    ids, tp, td, how = run(n_decode)
    print(f"llamacpp: prefill {len(prompt)} tokens in {tp:.2f} ms = {1e3 * len(prompt) / tp:.1f} tok/s | "
          f"decode {n_decode} tokens in {td:.2f} ms = {1e3 * n_decode / td:.1f} tok/s | {how} | "
          f"ids {','.join(map(str, ids))}")


if __name__ == "__main__":
    main()
