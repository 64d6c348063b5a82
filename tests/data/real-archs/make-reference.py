#!/usr/bin/env python3
"""Writes NAME.json, the test data of tests/real-model-archs.sh for the real Gemma 3
270M (gemma3) and Qwen2.5-Coder-0.5B-Instruct (qwen2) GGUF files, from llama.cpp
through llama-cpp-python 0.3.36 on the same file the engine reads. The format is
tests/data/smollm2/reference.json's (test-real-model reads both) without its
tokenizer part: the prompts are given as llama.cpp's ids.

Run once, by hand, in a venv with llama-cpp-python 0.3.36 and numpy:

    /work/ref/venv/bin/python tests/data/real-archs/make-reference.py \
        .models-cache/gemma-3-270m-q4_k_m.gguf tests/data/real-archs/gemma3.json
    /work/ref/venv/bin/python tests/data/real-archs/make-reference.py \
        .models-cache/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf tests/data/real-archs/qwen2.json

What it records:
  greedy  for each prompt, its ids (llama.cpp's tokenizer, BOS as the file asks,
          special tokens of the chat template as tokens) and up to N_GEN greedy ids
          (argmax of llama.cpp's logits, one token at a time, stopping after an
          end-of-generation id), with the eight largest logits at each step (how close the choice was)
  logits  for a fixed text of about 800 tokens (longer than Gemma 3's 512-token
          window, so its local layers slide): at each position the TOP_K largest
          logits, the log-sum-exp of all and the logit of the next token -- what
          max |delta logit| and perplexity are computed from
"""
import hashlib
import json
import os
import sys

import llama_cpp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import llama_cpp_ref  # noqa: E402  (tests/data/llama_cpp_ref.py)

llama_cpp_ref.plain_cpu_path()

N_GEN = 16
TOP_K = 16

CHAT = {
    "gemma3": "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n",
    "qwen2": ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
              "assistant.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"),
}

PLAIN = [
    "Once upon a time",
    "def fibonacci(n):\n",
    "The three primary colors are",
]
QUESTIONS = ["What is the capital of France?", "Write a Python function that reverses a string."]

PARAGRAPHS = [
    "The lighthouse stood at the end of a long stone pier, and for most of the year it was "
    "the only building anyone on the island could see from the harbour. Its keeper, an old "
    "man who had once been a carpenter, climbed the spiral stairs twice a day: once at dusk "
    "to light the lamp, and once at dawn to put it out and wipe the salt from the glass.",
    "Bread is one of the oldest prepared foods. Early loaves were flat, made from ground "
    "grains mixed with water and baked on hot stones. Leavened bread appeared when people "
    "noticed that dough left out for a while would rise, because wild yeasts from the air "
    "had begun to ferment the sugars in the flour, releasing bubbles of carbon dioxide.",
    "A binary search finds an item in a sorted list by repeatedly halving the part of the "
    "list that could still contain it. It compares the target with the middle element; if "
    "they are equal the search ends, if the target is smaller the search continues in the "
    "lower half, and otherwise in the upper half. Each step discards half of what remains, "
    "so a list of a million items needs at most about twenty comparisons.",
    "Rivers shape the land they cross. Over thousands of years, moving water carries sand "
    "and gravel downstream, cutting valleys in soft rock and leaving wide plains where the "
    "current slows. Where a river meets the sea it often drops its load of sediment, "
    "building a delta of channels and islands that shifts with every flood.",
    "The committee met on a rainy Tuesday to discuss the new library. Some members wanted a "
    "large reading room with tall windows; others argued that the money would be better "
    "spent on computers, longer opening hours and a van that could bring books to the "
    "villages in the hills. After three hours they agreed to ask the town what it wanted.",
    "Photosynthesis converts light into chemical energy. In the leaves of a plant, "
    "chlorophyll absorbs mostly red and blue light, and the energy drives reactions that "
    "split water, release oxygen and build sugars from carbon dioxide. The sugars feed the "
    "plant and, through the food chain, nearly every animal on land.",
    "When the train finally left the station, Maria opened the letter her grandmother had "
    "given her. It was short: a recipe for plum cake, the address of a cousin in the city, "
    "and a note that said she should write every Sunday, even if there was nothing to say.",
    "Good software is usually written twice. The first version shows what the problem "
    "really is; the second solves it. Teams that expect this plan for it, keeping the first "
    "version small and throwing it away without regret once it has taught them what they "
    "needed to know.",
    "In winter the lake froze so thick that trucks could drive across it. Fishermen cut "
    "round holes in the ice and sat beside them on wooden boxes, waiting in the silence for "
    "a tug on the line, while children skated in wide circles near the shore and dogs "
    "chased each other through the snow.",
    "The museum's newest exhibit explains how clocks developed, from water clocks and "
    "candles marked with hours to pendulums, balance springs and the quartz crystals inside "
    "modern watches. Visitors can open a cabinet, wind an old mechanism and watch the gears "
    "turn one tooth at a time.",
]
LOGITS_TEXT = " ".join(PARAGRAPHS)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make-reference.py FILE.gguf OUT.json")
    path, out = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_batch=512, n_threads=2,
                          logits_all=True, verbose=False, seed=0)
    arch = llm.metadata["general.architecture"]
    n_vocab = llm.n_vocab()
    eog = {i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(llm._model.vocab, i)}

    def tok(text):
        return llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    ref = {
        "generator": {
            "implementation": "llama.cpp via llama-cpp-python",
            "llama_cpp_python": llama_cpp.__version__,
            "gguf_sha256": sha,
            "architecture": arch,
            "n_threads": 2,
            "kv_cache": "f16 (llama.cpp's default)",
            "end_of_generation_ids": sorted(eog),
        },
        "greedy": [],
    }
    for p in [CHAT[arch].format(q) for q in QUESTIONS] + PLAIN:
        ids = tok(p)
        gen, tops = llama_cpp_ref.greedy(llm, ids, N_GEN, eog, 8)
        ref["greedy"].append({"prompt": p, "prompt_ids": ids, "generated": gen, "top": tops,
                              "text": llm.detokenize(gen).decode("utf-8", "replace")})

    ids = tok(LOGITS_TEXT)
    positions, ppl = llama_cpp_ref.text_logits(llm, ids, TOP_K, digits=4)
    ref["logits"] = {"text": LOGITS_TEXT, "ids": ids, "positions": positions, "perplexity": ppl}
    with open(out, "w") as f:
        json.dump(ref, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"wrote {out}: {arch}, {len(ref['greedy'])} greedy prompts, {len(positions)} logit "
          f"positions, perplexity {ref['logits']['perplexity']:.3f}")


if __name__ == "__main__":
    main()
