#!/usr/bin/env python3
# Description: no range of a request parameter is written twice: outside the table (include/adaptivellm/params.h, common/params.c), no source line that names a parameter (its field or JSON key) compares it with one of its bounds (from the build's request-params.json, the table as data) or states a range in a "must be" message; each consumer asks the table (allm_params_check, allm_param_valid, allm_param_range_text).
"""Usage: params-one-range.py SOURCE_ROOT REQUEST_PARAMS_JSON

A heuristic, aimed at the copies issue 39 counted (the presence penalty's
[-2, 2] checked in five places): a bound equal to the row's "off" value or to 0
is not searched for (comparing with them asks "is it on?", "greedy?"), nor a
bound of INT32_MAX or more (the type's own). Exit 1 with each line found."""
import json
import os
import re
import sys

SKIP = {os.path.join("include", "adaptivellm", "params.h"), os.path.join("common", "params.c")}
# (file, row): a field of the same name that is no request parameter
ALLOW = {
    (os.path.join("engined", "sched", "predictor.c"), "max_tokens"):
        "allm_calib_ops.max_tokens, the longest prefill the calibration times",
}
DIRS = ("clientlib", "common", "engined", "include", "tools", "kernels")
EXTS = (".c", ".h", ".cu", ".py")


def literal(v):
    """A regex for the number v as C or Python writes it (2, 2.0, 2.0f, -2)."""
    if v == int(v):
        return r"%s(?:\.0*)?f?\b" % re.escape(str(int(v)))
    return r"%sf?\b" % re.escape(repr(v))


def bounds(row):
    lo, hi, off = row["lo"], row["hi"], row["off"]
    vals = {lo, hi}
    if row["type"] == "i32":
        vals |= {lo - 1, hi + 1}
    return sorted(v for v in vals if v is not None and v != 0 and v != off and abs(v) < 2**31 - 1)


def main():
    root, table = sys.argv[1], json.load(open(sys.argv[2]))
    checks = []
    for row in table["rows"]:
        names = sorted({row["name"], row["json"]} - {None})
        name_re = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, names)))
        nums = bounds(row)
        cmp_re = re.compile(r"(?:<=?|>=?)\s*\(?\s*(?:%s)" % "|".join(map(literal, nums))) if nums else None
        msg_re = re.compile(r'"[^"]*\b(?:%s)\b[^"]*must be[^"]*[\[(]?-?\d' % "|".join(map(re.escape, names)))
        checks.append((row["name"], name_re, cmp_re, msg_re))
    found = 0
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                if not f.endswith(EXTS) or rel in SKIP:
                    continue
                for n, line in enumerate(open(path, errors="replace"), 1):
                    for name, name_re, cmp_re, msg_re in checks:
                        if (rel, name) in ALLOW or not name_re.search(line):
                            continue
                        if (cmp_re and cmp_re.search(line)) or msg_re.search(line):
                            print("%s:%d: %s's range again: %s" % (rel, n, name, line.strip()))
                            found += 1
    if found:
        print("params-one-range: %d line(s) restate a range the table holds (params.h)" % found)
        return 1
    print("params-one-range: every range is the table's (%d rows)" % len(table["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
