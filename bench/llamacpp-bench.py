#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) on a GGUF file, measured the way
`allm-run --bench` measures: the same 128-id prompt ((i * 2654435761) % vocab), one
warm-up, then a prefill of it and greedy decode of N tokens one at a time. Times are
llama.cpp's own (llama_perf_context: the evaluation inside the library, none of
Python's work around it). Prints one line:
  llamacpp: prefill P tokens in MS ms = X tok/s | decode D tokens in MS ms = Y tok/s | ids ...

usage: llamacpp-bench.py FILE.gguf THREADS N_DECODE
"""
import sys

import llama_cpp
import numpy as np


def main():
    path, threads, n_decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    llm = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=512,
                          n_batch=512, n_ubatch=512, verbose=False)
    vocab = llm.n_vocab()
    prompt = [(i * 2654435761) % vocab for i in range(128)]

    def run(n):
        llm.reset()
        llama_cpp.llama_perf_context_reset(llm.ctx)
        llm.eval(prompt)
        ids = []
        for _ in range(n):
            tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            ids.append(tok)
            llm.eval([tok])
        return ids, llama_cpp.llama_perf_context(llm.ctx)

    run(2)  # warm-up, as allm-run --bench does
    ids, p = run(n_decode)
    print(f"llamacpp: prefill {p.n_p_eval} tokens in {p.t_p_eval_ms:.2f} ms = "
          f"{1e3 * p.n_p_eval / p.t_p_eval_ms:.1f} tok/s | decode {p.n_eval} tokens in {p.t_eval_ms:.2f} ms = "
          f"{1e3 * p.n_eval / p.t_eval_ms:.1f} tok/s | ids {','.join(map(str, ids))}")


if __name__ == "__main__":
    main()
