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


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def mape_of(pts):
    errs = [abs(p - m) / m for _, p, m in pts if m > 0]
    return 100 * sum(errs) / len(errs) if errs else None


def predictors(res, args):
    """Per policy and repetition (run-POLICY[-rN].json, decisions-*.jsonl): the
    decisions' MAPE of the chosen path, the step and copy models' rolling MAPE, and
    (adaptive with --probe-regret) regret."""
    d = os.path.join(res, "predictors")
    runs = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("run-") and f.endswith(".json"):
            tag = f[4:-5]
            pol, _, rep = tag.partition("-r")
            runs.setdefault(pol, []).append((int(rep or 1), tag))
    out = {"runs": {}}
    dat = {"swap": [], "recompute": []}
    rows = []
    for pol in ["adaptive", "swap", "recompute"]:
        for rep, tag in sorted(runs.get(pol, [])):
            run = json.load(open(os.path.join(d, "run-%s.json" % tag)))
            ds = [x for x in load_decisions(os.path.join(d, "decisions-%s.jsonl" % tag))
                  if x.get("measured_s") and x["kind"] == "preempt"]
            r = {"policy": pol, "rep": rep}
            for kind in ["swap", "recompute"]:
                key = "pred_swap_s" if kind == "swap" else "pred_recompute_s"
                pts = [(x["tokens"], x[key] * 1e3, x["measured_s"] * 1e3) for x in ds if x["choice"] == kind]
                dat[kind] += [(pol, rep, x["tokens"], x[key] * 1e3, x["measured_s"] * 1e3,
                               x.get("oncpu_frac") if x.get("oncpu_frac") is not None else 1.0)
                              for x in ds if x["choice"] == kind]
                r["dec_" + kind] = {"n": len(pts), "mape": mape_of(pts),
                                    "median_ape": median([abs(p - m) / m * 100 for _, p, m in pts if m > 0])}
                # the part other processes took: decisions whose engine thread ran
                # >= 90 % of their time against the rest
                calm = [(x["tokens"], x[key] * 1e3, x["measured_s"] * 1e3) for x in ds
                        if x["choice"] == kind and x.get("oncpu_frac", 0) >= 0.9]
                r["dec_" + kind]["calm_n"] = len(calm)
                r["dec_" + kind]["calm_mape"] = mape_of(calm)
                r["dec_" + kind]["median_oncpu"] = median([x.get("oncpu_frac") for x in ds if x["choice"] == kind])
            pm = run.get("predictor_mape", {})
            r["step_mape"] = {"swap": pm.get("swap"), "recompute": pm.get("recompute")}
            probed = [x for x in ds if x.get("other_measured_s") is not None]
            r["probed"] = len(probed)
            r["regret"] = sum(1 for x in probed if x.get("regret"))
            # the preemption choice alone, on the same admission, order and victims:
            # each probed decision's cost had it swapped and had it recomputed
            both = [x for x in probed if x["choice"] in ("swap", "recompute")]
            cs = sum(x["measured_s"] if x["choice"] == "swap" else x["other_measured_s"] for x in both)
            cr = sum(x["measured_s"] if x["choice"] == "recompute" else x["other_measured_s"] for x in both)
            ca = sum(x["measured_s"] for x in both)
            r["same_decisions"] = {"n": len(both), "adaptive_s": ca, "all_swap_s": cs, "all_recompute_s": cr}
            r["throughput_tok_s"] = run.get("throughput_tok_s")
            r["mean_weighted_turnaround"] = run.get("mean_weighted_turnaround")
            r["preemptions"] = run.get("preemptions")
            out["runs"][tag] = r
            rows.append("| %s | %d | %d / %d | %s (%s) | %s (%s) | %s / %s (%d / %d) | %s | %s | %s | %.1f | %.3f |" % (
                pol, rep, r["dec_swap"]["n"], r["dec_recompute"]["n"],
                fmt(r["dec_swap"]["mape"]), fmt(r["dec_swap"]["median_ape"]),
                fmt(r["dec_recompute"]["mape"]), fmt(r["dec_recompute"]["median_ape"]),
                fmt(r["dec_swap"]["calm_mape"]), fmt(r["dec_recompute"]["calm_mape"]),
                r["dec_swap"]["calm_n"], r["dec_recompute"]["calm_n"],
                fmt(r["step_mape"]["swap"]), fmt(r["step_mape"]["recompute"]),
                "%d / %d (%s %%)" % (r["regret"], r["probed"],
                                     fmt(100.0 * r["regret"] / r["probed"] if r["probed"] else None))
                if r["probed"] else "-",
                r["throughput_tok_s"] or 0, r["mean_weighted_turnaround"] or 0))
    for kind in dat:
        with open(os.path.join(res, "fig5-%s.dat" % kind), "w") as f:
            f.write("# tokens predicted_ms measured_ms oncpu_frac (policy rep), one line a decision\n")
            for pol, rep, t, p, m, oc in dat[kind]:
                f.write("%d %.6f %.6f %.3f # %s %d\n" % (t, p, m, oc, pol, rep))
    # medians over repetitions, per policy
    summ = {}
    for pol in ["adaptive", "swap", "recompute"]:
        rs = [r for r in out["runs"].values() if r["policy"] == pol]
        if not rs:
            continue
        summ[pol] = {
            "reps": len(rs),
            "dec_swap_mape": median([r["dec_swap"]["mape"] for r in rs]),
            "dec_recompute_mape": median([r["dec_recompute"]["mape"] for r in rs]),
            "step_swap_mape": median([r["step_mape"]["swap"] for r in rs]),
            "step_recompute_mape": median([r["step_mape"]["recompute"] for r in rs]),
            "calm_swap_mape": median([r["dec_swap"]["calm_mape"] for r in rs]),
            "calm_recompute_mape": median([r["dec_recompute"]["calm_mape"] for r in rs]),
            "regret": sum(r["regret"] for r in rs), "probed": sum(r["probed"] for r in rs),
        }
    out["summary"] = summ
    json.dump(out, open(os.path.join(res, "predictors.json"), "w"), indent=1)
    print("| policy | rep | measured swap / recompute decisions | decision MAPE swap % (median) "
          "| decision MAPE recompute % (median) | on CPU >= 90 %: MAPE swap / recompute (n) "
          "| step model: copy MAPE % | step model: prefill MAPE % "
          "| regret (of probed) | tok/s | weighted turnaround |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    same = [r for r in out["runs"].values() if r.get("same_decisions", {}).get("n")]
    if same:
        print("The preemption choice alone (adaptive runs, the decisions whose other path was timed: "
              "the same admission, order and victims for all three):")
        print()
        print("| rep | decisions | adaptive's choices ms | all swap ms | all recompute ms | adaptive / best fixed |")
        print("|---|---|---|---|---|---|")
        for r in sorted(same, key=lambda r: r["rep"]):
            x = r["same_decisions"]
            best = min(x["all_swap_s"], x["all_recompute_s"])
            print("| %d | %d | %.3f | %.3f | %.3f | %s |" % (r["rep"], x["n"], 1e3 * x["adaptive_s"],
                  1e3 * x["all_swap_s"], 1e3 * x["all_recompute_s"], fmt(x["adaptive_s"] / best if best > 0 else None, "%.2f")))
        print()
    for pol, s_ in summ.items():
        print("%s, median of %d: decisions swap %s %%, recompute %s %% (on CPU >= 90 %%: %s %%, %s %%); "
              "step models copy %s %%, prefill %s %%%s" % (
            pol, s_["reps"], fmt(s_["dec_swap_mape"]), fmt(s_["dec_recompute_mape"]),
            fmt(s_["calm_swap_mape"]), fmt(s_["calm_recompute_mape"]),
            fmt(s_["step_swap_mape"]), fmt(s_["step_recompute_mape"]),
            "; regret %d of %d probed" % (s_["regret"], s_["probed"]) if s_["probed"] else ""))


if __name__ == "__main__":
    {"paper": paper, "turnaround": turnaround, "predictors": predictors}[sys.argv[1]](sys.argv[2], sys.argv[3:])
