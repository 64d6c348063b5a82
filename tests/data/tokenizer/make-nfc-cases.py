#!/usr/bin/env python3
"""Writes nfc-cases.txt beside this file: inputs and their NFC form by Python's
unicodedata (Unicode 14.0 on Python 3.11), for tests/test-tokenizer-nfc.c. Each line:
the input's code points, a tab, the NFC form's, in hex. Usage: python3 make-nfc-cases.py"""
import os
import random
import unicodedata as u

cases = []
for cp in range(0x110000):
    if 0xD800 <= cp < 0xE000:
        continue
    c = chr(cp)
    if u.decomposition(c) and not u.decomposition(c).startswith("<"):
        if not (0xAC00 <= cp <= 0xD7A3) or cp % 97 == 0:
            cases.append(c)                      # a precomposed (or excluded) one
            cases.append(u.normalize("NFD", c))  # and its decomposition
rng = random.Random(46)
marks = [chr(cp) for cp in range(0x300, 0x370)] + ["\u0591", "\u05b0", "\u093c", "\u094d", "\u0e38",
                                                    "\u302a", "\u1dc0", "\u20d0", "\u0345", "\u0f71"]
bases = list("aeiouAEOUnNcCsSzZ") + ["\u03b1", "\u03c9", "\u0415", "\u0438", "\u1100", "\u1161", "\u11a8",
                                   "\uac00", "\u0b47", "\u0b3e", "\u0dd9", "\u0dcf"]
for _ in range(600):  # bases and marks in random orders, including leading marks
    cases.append("".join(rng.choice(bases if rng.random() < 0.4 else marks)
                         for _ in range(rng.randint(1, 8))))
cases += ["", "plain ASCII", "caf\u00e9 cafe\u0301", "\u1e9b\u0323", "Q\u0307\u0323",
          "\u1100\u1161\u11a8 \u1100\u1161", "\u212b \u2126 \u0344", "e\u0301\u0301\u0327"]
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nfc-cases.txt")
with open(out, "w") as f:
    for c in cases:
        f.write(" ".join("%X" % ord(x) for x in c) + "\t" +
                " ".join("%X" % ord(x) for x in u.normalize("NFC", c)) + "\n")
print(f"wrote {out}: {len(cases)} cases")
