#!/usr/bin/env python3
"""llama.cpp's prefill and decode speed on a GGUF file, measured as `allm-run --bench`
measures ours, for bench/real-model.sh: the same 128-token prompt (token i is
i * 2654435761 mod vocab), a warm-up, then the prompt in one batch (prefill) and
128 greedy tokens one at a time (decode, EOS ignored). Runs in a venv with
llama-cpp-python (not a dependency of the project; see bench/README.md).
Usage: real-model-llama-cpp.py FILE.gguf [THREADS]   -> one line, like allm-run's"""
import sys
import time

import llama_cpp
import llama_cpp.llama
import numpy as np

# llama.cpp's extra CPU buffer types (AMX tiles, repacked weights) crash on this
# machine's Xeon (SIGSEGV in ggml_backend_amx_mul_mat, llama-cpp-python 0.3.36): load
# the model with use_extra_bufts = false, ggml's ordinary CPU path (its Q4_1 x Q8_1
# dot products), which llama-cpp-python's constructor does not expose.
_default_params = llama_cpp.llama.llama_cpp.llama_model_default_params


def _params_without_extra_bufts():
    p = _default_params()
    p.use_extra_bufts = False
    return p


llama_cpp.llama.llama_cpp.llama_model_default_params = _params_without_extra_bufts

path, threads = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
N_PROMPT, N_DECODE = 128, 128
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=threads,
                      n_threads_batch=threads, logits_all=False, verbose=False)
V = llm.n_vocab()
prompt = [(i * 2654435761) % (2 ** 32) % V for i in range(N_PROMPT)]


def run(n_decode):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    t1 = time.perf_counter()
    for _ in range(n_decode - 1):
        llm.eval([t])
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    return t1 - t0, time.perf_counter() - t1


run(2)  # warm-up
pre, dec = run(N_DECODE)
print(f"llama.cpp: prefill {N_PROMPT} tokens in {pre * 1e3:.2f} ms = {N_PROMPT / pre:.1f} tok/s | "
      f"decode {N_DECODE - 1} tokens in {dec * 1e3:.2f} ms = {(N_DECODE - 1) / dec:.1f} tok/s | "
      f"llama-cpp-python {llama_cpp.__version__}, {threads} threads")
