"""What the reference scripts under tests/data share (make-reference.py of smollm2 and
real-archs, archs/make-models.py): llama.cpp through llama-cpp-python on ggml's plain
CPU path, greedy generation one token at a time, and a fixed text's logits. Imported
by path (the scripts put this folder on sys.path); not a test."""
import math

import llama_cpp
import llama_cpp.llama
import numpy as np


def plain_cpu_path():
    """llama.cpp's extra CPU buffer types (AMX tiles, repacked weights) crash on some
    machines (SIGSEGV in ggml_backend_amx_mul_mat, llama-cpp-python 0.3.36) and are
    not what we compare against: models load with use_extra_bufts = false, ggml's
    ordinary CPU path, which llama-cpp-python's constructor does not expose."""
    default = llama_cpp.llama.llama_cpp.llama_model_default_params

    def without_extra_bufts():
        p = default()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama.llama_cpp.llama_model_default_params = without_extra_bufts


def greedy(llm, ids, n_gen, eog, n_top):
    """Up to n_gen greedy ids after ids (argmax of llama.cpp's logits, one token at a
    time, stopping after an end-of-generation id) and at each step the n_top largest
    logits as [id, logit] pairs."""
    llm.reset()
    llm.eval(ids)
    gen, tops = [], []
    while len(gen) < n_gen:
        row = llm.scores[llm.n_tokens - 1]
        t = int(np.argmax(row))
        gen.append(t)
        tops.append([[int(k), float(row[k])] for k in np.argsort(-row)[:n_top]])
        if t in eog:
            break
        llm.eval([t])
    return gen, tops


def text_logits(llm, ids, top_k, digits=None):
    """At every position of ids but the last: the top_k largest logits (rounded to
    digits if given), the log-sum-exp of all and the logit of the next token; and
    the perplexity they give."""
    llm.reset()
    llm.eval(ids)
    positions, nll = [], 0.0
    for i in range(len(ids) - 1):
        row = np.asarray(llm.scores[i], dtype=np.float64)
        top = np.argsort(-row)[:top_k]
        m = row.max()
        lse = float(m + math.log(np.exp(row - m).sum()))
        nll -= row[ids[i + 1]] - lse
        r = (lambda x: round(x, digits)) if digits else (lambda x: x)
        positions.append({"top": [[int(t), r(float(row[t]))] for t in top], "logsumexp": lse,
                          "next_logit": float(row[ids[i + 1]])})
    return positions, math.exp(nll / (len(ids) - 1))
