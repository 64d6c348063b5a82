#!/usr/bin/env python3
"""Description: random JSON Schemas (seeded) through the grammar engine at temperature 1:
every output that ended validates against its schema (jsonschema, the oracle), the
mask never left the model without a token, and a grammar and no grammar give the same
ids up to the first token the grammar refuses.

usage: grammar-schemas.py GRAMMAR_RUN MODEL N SEED [PROMPT]"""
import json
import random
import subprocess
import sys
import tempfile

import jsonschema

KEYS = ["name", "id", "title", "age", "tags", "ok", "city", "kind", "x", "note", "level", "items"]


def string_schema(r):
    s = {"type": "string"}
    c = r.random()
    if c < 0.15:
        s["format"] = r.choice(["date", "uuid", "date-time", "time", "ipv4"])
    elif c < 0.3:
        s["pattern"] = r.choice(["^[a-z]{2,6}$", "^[A-Z][a-z]+( [A-Z][a-z]+)?$", "^\\d{3}-\\d{4}$",
                                 "^(yes|no|maybe)$", "^[^\\s]{1,8}$", "^a.?b[\"\\\\]?c$"])
    else:
        s["maxLength"] = r.randint(0, 12)
        if r.random() < 0.3:
            s["minLength"] = r.randint(0, s["maxLength"])
    return s


def leaf(r):
    c = r.random()
    if c < 0.35:
        return string_schema(r)
    if c < 0.5:
        s = {"type": "integer"}
        d = r.random()
        if d < 0.3:
            lo = r.randint(-50, 50)
            s.update(minimum=lo, maximum=lo + r.randint(0, 200))
        elif d < 0.5:
            s["minimum"] = r.choice([0, 1])
        elif d < 0.6:
            s["exclusiveMinimum"] = 0
            s["maximum"] = 9
        return s
    if c < 0.58:
        return {"type": "number"} if r.random() < 0.7 else {"type": "number", "minimum": 0}
    if c < 0.66:
        return {"type": "boolean"}
    if c < 0.7:
        return {"type": "null"}
    if c < 0.8:
        return {"enum": r.sample(["red", "green", 3, None, True, "a\"b", "é", 2.5, [1, 2], {"k": "v"}], r.randint(1, 4))}
    if c < 0.85:
        return {"const": r.choice(["fixed", 42, False, {"a": [1]}])}
    if c < 0.92:
        return {"type": r.sample(["string", "integer", "boolean", "null"], 2), "maxLength": 6}
    return {"anyOf": [{"type": "integer", "minimum": 0}, string_schema(r)]}


def schema(r, depth):
    c = r.random()
    if depth >= 2 or c < 0.35:
        return leaf(r)
    if c < 0.7:
        keys = r.sample(KEYS, r.randint(1, 4))
        s = {"type": "object", "properties": {k: schema(r, depth + 1) for k in keys}}
        s["required"] = [k for k in keys if r.random() < 0.6]
        a = r.random()
        if a < 0.6:
            s["additionalProperties"] = False
        elif a < 0.7:
            s["additionalProperties"] = {"type": "integer", "minimum": 0, "maximum": 9}
        return s
    if c < 0.9:
        s = {"type": "array", "items": schema(r, depth + 1)}
        lo = r.randint(0, 2)
        s["minItems"] = lo
        s["maxItems"] = lo + r.randint(0, 2)
        return s
    return {"type": "array", "prefixItems": [leaf(r), leaf(r)], "items": False}


def top(r, i):
    if i % 10 == 9:
        # recursion through $defs
        return {"$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer", "minimum": 0, "maximum": 9},
            "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
            "required": ["v", "next"], "additionalProperties": False}},
            "$ref": "#/$defs/node"}
    s = schema(r, 0)
    if r.random() < 0.7:
        keys = r.sample(KEYS, r.randint(1, 3))
        s = {"type": "object", "properties": {k: schema(r, 1) for k in keys}, "required": keys,
             "additionalProperties": False, "title": "random %d" % i}
    return s


def main():
    run, model, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    prompt = sys.argv[5] if len(sys.argv) > 5 else "Once upon a time"
    r = random.Random(seed)
    schemas = [top(r, i) for i in range(n)]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for i, s in enumerate(schemas):
            f.write(json.dumps({"kind": "json_schema", "text": json.dumps(s), "seed": seed * 1000 + i,
                                "prompt": prompt, "max_tokens": 400, "temperature": 1.0}) + "\n")
        path = f.name
    out = subprocess.run([run, "--model", model, "--in", path, "--compare"], capture_output=True, text=True)
    if out.returncode:
        print("FAIL: grammar-run exited %d: %s" % (out.returncode, out.stderr[-2000:]))
        return 1
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    summary = lines[-1]
    fails, truncated, stopped, refused_first = 0, 0, 0, 0
    for o in lines[:-1]:
        s = schemas[o["i"]]
        if o["error"]:
            print("FAIL: schema %d: %s\n  %s" % (o["i"], o["error"], json.dumps(s)))
            fails += 1
            continue
        if not o["same_ids"]:
            print("FAIL: schema %d: the grammar changed a token it allows (after %d common ids)" % (o["i"], o["common"]))
            fails += 1
        if o["finish"] != "stop":
            truncated += 1
            continue
        stopped += 1
        try:
            jsonschema.validate(json.loads(o["text"]), s)
        except Exception as e:  # noqa: BLE001 - any failure is the test's
            print("FAIL: schema %d: output does not validate: %s\n  schema: %s\n  output: %r" %
                  (o["i"], str(e).splitlines()[0], json.dumps(s), o["text"]))
            fails += 1
        refused_first += o["common"] < o["n_tokens"]
    if summary["empty_masks"]:
        print("FAIL: %d masks left no token" % summary["empty_masks"])
        fails += 1
    # a length stop cuts a text that was still valid so far; most must end
    if truncated > n // 10:
        print("FAIL: %d of %d outputs hit max_tokens" % (truncated, n))
        fails += 1
    print("%d schemas: %d ended and validate, %d hit max_tokens, %d failures; compile max %.2f ms" %
          (n, stopped, truncated, fails, summary["compile_ms_max"]))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
