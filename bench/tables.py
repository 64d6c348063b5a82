#!/usr/bin/env python3
"""Turns the JSON the bench/ scripts wrote into markdown tables (stdout), one
combined JSON per figure and the .dat files the gnuplot scripts draw.

  tables.py paper RESULTS WORKLOAD... -- OUTPUT...      paper-table/*.json
  tables.py turnaround RESULTS WORKLOAD... -- SEQS...   turnaround/*.json
  tables.py predictors RESULTS                          predictors/decisions-*.jsonl
"""
import json
import os
import sys

POLICIES = ["adaptive", "recompute", "swap"]


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def kinds(run):
    """Preemptions by kind from the engine's status; the FINAL events' total when the
    engine had no control plane to ask."""
    p = run["preemptions"]
    if p.get("swap") is None:
        return "-", "-", p.get("total", 0)
    return p["swap"], p["recompute"], p["swap"] + p["recompute"]


def split_args(args):
    i = args.index("--")
    return args[:i], args[i + 1:]


def paper(res, args):
    workloads, outputs = split_args(args)
    combined = {"workloads": {}}
    rows = []
    dat = []
    for wl in workloads:
        combined["workloads"][wl] = {}
        dat.append("# %s: max_output adaptive recompute swap (tok/s)" % wl)
        for out in outputs:
            d = json.load(open(os.path.join(res, "paper-table", "%s-%s.json" % (wl, out))))
            runs = {r["setting"]["preempt"]: r for r in d["runs"]}
            combined["workloads"][wl][out] = d["runs"]
            same = len({r["outputs_sha256"] for r in d["runs"]}) == 1
            dat.append("%s %s" % (out, " ".join("%.2f" % runs[p]["throughput_tok_s"] for p in POLICIES)))
            for p in POLICIES:
                r = runs[p]
                sw, rc, tot = kinds(r)
                m = r["predictor_mape"]
                rows.append("| %s | %s | %s | %.0f | %.0f | %.2fx | %.2fx | %s | %s | %s | %.3f | %s | %s | %s |" % (
                    wl, out, p, r["throughput_tok_s"], r["gen_throughput_tok_s"],
                    r["throughput_tok_s"] / runs["recompute"]["throughput_tok_s"],
                    r["throughput_tok_s"] / runs["swap"]["throughput_tok_s"],
                    sw, rc, tot, r["mean_weighted_turnaround"], fmt(m["swap"]), fmt(m["recompute"]),
                    "yes" if same else "NO"))
        dat.append("\n")
    json.dump(combined, open(os.path.join(res, "paper-table.json"), "w"), indent=1)
    open(os.path.join(res, "fig3-throughput.dat"), "w").write("\n".join(dat) + "\n")
    print("| workload | max output | policy | tok/s | gen tok/s | vs recompute | vs swap | swaps | "
          "recomputes | preemptions | mean weighted turnaround | MAPE swap % | MAPE recompute % | same outputs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def turnaround(res, args):
    workloads, seqs = split_args(args)
    combined = {"workloads": {}}
    rows = []
    dat = []
    for wl in workloads:
        combined["workloads"][wl] = {}
        dat.append("# %s: max_num_seqs fair_wt fcfs_wt fair_tok_s fcfs_tok_s" % wl)
        for s in seqs:
            d = json.load(open(os.path.join(res, "turnaround", "%s-%s.json" % (wl, s))))
            runs = {r["setting"]["sched"]: r for r in d["runs"]}
            combined["workloads"][wl][s] = d["runs"]
            fa, fc = runs["fair"], runs["fcfs"]
            dat.append("%s %.4f %.4f %.2f %.2f" % (s, fa["mean_weighted_turnaround"], fc["mean_weighted_turnaround"],
                                                   fa["throughput_tok_s"], fc["throughput_tok_s"]))
            rows.append("| %s | %s | %.3f | %.3f | %+.1f %% | %.0f | %.0f | %.0f | %.0f | %s | %s |" % (
                wl, s, fa["mean_weighted_turnaround"], fc["mean_weighted_turnaround"],
                100 * (fa["mean_weighted_turnaround"] / fc["mean_weighted_turnaround"] - 1),
                fa["throughput_tok_s"], fc["throughput_tok_s"], fa["e2e_ms"]["mean"], fc["e2e_ms"]["mean"],
                kinds(fa)[2], kinds(fc)[2]))
        dat.append("\n")
    json.dump(combined, open(os.path.join(res, "turnaround.json"), "w"), indent=1)
    open(os.path.join(res, "fig4-turnaround.dat"), "w").write("\n".join(dat) + "\n")
    print("| workload | max_num_seqs | mean WT fair | mean WT fcfs | fair vs fcfs | tok/s fair | tok/s fcfs | "
          "mean e2e ms fair | mean e2e ms fcfs | preemptions fair | preemptions fcfs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def load_decisions(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def predictors(res, args):
    out = {}
    rows = []
    for kind in ["swap", "recompute"]:
        ds = [d for d in load_decisions(os.path.join(res, "predictors", "decisions-%s.jsonl" % kind))
              if d["choice"] == kind and d.get("measured_s")]
        key = "pred_swap_s" if kind == "swap" else "pred_recompute_s"
        pts = [(d["tokens"], d[key] * 1e3, d["measured_s"] * 1e3) for d in ds]
        with open(os.path.join(res, "fig5-%s.dat" % kind), "w") as f:
            f.write("# tokens predicted_ms measured_ms\n")
            for t, p, m in pts:
                f.write("%d %.6f %.6f\n" % (t, p, m))
        errs = [abs(p - m) / m for _, p, m in pts if m > 0]
        out[kind] = {
            "n": len(pts),
            "mape_percent": 100 * sum(errs) / len(errs) if errs else None,
            "mean_predicted_ms": sum(p for _, p, _ in pts) / len(pts) if pts else None,
            "mean_measured_ms": sum(m for _, _, m in pts) / len(pts) if pts else None,
        }
        o = out[kind]
        rows.append("| %s (under --preempt %s) | %d | %s | %s | %s |" % (
            kind, kind, o["n"], fmt(o["mean_predicted_ms"], "%.3f"), fmt(o["mean_measured_ms"], "%.3f"),
            fmt(o["mape_percent"], "%.1f")))
    # what the cost model saw when it had the choice
    ad = load_decisions(os.path.join(res, "predictors", "decisions-adaptive.jsonl"))
    chose = {k: sum(1 for d in ad if d["choice"] == k) for k in ["swap", "recompute"]}
    ratio = [d["pred_recompute_s"] / d["pred_swap_s"] for d in ad if d["pred_swap_s"] > 0]
    out["adaptive"] = {
        "decisions": len(ad), "chose": chose,
        "mean_pred_swap_ms": 1e3 * sum(d["pred_swap_s"] for d in ad) / len(ad) if ad else None,
        "mean_pred_recompute_ms": 1e3 * sum(d["pred_recompute_s"] for d in ad) / len(ad) if ad else None,
        "mean_recompute_over_swap": sum(ratio) / len(ratio) if ratio else None,
        "reasons": sorted({d["reason"] for d in ad}),
    }
    json.dump(out, open(os.path.join(res, "predictors.json"), "w"), indent=1)
    print("| predictor | measured decisions | mean predicted ms | mean measured ms | MAPE % |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    a = out["adaptive"]
    print()
    print("Under --preempt adaptive: %d decisions, %d swap / %d recompute; mean predicted swap %s ms vs "
          "recompute %s ms (recompute/swap %s x); reasons: %s" % (
              a["decisions"], chose["swap"], chose["recompute"], fmt(a["mean_pred_swap_ms"], "%.3f"),
              fmt(a["mean_pred_recompute_ms"], "%.3f"), fmt(a["mean_recompute_over_swap"], "%.1f"),
              "; ".join(a["reasons"])))


if __name__ == "__main__":
    {"paper": paper, "turnaround": turnaround, "predictors": predictors}[sys.argv[1]](sys.argv[2], sys.argv[3:])
