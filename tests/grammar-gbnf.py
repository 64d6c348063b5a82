#!/usr/bin/env python3
"""Description: llama.cpp's example GBNF grammars (tests/data/grammars) constrain
stories260K at temperature 1 (tests/grammar-run); every output that ended parses with
lark (PyPI, pinned), an independent parser, after this script translates the grammar
into lark's syntax by its own reading of GBNF.

usage: grammar-gbnf.py GRAMMAR_RUN MODEL GRAMMAR_DIR SEEDS"""
import json
import os
import re
import subprocess
import sys
import tempfile

import lark

TOKEN = re.compile(r'''
    (?P<ws>[ \t]+) | (?P<comment>\#[^\n]*) | (?P<nl>\r?\n) |
    (?P<define>::=) | (?P<name>[A-Za-z0-9_-]+) |
    (?P<lit>"(?:\\.|[^"\\])*") | (?P<cls>\[(?:\\.|[^\]\\])*\]) |
    (?P<rep>\{\s*\d*\s*(?:,\s*\d*\s*)?\}) | (?P<op>[()|*+?.])
''', re.X | re.S)


def unescape(body):
    """A GBNF literal's or class's escapes as characters (classes keep their '-'
    and '^' meaning: only the escapes change)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        n = {"x": 2, "u": 4, "U": 8}.get(e)
        if n:
            out.append(chr(int(body[i + 2:i + 2 + n], 16)))
            i += 2 + n
        else:
            out.append({"n": "\n", "r": "\r", "t": "\t"}.get(e, e))
            i += 2
    return out


def lark_class(body):
    neg = body.startswith("^")
    chars = unescape(body[1:] if neg else body)
    # each character escaped for a Python regex class, ranges kept
    def one(c):
        # lark turns \U escapes into the characters themselves: a class's own
        # metacharacters (and the regex delimiter) keep a backslash instead
        return "\\" + c if c in "\\]^-[/" else "\\U%08x" % ord(c)

    parts, i = [], 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            parts.append("%s-%s" % (one(chars[i]), one(chars[i + 2])))
            i += 3
        else:
            parts.append(one(chars[i]))
            i += 1
    return "/[%s%s]/" % ("^" if neg else "", "".join(parts))


def lark_char(c):
    """One character as a lark regex terminal."""
    if c.isascii() and c.isprintable():
        return "/%s/" % re.escape(c).replace("/", "\\/")
    return "/\\U%08x/" % ord(c)


def lark_name(n):
    return "r_" + n.lower().replace("-", "_")


def to_lark(gbnf):
    toks = [(m.lastgroup, m.group()) for m in TOKEN.finditer(gbnf)]
    assert "".join(t for _, t in toks) == gbnf, "the tokenizer missed part of the grammar"
    toks = [t for t in toks if t[0] not in ("ws", "comment")]
    rules, cur, depth = [], None, 0
    for i, (k, t) in enumerate(toks):
        nxt = [x for x in toks[i + 1:] if x[0] != "nl"]
        if k == "name" and depth == 0 and nxt and nxt[0][0] == "define":
            cur = [t, []]
            rules.append(cur)
            continue
        if k in ("define", "nl"):
            continue
        if k == "op" and t == "(":
            depth += 1
        elif k == "op" and t == ")":
            depth -= 1
        cur[1].append((k, t))
    out = []
    for name, body in rules:
        expr, last, opened = [], None, []
        for k, t in body:
            if k == "lit":
                chars = unescape(t[1:-1])
                item = " ".join(lark_char(c) for c in chars) if chars else ""
                item = "(%s)" % item if item else ""
            elif k == "cls":
                item = lark_class(t[1:-1])
            elif k == "name":
                item = lark_name(t)
            elif k == "op" and t == ".":
                item = "/(?s:.)/"
            elif k == "op" and t in "*+?" and last is not None:
                expr[last] = "(%s)%s" % (expr[last], t)
                continue
            elif k == "rep":
                m = re.match(r"\{\s*(\d*)\s*(,)?\s*(\d*)\s*\}", t)
                lo = int(m.group(1) or 0)
                hi = int(m.group(3)) if m.group(3) else (None if m.group(2) else lo)
                x = expr[last]
                if hi is None:
                    expr[last] = "(%s)*" % x if lo == 0 else "((%s) ~ %d) (%s)*" % (x, lo, x)
                else:
                    expr[last] = "((%s) ~ %d..%d)?" % (x, lo, hi) if lo == 0 else "(%s) ~ %d..%d" % (x, lo, hi)
                continue
            elif t == "(":
                opened.append(len(expr))
                expr.append("(")
                last = None
                continue
            elif t == ")":
                # the group becomes one item, which a following operator repeats
                at = opened.pop()
                expr[at:] = [" ".join(expr[at:]) + " )"]
                last = at
                continue
            else:
                expr.append(t)  # '|'
                last = None
                continue
            expr.append(item)
            last = len(expr) - 1
        body_text = " ".join(expr)
        out.append("%s: %s" % (lark_name(name), body_text if body_text.strip() else "()"))
    return "\n".join(out) + "\n"


def main():
    run, model, gdir, seeds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    names = sorted(f for f in os.listdir(gdir) if f.endswith(".gbnf"))
    jobs = []
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for n in names:
            text = open(os.path.join(gdir, n), encoding="utf-8").read()
            for s in range(seeds):
                jobs.append(n)
                f.write(json.dumps({"kind": "gbnf", "text": text, "seed": s, "max_tokens": 512,
                                    "prompt": "Once upon a time"}) + "\n")
        path = f.name
    out = subprocess.run([run, "--model", model, "--in", path, "--compare"], capture_output=True, text=True)
    if out.returncode:
        print("FAIL: grammar-run exited %d: %s" % (out.returncode, out.stderr[-2000:]))
        return 1
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    parsers, fails, ended = {}, 0, {}
    for n in names:
        src = open(os.path.join(gdir, n), encoding="utf-8").read()
        try:
            parsers[n] = lark.Lark(to_lark(src), start="r_root", parser="earley", lexer="dynamic")
        except Exception as e:  # noqa: BLE001
            print("FAIL: %s: lark cannot take the translation: %s\n%s" % (n, e, to_lark(src)))
            fails += 1
    for o in lines[:-1]:
        n = jobs[o["i"]]
        if o["error"]:
            print("FAIL: %s: %s" % (n, o["error"]))
            fails += 1
            continue
        if not o["same_ids"]:
            print("FAIL: %s: the grammar changed a token it allows" % n)
            fails += 1
        if o["finish"] != "stop" or n not in parsers:
            continue
        ended[n] = ended.get(n, 0) + 1
        try:
            parsers[n].parse(o["text"])
        except Exception as e:  # noqa: BLE001
            print("FAIL: %s: output does not parse: %s\n  %r" % (n, str(e).splitlines()[0], o["text"]))
            fails += 1
    if lines[-1]["empty_masks"]:
        print("FAIL: %d masks left no token" % lines[-1]["empty_masks"])
        fails += 1
    total = sum(ended.values())
    if total < len(jobs) // 3:
        print("FAIL: only %d of %d outputs ended" % (total, len(jobs)))
        fails += 1
    print("%d grammars x %d seeds: %d ended and parse (%s); %d failures" %
          (len(names), seeds, total, ", ".join("%s %d" % (k, v) for k, v in sorted(ended.items())), fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
