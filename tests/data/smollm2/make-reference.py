#!/usr/bin/env python3
"""Writes reference.json, the test data of the real-model tests (tests/real-model.sh),
from an implementation nobody here wrote: llama.cpp through llama-cpp-python, on the
same GGUF file the engine reads (SmolLM2-135M-Instruct.Q4_1.gguf, tools/models.sh).

Run ONCE, by hand, in a scratch venv outside the repository (llama-cpp-python builds
llama.cpp from source: about 40 minutes on 2 cores); the output is committed:

    python3 -m venv /tmp/ref-venv
    /tmp/ref-venv/bin/pip install llama-cpp-python==0.3.36 numpy
    /tmp/ref-venv/bin/python tests/data/smollm2/make-reference.py \\
        .models-cache/SmolLM2-135M-Instruct.Q4_1.gguf tests/data/smollm2/reference.json

What it records (README.md beside this file says how the tests use it):
  tokenizer  the ids llama.cpp's tokenizer gives each of TEXTS (no BOS: the file's
             add_bos_token is false; special=True: <|im_start|> and friends in the text
             are their tokens, as the engine and Hugging Face treat added tokens)
  greedy     for each prompt, its ids and up to N_GEN greedy ids (argmax of llama.cpp's
             logits, one token at a time, stopping after an end-of-generation id), and
             at each step the three largest logits (how close the choice was)
  logits     for a fixed text: at each position the TOP_K largest logits, the
             log-sum-exp of all of them and the logit of the text's next token -- what
             max |delta logit| and perplexity are computed from
"""
import hashlib
import json
import os
import sys

import llama_cpp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import llama_cpp_ref  # noqa: E402  (tests/data/llama_cpp_ref.py)

# ggml's ordinary CPU path (its Q4_1 x Q8_1 dot products): the extra buffer types
# crash on this machine's Xeon (llama_cpp_ref.plain_cpu_path)
llama_cpp_ref.plain_cpu_path()

N_GEN = 16
TOP_K = 16
CHAT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(user):
    """SmolLM2's chat template (tokenizer.chat_template) for one user turn."""
    return (f"<|im_start|>system\n{CHAT_SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


PROMPTS = [
    chatml("What is the capital of France?"),
    chatml("Write one sentence about the sea."),
    "Once upon a time",
    "def fibonacci(n):\n",
    "The three primary colors are",
]

LOGITS_TEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889. Locally nicknamed \"La dame de fer\" (French for \"Iron Lady\"), it was "
    "constructed as the centrepiece of the 1889 World's Fair, and to crown the centennial "
    "anniversary of the French Revolution."
)

# 100+ strings: accents, CJK, emoji, whitespace runs, digits, code, special tokens
TEXTS = [
    "Hello world", "hello World!", " leading space", "trailing space ", "two  spaces",
    "three   spaces here", "tab\tseparated\tvalues", "line one\nline two", "para\n\npara",
    "crlf\r\nline", "\n\n\n", "   ", "\t\t", "", "a", "A", "I", "?", "!!!", "...",
    "12345", "3.14159", "1,000,000", "2024-01-02", "10:45 pm", "v1.2.3-beta", "0x1F 0b1010 0o17",
    "phone +1 (555) 123-4567", "98.6°F = 37°C", "½ ¾ ² ³", "Ⅻ Ⅳ", "٣٤٥ ४५६ ३",
    "café", "naïve résumé", "Ünïcödé", "Straße", "façade", "crème brûlée", "Ångström",
    "Ελληνικά", "русский язык", "українська", "עברית", "العربية", "हिन्दी", "ไทย",
    "日本語", "東京タワー", "中文字符", "你好，世界！", "한국어", "ㄱㄴㄷ",
    "🎉", "🚀🚀🚀", "👩‍👩‍👧", "🇫🇷 flag", "emoji 😀 in text", "♥ ★ ☂", "→ ← ↑ ↓",
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; i++) { a[i] = b[i]; }",
    "#include <stdio.h>\nint main(void) { return 0; }", "SELECT * FROM users WHERE id = 42;",
    "<html><body class=\"x\">hi</body></html>", "{\"key\": [1, 2, 3], \"ok\": true}",
    "x = y + z * (a - b) / c", "if (a && b || !c) {}", "https://example.com/path?q=1&r=2",
    "user@example.com", "C:\\Users\\name\\file.txt", "/usr/local/bin/python3",
    "I'm", "can't", "won't", "they're", "we've", "you'll", "he'd", "IT'S", "O'Brien",
    "ALL CAPS TEXT", "MiXeD cAsE", "camelCaseWord", "snake_case_word", "kebab-case-word",
    "$100", "50%", "@user", "#hashtag", "a+b=c", "¿Qué?", "¡Sí!", "«guillemets»",
    "em—dash", "ellipsis…", "“smart quotes”", "‘single’",
    "non\u00a0breaking", "thin\u2009space", "ideographic\u3000space", "zero\u200bwidth",
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, there was a little girl named Lily.",
    "What is the capital of France?",
    "<|im_start|>user\nHi<|im_end|>\n", "<|endoftext|>", "text<|im_end|>more",
    "<|im_start|>assistant\n", "a<|im_start|>b", "<|im_start|> spaced",
    "word " * 20, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1234567890" * 3,
    "    def indented(self):\n        pass\n", "mixed\t \t whitespace\n \n",
    "end of text.",
]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: make-reference.py FILE.gguf OUT.json [ALL-LOGITS.npy]")
    path, out = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=2,
                          logits_all=True, verbose=False, seed=0)
    n_vocab = llm.n_vocab()
    eog = {i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(llm._model.vocab, i)}

    def tok(text):
        return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    ref = {
        "generator": {
            "implementation": "llama.cpp via llama-cpp-python",
            "llama_cpp_python": llama_cpp.__version__,
            "gguf_sha256": sha,
            "n_threads": 2,
            "end_of_generation_ids": sorted(eog),
        },
        "tokenizer": [{"text": t, "ids": tok(t)} for t in TEXTS],
        "greedy": [],
    }
    for p in PROMPTS:
        ids = tok(p)
        gen, tops = llama_cpp_ref.greedy(llm, ids, N_GEN, eog, 3)
        ref["greedy"].append({"prompt": p, "prompt_ids": ids, "generated": gen, "top": tops,
                              "text": llm.detokenize(gen).decode("utf-8", "replace")})

    ids = tok(LOGITS_TEXT)
    positions, ppl = llama_cpp_ref.text_logits(llm, ids, TOP_K)
    if len(sys.argv) > 3:  # every logit too, for a whole-vocabulary comparison (not kept)
        np.save(sys.argv[3], np.asarray(llm.scores[:len(ids)], dtype=np.float32))
    ref["logits"] = {"text": LOGITS_TEXT, "ids": ids, "positions": positions, "perplexity": ppl}
    with open(out, "w") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {out}: {len(TEXTS)} tokenizer cases, {len(PROMPTS)} greedy prompts, "
          f"{len(positions)} logit positions, perplexity {ref['logits']['perplexity']:.3f}")


if __name__ == "__main__":
    main()
