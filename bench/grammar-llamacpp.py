#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python) generating under a JSON Schema, as bench/grammar.sh
runs allm-run: the same GGUF file, chat prompt, schema and sampling (temperature,
seed), its own converter (LlamaGrammar.from_json_schema) and grammar sampler. Then
the same number of tokens without a grammar (EOS banned). Decode speed is the wall
time after the first token (the grammar's work is in the sampler, so the library's
own eval timers would leave it out); CPU seconds of the process beside it. Prints:
  llamacpp-grammar: N tokens, decode X tok/s, cpu C s | free: N tokens, decode Y tok/s, cpu C s | valid V

usage: grammar-llamacpp.py FILE.gguf SCHEMA.json THREADS SEED TEMPERATURE
"""
import json
import sys
import time

import llama_cpp

PROMPT = "<|im_start|>user\nDescribe a fictional person as JSON.<|im_end|>\n<|im_start|>assistant\n"


def gen(llm, max_tokens, seed, temp, grammar=None, ban_eos=False):
    llm.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    first = None
    text, n = "", 0
    kw = {"logit_bias": {llm.token_eos(): -1e9}} if ban_eos else {}
    for chunk in llm.create_completion(PROMPT, max_tokens=max_tokens, temperature=temp, seed=seed, top_k=0,
                                       top_p=1.0, min_p=0.0, repeat_penalty=1.0, grammar=grammar, stream=True, **kw):
        if first is None:
            first = time.perf_counter()
        text += chunk["choices"][0]["text"]
        n += 1
    t1, c1 = time.perf_counter(), time.process_time()
    return text, n, (n - 1) / (t1 - first) if n > 1 else 0.0, c1 - c0


def main():
    path, schema, threads, seed, temp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    llm = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=1024, verbose=False,
                          seed=seed)
    g = llama_cpp.LlamaGrammar.from_json_schema(open(schema).read(), verbose=False)
    gen(llm, 2, seed, temp)  # warm-up
    text, n, tps, cpu = gen(llm, 400, seed, temp, grammar=g)
    try:
        json.loads(text)
        valid = "json"
    except ValueError:
        valid = "not-json"
    _, n2, tps2, cpu2 = gen(llm, n, seed, temp, ban_eos=True)
    print("llamacpp-grammar: %d tokens, decode %.1f tok/s, cpu %.2f s | free: %d tokens, decode %.1f tok/s, cpu %.2f s"
          " | valid %s" % (n, tps, cpu, n2, tps2, cpu2, valid))


if __name__ == "__main__":
    main()
