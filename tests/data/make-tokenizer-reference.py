#!/usr/bin/env python3
"""Writes tokenizer-reference.json for a real model's GGUF file (tests/data/gemma3,
tests/data/qwen2.5-coder): the ids an implementation nobody here wrote -- llama.cpp,
through llama-cpp-python -- gives 100+ strings, read by tests/real-model-tokenizer.sh.

Run by hand, once per file, in a venv outside the repository that holds
llama-cpp-python 0.3.36 (built from its PyPI source) and numpy; the output is committed:

    python3 -m venv /tmp/ref-venv
    /tmp/ref-venv/bin/pip install llama-cpp-python==0.3.36 numpy
    /tmp/ref-venv/bin/python tests/data/make-tokenizer-reference.py \\
        .models-cache/gemma-3-270m-q4_k_m.gguf tests/data/gemma3/tokenizer-reference.json

Only the vocabulary is loaded (vocab_only): no weights, a few seconds.

What it records:
  vocab   n_vocab, the BOS / EOS / EOT ids, every end-of-generation id
          (llama_vocab_is_eog), whether llama.cpp adds BOS / EOS
  cases   for each text: "special" = tokenize(add_bos=False, special=True) (special
          tokens' text becomes them: a chat template's own text), "plain" =
          tokenize(add_bos=False, special=False) (it stays text: message content)
  bos     a few texts with add_bos=True (what the file says to add)
"""
import hashlib
import importlib.util
import json
import os
import sys

import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))


def smollm2_texts():
    """The 110 strings of tests/data/smollm2 (accents, scripts, emoji, whitespace,
    digits, code, ChatML text): one list, imported rather than copied."""
    spec = importlib.util.spec_from_file_location(
        "smollm2_ref", os.path.join(HERE, "smollm2", "make-reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.TEXTS)


# what the newer vocabularies add: their own control tokens inside text, Gemma's
# user-defined runs of newlines and spaces, Qwen's 128-space token, FIM markers,
# long digit and whitespace runs, mixed scripts in one word
MORE = [
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nWrite a haiku.<end_of_turn>\n", "x<end_of_turn>y", "<eos>",
    "<start_of_image>", "<pad><unk><mask>", "<unused0> <unused98>",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "<|endoftext|><|endoftext|>",
    "<|im_end|>\n<|im_start|>system", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<|file_sep|>main.py\n<|repo_name|>x", "<|im_start|>", "<|im_end|><|im_end|>",
    "\n" * 2, "\n" * 5, "\n" * 31, "\n" * 40, " " * 31, " " * 128, " " * 130, "\t" * 9,
    "x" + " " * 64 + "y", "line\n\n\n\nline", " \n \n ", "\r\r\n\n",
    "3141592653589793238462643383279502884197", "00000000", "1 2 3 4 5", "1.0e-10",
    "¹²³₄₅", "١٢٣", "٠.٥",
    "Übergrößenträger", "naïveté’s", "Ελληνικάrussian", "日本語English混在", "한국어123",
    "मैं हिन्दी बोलता हूँ", "தமிழ் மொழி", "ভাষা বাংলা", "Tiếng Việt có dấu",
    "💁🏽‍♀️", "🏳️‍🌈", "1️⃣ 2️⃣", "😀😃😄😁😆😅😂🤣",
    "async fn main() -> Result<(), Box<dyn Error>> {\n\tOk(())\n}\n",
    "\tif x:\n\t\treturn {'a': [1, 2]}\n", "    # comment with  two  spaces\n",
    "template <typename T> T max(T a, T b) { return a > b ? a : b; }",
    "<div>\n  <p>Hello</p>\n</div>", "```python\nprint('hi')\n```",
    "ReLU(x) = max(0, x); σ(x) = 1/(1+e^{-x})", "∀x ∈ ℝ: x² ≥ 0",
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make-tokenizer-reference.py FILE.gguf OUT.json")
    path, out = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    n_vocab = llm.n_vocab()
    texts = smollm2_texts() + MORE
    assert len(set(texts)) == len(texts), "a text twice"

    def tok(text, special, bos=False):
        return llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    ref = {
        "generator": {
            "implementation": "llama.cpp via llama-cpp-python (vocab_only)",
            "llama_cpp_python": llama_cpp.__version__,
            "script": "tests/data/make-tokenizer-reference.py",
        },
        "file": {"name": os.path.basename(path), "sha256": sha},
        "vocab": {
            "n_vocab": n_vocab,
            "bos": llama_cpp.llama_vocab_bos(vocab),
            "eos": llama_cpp.llama_vocab_eos(vocab),
            "eot": llama_cpp.llama_vocab_eot(vocab),
            "eog": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
            "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
            "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        },
        "cases": [{"text": t, "special": tok(t, True), "plain": tok(t, False)} for t in texts],
        "bos": [{"text": t, "ids": tok(t, True, bos=True)}
                for t in ["Hello world", "", "<start_of_turn>user\n", "<|im_start|>user\n"]],
    }
    with open(out, "w", encoding="utf-8") as f:  # one case a line: diffs stay readable
        f.write("{\n")
        for k, v in ref.items():
            if isinstance(v, list):
                rows = ",\n".join(json.dumps(x, ensure_ascii=False) for x in v)
                f.write(f'"{k}": [\n{rows}\n]')
            else:
                f.write(f'"{k}": {json.dumps(v, ensure_ascii=False)}')
            f.write(",\n" if k != "bos" else "\n")
        f.write("}\n")
    print(f"wrote {out}: {len(texts)} texts, vocab {n_vocab}, eog {ref['vocab']['eog']}")


if __name__ == "__main__":
    main()
