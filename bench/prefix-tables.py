#!/usr/bin/env python3
"""The tables of bench/prefix-cache.sh's results (markdown on stdout).

Usage: bench/prefix-tables.py RESULTS_DIR
Each number is the median over the repetitions found, with the spread (min-max)
where it matters; ratios are taken from the medians."""
import glob
import json
import os
import re
import statistics
import sys

R = sys.argv[1]
MODELS = {"stories": "stories260K", "medium": "--dummy medium"}


def load(path):
    with open(path) as f:
        return json.load(f)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return f"{min(xs):.3g}-{max(xs):.3g}" if len(xs) > 1 else "-"


def f(x, fmt="%.3g"):
    return "-" if x is None else fmt % x


def reps(pattern):
    out = {}
    for p in sorted(glob.glob(os.path.join(R, pattern))):
        m = re.search(r"-(\d+)\.json$", p)
        try:
            out[int(m.group(1))] = load(p)
        except ValueError:  # a run still being written
            pass
    return out


def shared():
    print("### Shared system prompts (8 groups x 8 prompts, 64 own tokens, 32 out, 4 in flight)\n")
    print("| model | caching | hit fraction | TTFT cold p50 ms | TTFT warm p50 ms | warm/cold | req/s (spread) | on/off req/s |")
    print("|---|---|---|---|---|---|---|---|")
    for m, name in MODELS.items():
        rs = {pc: reps(f"shared-{m}-{pc}-*.json") for pc in ("on", "off")}
        if not rs["on"]:
            continue
        rq = {pc: med([d["req_s"] for d in rs[pc].values()]) for pc in rs}
        for pc in ("on", "off"):
            d = rs[pc].values()
            cold = med([x["ttft_cold_p50_ms"] for x in d])
            warm = med([x["ttft_warm_p50_ms"] for x in d])
            print(f"| {name} | {pc} | {f(med([x['hit_fraction'] for x in d]), '%.3f')} | {f(cold, '%.1f')} | "
                  f"{f(warm, '%.1f')} | {f(warm / cold if warm and cold else None, '%.3f')} | "
                  f"{f(rq[pc], '%.2f')} ({spread([x['req_s'] for x in d])}) | "
                  f"{f(rq['on'] / rq['off'] if pc == 'on' and rq['off'] else None, '%.2fx')} |")
    print()


def multiturn():
    print("### Multi-turn conversations (16 x 5 rounds, 16 out; device pool a quarter of the working set)\n")
    print("| model | setting | cached fraction | TTFT round 1 p50 ms | later p50 ms | later p99 ms | p99 / round-1 p50 | wait max / median | duration s (spread) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m, name in MODELS.items():
        for cfg, what in (("tiers", "host + disk tiers"), ("notiers", "device only"), ("off", "caching off")):
            d = list(reps(f"multiturn-{m}-{cfg}-*.json").values())
            if not d:
                continue
            r1 = med([x["ttft_round1_p50_ms"] for x in d])
            p99 = med([x["ttft_later_p99_ms"] for x in d])
            wmax = med([x["wait_max_ms"] for x in d])
            wmed = med([x["wait_median_ms"] for x in d])
            print(f"| {name} | {what} | {f(med([x['hit_fraction'] for x in d]), '%.3f')} | {f(r1, '%.1f')} | "
                  f"{f(med([x['ttft_later_p50_ms'] for x in d]), '%.1f')} | {f(p99, '%.1f')} | "
                  f"{f(p99 / r1 if p99 and r1 else None, '%.3f')} | "
                  f"{f(wmax / wmed if wmax and wmed else None, '%.2f')} | "
                  f"{f(med([x['duration_s'] for x in d]), '%.1f')} ({spread([x['duration_s'] for x in d])}) |")
    print()


def restore():
    print("### Restore or recompute: a prefix only in the host pool or only on disk, then a request reading it\n")
    print("TTFT ms, median of 3; `chosen/best` is adaptive's TTFT over the better of forced restore (swap) and "
          "forced recompute (recompute).\n")
    print("| model | tier | disk MB/s | prefix tokens | adaptive | restore (swap) | recompute | chosen/best | adaptive chose |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m, name in MODELS.items():
        for th in ("none", "200", "50", "10"):
            p = os.path.join(R, f"restore-{m}-{th}.jsonl")
            if not os.path.exists(p):
                continue
            rows = [json.loads(l) for l in open(p) if l.strip()]
            cells = sorted({(r["tier"], r["len"]) for r in rows}, key=lambda x: (x[0] != "host", x[1]))
            for tier, n in cells:
                t = {pol: med([r["ttft_ms"] for r in rows if r["tier"] == tier and r["len"] == n and r["policy"] == pol])
                     for pol in ("adaptive", "swap", "recompute")}
                ad = [r for r in rows if r["tier"] == tier and r["len"] == n and r["policy"] == "adaptive"]
                best = min(t["swap"], t["recompute"])
                # what adaptive chose: the decision counters it moved
                chose = []
                for r in ad:
                    c = r["cached"]
                    chose.append("restore" if c >= n else "recompute" if c == 0 else "split")
                print(f"| {name} | {tier} | {th if tier == 'disk' else '-'} | {n} | {f(t['adaptive'], '%.2f')} | "
                      f"{f(t['swap'], '%.2f')} | {f(t['recompute'], '%.2f')} | "
                      f"{f(t['adaptive'] / best if best else None, '%.2f')} | {'/'.join(sorted(set(chose)))} |")
    print()


def noreuse():
    print("### No reuse: the paper's workloads (128 device / 64 host blocks), caching on vs off\n")
    print("| model | workload | max output | on tok/s (spread) | off tok/s (spread) | on/off |")
    print("|---|---|---|---|---|---|")
    for m, name in MODELS.items():
        files = sorted(glob.glob(os.path.join(R, f"noreuse-{m}-*.json")))
        keys = sorted({tuple(os.path.basename(p).split("-")[2:4]) for p in files})
        for wl, out in keys:
            tp = {"on": [], "off": []}
            for p in glob.glob(os.path.join(R, f"noreuse-{m}-{wl}-{out}-*.json")):
                rep = int(re.search(r"-(\d+)\.json$", p).group(1))
                for k, run in enumerate(load(p)["runs"]):
                    label = run["setting"]["prefix_caching"]
                    if label not in ("on", "off"):  # allm-bench before it reported words: by order
                        label = ("on", "off")[k] if rep % 2 else ("off", "on")[k]
                    tp[label].append(run["throughput_tok_s"])
            on, off = med(tp["on"]), med(tp["off"])
            print(f"| {name} | {wl} | {out} | {f(on, '%.1f')} ({spread(tp['on'])}) | {f(off, '%.1f')} ({spread(tp['off'])}) | "
                  f"{f(on / off if on and off else None, '%.3f')} |")
    print()


def policies():
    print("### Policies where cached prefixes and tiers mix (the multi-turn workload, device a quarter, host + disk)\n")
    print("| model | policy | tok/s (spread) | req/s | mean weighted turnaround | cached fraction | vs best fixed (tok/s) |")
    print("|---|---|---|---|---|---|---|")
    for m, name in MODELS.items():
        d = {pol: list(reps(f"policies-{m}-{pol}-*.json").values()) for pol in ("adaptive", "recompute", "swap")}
        if not d["adaptive"]:
            continue
        tp = {pol: med([x["throughput_tok_s"] for x in d[pol]]) for pol in d}
        best = max(tp["recompute"] or 0, tp["swap"] or 0)
        for pol in ("adaptive", "recompute", "swap"):
            x = d[pol]
            print(f"| {name} | {pol} | {f(tp[pol], '%.1f')} ({spread([y['throughput_tok_s'] for y in x])}) | "
                  f"{f(med([y['req_s'] for y in x]), '%.2f')} | {f(med([y['mean_weighted_turnaround'] for y in x]), '%.3f')} | "
                  f"{f(med([y['hit_fraction'] for y in x]), '%.3f')} | "
                  f"{f(tp[pol] / best if pol == 'adaptive' and best else None, '%.2fx')} |")
    print()


for t in (shared, multiturn, restore, noreuse, policies):
    t()
