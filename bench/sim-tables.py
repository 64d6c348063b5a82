#!/usr/bin/env python3
"""Tables of the simulated-device scripts (markdown on stdout, JSON and .dat beside).

  sim-tables.py validate RESULTS REPS WORKLOAD... -- SETTING...   sim-validate.sh
  sim-tables.py paper RESULTS_ROOT PROFILE MODEL... -- WORKLOAD... -- OUTPUT...
                                                                 paper-sim.sh
  sim-tables.py overhead RESULTS SEQS...                         sim-overhead.sh
"""
import json
import os
import statistics
import sys

# the paper's headline ranges over its table (AdaptiveLLM, A800, OPT-13B / Llama-13B)
PAPER = {"vs_recompute": (1.09, 1.40), "vs_swap": (1.64, 2.55), "wt_vs_vllm": (-40, -20)}
POLICIES = ["adaptive", "recompute", "swap"]


def load(path):
    return json.load(open(path))


def metrics(d):
    return {
        "throughput_tok_s": d["throughput_tok_s"],
        "mean_weighted_turnaround": d["mean_weighted_turnaround"],
        "ttft_p50_ms": d["ttft_ms"]["p50"], "ttft_p99_ms": d["ttft_ms"]["p99"],
        "tpot_p50_ms": d["tpot_ms"]["p50"], "tpot_p99_ms": d["tpot_ms"]["p99"],
        "swaps": d["preemptions"]["swap"], "recomputes": d["preemptions"]["recompute"],
        "outputs_sha256": d["outputs_sha256"],
    }


def err(sim, real):
    return 100.0 * (sim - real) / real if real else float("nan")


# metric, target |error| %
TARGETS = [("throughput_tok_s", 10), ("mean_weighted_turnaround", 10), ("ttft_p99_ms", 20), ("tpot_p99_ms", 20)]
# how a metric scales when a run gets only a share of its core: times shrink by the
# share, rates grow by its inverse, ratios of times do not move
SCALE = {"throughput_tok_s": -1, "mean_weighted_turnaround": 0, "ttft_p50_ms": 1, "ttft_p99_ms": 1,
         "tpot_p50_ms": 1, "tpot_p99_ms": 1}


def own_core(m, share):
    """A real run's metrics had it had its core to itself: it ran `share` of its wall time."""
    return {k: (v * share ** SCALE[k] if k in SCALE else v) for k, v in m.items()}


def validate(res, args):
    reps = int(args[0])
    i = args.index("--")
    workloads, settings = args[1:i], args[i + 1:]
    rows, out = [], {"rows": []}
    dat = ["# real_tok_s real_own_tok_s sim_tok_s real_ttft99 real_own_ttft99 sim_ttft99 "
           "real_tpot99 real_own_tpot99 sim_tpot99 real_wt sim_wt"]
    misses = {"wall": {m: 0 for m, _ in TARGETS}, "own_core": {m: 0 for m, _ in TARGETS}}
    for wl in workloads:
        for s in settings:
            tag = "%s-%s" % (wl, s.replace("/", "-"))
            real = [metrics(load(os.path.join(res, "runs", "real-%s-%d.json" % (tag, r)))) for r in range(1, reps + 1)]
            times = [load(os.path.join(res, "runs", "real-%s-%d.time" % (tag, r))) for r in range(1, reps + 1)]
            sim = metrics(load(os.path.join(res, "runs", "sim-%s.json" % tag)))
            shares = [(t["user_s"] + t["sys_s"]) / t["wall_s"] for t in times]
            own = [own_core(m, min(1.0, sh)) for m, sh in zip(real, shares)]
            med = {k: statistics.median(r[k] for r in real) for k in real[0] if k != "outputs_sha256"}
            medo = {k: statistics.median(r[k] for r in own) for k in own[0] if k != "outputs_sha256"}
            tps = [r["throughput_tok_s"] for r in real]
            spread = 100.0 * (max(tps) - min(tps)) / med["throughput_tok_s"]
            e = {m: err(sim[m], med[m]) for m, _ in TARGETS}
            eo = {m: err(sim[m], medo[m]) for m, _ in TARGETS}
            for m, lim in TARGETS:
                misses["wall"][m] += abs(e[m]) > lim
                misses["own_core"][m] += abs(eo[m]) > lim
            out["rows"].append({"workload": wl, "setting": s, "real_median": med, "real_own_core_median": medo,
                                "real_runs": real, "real_cpu_share": shares, "sim": sim,
                                "error_percent": e, "error_own_core_percent": eo,
                                "real_throughput_spread_percent": spread})
            dat.append("%.3f %.3f %.3f %.3f %.3f %.3f %.4f %.4f %.4f %.5f %.5f" % (
                med["throughput_tok_s"], medo["throughput_tok_s"], sim["throughput_tok_s"], med["ttft_p99_ms"],
                medo["ttft_p99_ms"], sim["ttft_p99_ms"], med["tpot_p99_ms"], medo["tpot_p99_ms"],
                sim["tpot_p99_ms"], med["mean_weighted_turnaround"], sim["mean_weighted_turnaround"]))

            def mark(d, m, lim):
                return "%+.1f %%%s" % (d[m], "" if abs(d[m]) <= lim else " ✗")
            rows.append("| %s | %s | %.0f (±%.0f %%) | %.0f | %s | %s | %.3f | %.3f | %s | %.1f | %.1f | %s | %s "
                        "| %.2f | %.2f | %s | %s | %.0f/%.0f | %d/%d | %.2f |" % (
                            wl, s, med["throughput_tok_s"], spread / 2, sim["throughput_tok_s"],
                            mark(e, "throughput_tok_s", 10), mark(eo, "throughput_tok_s", 10),
                            med["mean_weighted_turnaround"], sim["mean_weighted_turnaround"],
                            mark(e, "mean_weighted_turnaround", 10), med["ttft_p99_ms"], sim["ttft_p99_ms"],
                            mark(e, "ttft_p99_ms", 20), mark(eo, "ttft_p99_ms", 20), med["tpot_p99_ms"],
                            sim["tpot_p99_ms"], mark(e, "tpot_p99_ms", 20), mark(eo, "tpot_p99_ms", 20),
                            med["swaps"], med["recomputes"], sim["swaps"], sim["recomputes"],
                            statistics.median(shares)))
    n = len(out["rows"])
    out["misses"] = misses
    med_abs = {kind: {m: statistics.median(abs(r[key][m]) for r in out["rows"]) for m, _ in TARGETS}
               for kind, key in (("wall", "error_percent"), ("own_core", "error_own_core_percent"))}
    out["median_abs_error_percent"] = med_abs
    json.dump(out, open(os.path.join(res, "sim-validate.json"), "w"), indent=1)
    open(os.path.join(res, "fig-sim-validate.dat"), "w").write("\n".join(dat) + "\n")
    print("| workload | preempt/sched | tok/s real (± half spread) | tok/s sim | error (wall) | error (own core) "
          "| mean WT real | mean WT sim | error | TTFT p99 ms real | sim | error (wall) | error (own core) "
          "| TPOT p99 ms real | sim | error (wall) | error (own core) | swaps/recomputes real | sim "
          "| CPU share of the real runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    for kind, label in (("wall", "against the wall clock"), ("own_core", "against the real runs' own-core time")):
        mm, ma = misses[kind], med_abs[kind]
        print("Rows outside the target %s (✗): throughput %d of %d, mean WT %d of %d (10 %%), p99 TTFT %d of %d, "
              "p99 TPOT %d of %d (20 %%); median |error|: throughput %.1f %%, mean WT %.1f %%, p99 TTFT %.1f %%, "
              "p99 TPOT %.1f %%." % (label, mm["throughput_tok_s"], n, mm["mean_weighted_turnaround"], n,
                                     mm["ttft_p99_ms"], n, mm["tpot_p99_ms"], n, ma["throughput_tok_s"],
                                     ma["mean_weighted_turnaround"], ma["ttft_p99_ms"], ma["tpot_p99_ms"]))
        print()


def rejected(json_path):
    """Requests the engine refused (longer than the GPU pool can ever hold): allm-run
    says so on stderr, one line each, beside the JSON."""
    err = json_path[:-5] + ".err"
    return sum("rejected" in l for l in open(err)) if os.path.exists(err) else 0


def split3(args):
    i = args.index("--")
    j = args.index("--", i + 1)
    return args[:i], args[i + 1:j], args[j + 1:]


def paper(root, args):
    profile = args[0]
    models, workloads, outputs = split3(args[1:])
    rows, summary = [], {}
    for model in models:
        res = os.path.join(root, model)
        dat = []
        vs_rc, vs_sw = [], []
        for wl in workloads:
            dat.append("# %s: max_output adaptive recompute swap (tok/s)" % wl)
            for o in outputs:
                paths = {p: os.path.join(res, "paper-sim", "%s-%s-%s.json" % (wl, o, p)) for p in POLICIES}
                runs = {p: load(paths[p]) for p in POLICIES}
                tp = {p: runs[p]["throughput_tok_s"] for p in POLICIES}
                same = len({runs[p]["outputs_sha256"] for p in POLICIES}) == 1
                dat.append("%s %s" % (o, " ".join("%.2f" % tp[p] for p in POLICIES)))
                vs_rc.append(tp["adaptive"] / tp["recompute"])
                vs_sw.append(tp["adaptive"] / tp["swap"])
                for p in POLICIES:
                    r = runs[p]
                    pre = r["preemptions"]
                    swaps = "%d" % pre["swap"] + ("+%d disk" % pre["disk"] if pre.get("disk") else "")
                    rows.append("| %s | %s | %s | %s | %.0f | %.0f | %.2fx | %.2fx | %s | %d | %.3f | %.0f | %.0f | %s | %s |" % (
                        model, wl, o, p, tp[p], r["gen_throughput_tok_s"], tp[p] / tp["recompute"],
                        tp[p] / tp["swap"], swaps, pre["recompute"],
                        r["mean_weighted_turnaround"], r["ttft_ms"]["p99"], r["tpot_ms"]["p99"],
                        "%d" % rejected(paths[p]), "yes" if same else "NO"))
            dat.append("\n")
        open(os.path.join(res, "fig3-throughput.dat"), "w").write("\n".join(dat) + "\n")
        # fair vs fcfs (adaptive), per workload at the middle output length
        fair = []
        dat4 = []
        for wl in workloads:
            f = os.path.join(res, "paper-sim", "%s-fcfs.json" % wl)
            if not os.path.exists(f):
                continue
            fc = load(f)
            fa = load(os.path.join(res, "paper-sim", "%s-%s-adaptive.json" % (wl, outputs[len(outputs) // 2])))
            fair.append({"workload": wl, "fair": fa, "fcfs": fc})
            dat4.append("%s %.4f %.4f %.2f %.2f" % (wl, fa["mean_weighted_turnaround"], fc["mean_weighted_turnaround"],
                                                    fa["throughput_tok_s"], fc["throughput_tok_s"]))
        summary[model] = {"adaptive_vs_recompute": [min(vs_rc), max(vs_rc)],
                          "adaptive_vs_swap": [min(vs_sw), max(vs_sw)], "fair_vs_fcfs": fair}
    suffix = models[0][models[0].index("-disk"):] if "-disk" in models[0] else ""
    json.dump({"profile": profile, "paper": PAPER, "models": summary},
              open(os.path.join(root, "paper-sim%s.json" % suffix), "w"), indent=1)
    print("| model | workload | max output | policy | tok/s | gen tok/s | vs recompute | vs swap | swaps | recomputes "
          "| mean weighted turnaround | TTFT p99 ms | TPOT p99 ms | rejected | same outputs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("| model | adaptive / recompute (sim) | paper | adaptive / swap (sim) | paper |")
    print("|---|---|---|---|---|")
    for m, s in summary.items():
        print("| %s | %.2f–%.2fx | %.2f–%.2fx | %.2f–%.2fx | %.2f–%.2fx |" % (
            m, s["adaptive_vs_recompute"][0], s["adaptive_vs_recompute"][1], PAPER["vs_recompute"][0],
            PAPER["vs_recompute"][1], s["adaptive_vs_swap"][0], s["adaptive_vs_swap"][1], PAPER["vs_swap"][0],
            PAPER["vs_swap"][1]))
    if any(s["fair_vs_fcfs"] for s in summary.values()):
        print()
        print("| model | workload | mean WT fair | mean WT fcfs | fair vs fcfs | paper (vs vLLM) | tok/s fair | tok/s fcfs "
              "| fair / fcfs |")
        print("|---|---|---|---|---|---|---|---|---|")
        for m, s in summary.items():
            for f in s["fair_vs_fcfs"]:
                a, c = f["fair"], f["fcfs"]
                print("| %s | %s | %.3f | %.3f | %+.1f %% | %d to %d %% | %.0f | %.0f | %.2fx |" % (
                    m, f["workload"], a["mean_weighted_turnaround"], c["mean_weighted_turnaround"],
                    100 * (a["mean_weighted_turnaround"] / c["mean_weighted_turnaround"] - 1), PAPER["wt_vs_vllm"][0],
                    PAPER["wt_vs_vllm"][1], a["throughput_tok_s"], c["throughput_tok_s"],
                    a["throughput_tok_s"] / c["throughput_tok_s"]))


def overhead(res, args):
    rows = []
    out = []
    for s in args:
        d = load(os.path.join(res, "overhead-%s.json" % s))
        sim = d["simulated"]
        st = d["steps"]
        batch = d["generated_tokens"] / max(1, st["decode"] + st["mixed"])
        out.append({"max_num_seqs": int(s), "mean_decode_batch": batch, **sim})
        rows.append("| %s | %.0f | %d | %.4f | %.4f | %.4f | %.0f |" % (
            s, batch, sim["steps"], sim["host_cpu_per_step_ms"], sim["host_per_step_ms"], sim["wall_per_step_ms"],
            d["throughput_tok_s"]))
    json.dump(out, open(os.path.join(res, "sim-overhead.json"), "w"), indent=1)
    print("| max_num_seqs | mean running (decode batch) | steps | host CPU ms / step | host wall ms / step "
          "| wall ms / step (with the sim) | simulated tok/s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    {"validate": validate, "paper": paper, "overhead": overhead}[sys.argv[1]](sys.argv[2], sys.argv[3:])
