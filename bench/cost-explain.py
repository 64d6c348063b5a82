#!/usr/bin/env python3
"""What explains the cost model's error (issue 53), offline, on recorded decisions.

Reads every decisions-*.jsonl under the folders given (bench/predictors.sh's
RESULTS/predictors/, allm-run --decisions), each measured preemption with its
parts (engined/sched/engine.h, struct allm_decision_parts), and refits the
recompute and swap costs with growing sets of features. Each model is fitted
by weighted least squares (weights 1/y^2: relative error, as the engine's
predictor-lsq does) and scored on runs it was not fitted on (leave one run
out), so a row's MAPE is what that model would have predicted for decisions it
had not seen. Row 0 is the engine's own prediction, as logged.

Usage: bench/cost-explain.py DIR... [--md]   (prints a Markdown table)
"""
import json
import math
import os
import sys


def load(dirs):
    runs = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not (f.startswith("decisions-") and f.endswith(".jsonl")):
                    continue
                key = os.path.join(root, f)
                ds = []
                for line in open(key):
                    try:
                        x = json.loads(line)
                    except ValueError:
                        continue
                    if x.get("kind") == "preempt" and x.get("measured_s") and "parts" in x:
                        ds.append(x)
                if ds:
                    runs[key] = ds
    return runs


def rc_rows(ds):
    out = []
    for x in ds:
        p = x["parts"]
        if x["choice"] != "recompute" or p["steps"] < 1 or p["tokens"] <= 0:
            continue
        other = max(p["step_tokens"] - p["tokens"], 0)
        # raw: the step model's prediction, before the engine scaled it by its
        # recompute decisions' bias (parts.rc_factor; 1 in logs made before it)
        out.append({"y": x["measured_s"], "pred": x["pred_recompute_s"], "t": x["time"],
                    "raw": x["pred_recompute_s"] / (p.get("rc_factor") or 1.0), "tok": p["tokens"] / 1e3,
                    "pairs": p["pairs"] / 1e6, "other": other / 1e3, "others": max(p["step_seqs"] - p["steps"], 0),
                    "steps": p["steps"], "faults": p["faults"] / 1e3,
                    "load": max(p.get("oncpu_before") or 1.0, 0.01),
                    "oncpu": max(x.get("oncpu_frac") or 1.0, 0.01)})
    return out


def sw_rows(ds):
    out = []
    for x in ds:
        p = x["parts"]
        if x["choice"] != "swap" or p["runs"] < 1:
            continue
        out.append({"y": x["measured_s"], "pred": x["pred_swap_s"], "raw": x["pred_swap_s"], "t": x["time"],
                    "blocks": x["blocks"] / 1e2,
                    "tok": x["tokens"] / 1e3, "pairs": x["tokens"] ** 2 / 2e6,
                    "runs": p["runs"], "faults": p["faults"] / 1e3,
                    "load": max(p.get("oncpu_before") or 1.0, 0.01),
                    "oncpu": max(x.get("oncpu_frac") or 1.0, 0.01)})
    return out


def solve(A, b):
    """Gaussian elimination with partial pivoting; None if singular."""
    n = len(b)
    M = [row[:] + [b[i]] for i, row in enumerate(A)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(M[i][c]))
        if abs(M[p][c]) < 1e-300:
            return None
        M[c], M[p] = M[p], M[c]
        for i in range(c + 1, n):
            f = M[i][c] / M[c][c]
            for j in range(c, n + 1):
                M[i][j] -= f * M[c][j]
    x = [0.0] * n
    for i in range(n - 1, -1, -1):
        x[i] = (M[i][n] - sum(M[i][j] * x[j] for j in range(i + 1, n))) / M[i][i]
    return x


def fit(rows, feats, div):
    """Weighted least squares of y * div (div: an on-CPU share, so y * div is
    CPU-seconds of work) on the features, weights 1/(y div)^2 (relative
    error); a relative ridge keeps unexcited features stable."""
    k = len(feats)
    A = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for r in rows:
        x = [1.0 if f == "1" else r[f] for f in feats]
        y = r["y"] * (r[div] if div else 1.0)
        w = 1.0 / max(y, 1e-9) ** 2
        for i in range(k):
            b[i] += w * x[i] * y
            for j in range(k):
                A[i][j] += w * x[i] * x[j]
    for i in range(k):
        A[i][i] += 1e-9 * A[i][i] + 1e-12
    return solve(A, b)


def predict(c, r, feats, div):
    v = sum(ci * (1.0 if f == "1" else r[f]) for ci, f in zip(c, feats))
    return max(v, 1e-9) / (r[div] if div else 1.0)


def loro(runs, rowf, feats, div, pdiv):
    """Leave one run out: fit y * div on the others, predict / pdiv on it and
    score against y. Returns (MAPE %, n)."""
    errs = []
    keys = list(runs)
    for k in keys:
        test = rowf(runs[k])
        train = [r for o in keys if o != k for r in rowf(runs[o])]
        if not test or len(train) < len(feats) + 2:
            continue
        c = fit(train, feats, div)
        if c is None:
            continue
        errs += [abs(predict(c, r, feats, pdiv) - r["y"]) / r["y"] for r in test]
    return (100 * sum(errs) / len(errs), len(errs)) if errs else (None, 0)


def logged(runs, rowf):
    errs = []
    for ds in runs.values():
        for r in rowf(ds):
            errs.append(abs(r["pred"] - r["y"]) / r["y"])
    return (100 * sum(errs) / len(errs), len(errs)) if errs else (None, 0)


# (name, features, fitted per on-CPU share of, predicted per on-CPU share of):
# "oncpu" is the share the engine thread ran during the measured cost itself
# (known after the fact: how much load explains), "load" the EWMA of earlier
# steps' shares when the decision was taken (what the engine can know)
RC_MODELS = [
    ("refit: 1, tokens, pairs (the engine's features)", ["1", "tok", "pairs"], None, None),
    ("+ batch interference (other rows' tokens in those steps)", ["1", "tok", "pairs", "other"], None, None),
    ("+ steps ridden, page faults", ["1", "tok", "pairs", "other", "steps", "faults"], None, None),
    ("1, tokens, pairs, interference: CPU-seconds, / on-CPU share of the step (after the fact)",
     ["1", "tok", "pairs", "other"], "oncpu", "oncpu"),
    ("the same CPU-seconds fit, / on-CPU share of earlier steps (online)",
     ["1", "tok", "pairs", "other"], "oncpu", "load"),
]
SW_MODELS = [
    ("refit: runs, blocks (the engine's features)", ["runs", "blocks"], None, None),
    ("+ page faults", ["runs", "blocks", "faults"], None, None),
    ("runs, blocks: CPU-seconds, / on-CPU share of the copy (after the fact)", ["runs", "blocks"], "oncpu", "oncpu"),
    ("the same, / on-CPU share of earlier steps (online)", ["runs", "blocks"], "oncpu", "load"),
]


def online(runs, rowf, how, alpha=0.3, window=20):
    """Online, in decision order within each run (what the engine could do
    while serving): "bias" scales the logged prediction by the EWMA of
    log(measured / predicted) over the earlier decisions of the same choice;
    "lsq" refits 1, tokens, pairs on the last `window` of them (the logged
    prediction until there are 4). Returns (MAPE %, n)."""
    errs = []
    for ds in runs.values():
        rows = sorted(rowf(ds), key=lambda r: r["t"])
        b, seen = 0.0, []
        for r in rows:
            if how == "bias":
                p = r["raw"] * math.exp(b)
            else:
                feats = ["1", "tok", "pairs"]
                c = fit(seen[-window:], feats, None) if len(seen) >= 4 else None
                p = predict(c, r, feats, None) if c else r["raw"]
            errs.append(abs(p - r["y"]) / r["y"])
            # as predictor.c: each ratio capped at 1.5x either way
            le = max(min(math.log(r["y"] / max(r["raw"], 1e-12)), math.log(1.5)), -math.log(1.5))
            b = (1 - alpha) * b + alpha * le
            seen.append(r)
    return (100 * sum(errs) / len(errs), len(errs)) if errs else (None, 0)


def fmt(v):
    return "-" if v is None else "%.1f" % v


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    runs = load(args)
    if not runs:
        print("cost-explain: no decision logs with parts under %s" % " ".join(args), file=sys.stderr)
        sys.exit(1)
    out = {"runs": len(runs)}
    print("%d runs (leave-one-run-out over them)\n" % len(runs))
    print("| cost | model | MAPE % | decisions |")
    print("|---|---|---|---|")
    for kind, rowf, models in [("recompute", rc_rows, RC_MODELS), ("swap", sw_rows, SW_MODELS)]:
        m, n = logged(runs, rowf)
        out[kind] = [{"model": "logged", "mape": m, "n": n}]
        print("| %s | the engine's prediction, as logged | %s | %d |" % (kind, fmt(m), n))
        for name, feats, div, pdiv in models:
            m, n = loro(runs, rowf, feats, div, pdiv)
            out[kind].append({"model": name, "mape": m, "n": n})
            print("| %s | %s | %s | %d |" % (kind, name, fmt(m), n))
        for how, name in [("bias", "online: the step model x EWMA of the earlier decisions' measured / predicted (the engine now)"),
                          ("lsq", "online: refit on the last 20 decisions' tokens, pairs (logged until 4)")]:
            if kind == "swap" and how == "lsq":
                continue
            m, n = online(runs, rowf, how)
            out[kind].append({"model": name, "mape": m, "n": n})
            print("| %s | %s | %s | %d |" % (kind, name, fmt(m), n))
    if "--json" in sys.argv:
        json.dump(out, sys.stderr, indent=1)


if __name__ == "__main__":
    main()
