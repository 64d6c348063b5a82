# The routing table of bench/fleet.sh's runs (bench/README.md "Several engines"):
# mean and spread (min-max) over the runs of each setting, the ratios the issue asks for,
# and where the hits went (from the per-request records, *.jsonl): each prefix's home
# engine (the one that served most of its requests); misses off the home engine (spilled:
# the load bound or no affinity sent it elsewhere), a prefix's first request on its home
# (unavoidable), later misses on the home that arrived before the first had finished
# (concurrent) or after (evicted); and the workload's own ceiling: every prefix missed
# once, then always hit.
# usage: python3 bench/fleet-table.py bench/results/fleet [PREFIX_TOKENS] > bench/results/fleet/table.md
import collections
import glob
import random
import json
import os
import sys

d = sys.argv[1]
L = int(sys.argv[2]) if len(sys.argv) > 2 else 256
runs, recs = {}, {}
for f in sorted(glob.glob(os.path.join(d, "*.json"))):
    name = os.path.basename(f)[:-5]
    setting = name.rsplit("-", 1)[0]
    runs.setdefault(setting, []).append(json.load(open(f)))
    if os.path.exists(f + "l"):
        recs.setdefault(setting, []).append([json.loads(x) for x in open(f + "l")])


def causes(rs):
    """misses by cause and the ceiling of one run's records"""
    rs = sorted(rs, key=lambda r: r["start"])
    by = collections.defaultdict(collections.Counter)
    for r in rs:
        by[r["tag"]][r["instance"]] += 1
    home = {t: c.most_common(1)[0][0] for t, c in by.items()}
    split = sorted(collections.Counter(home.values()).values(), reverse=True)
    seen, first_end, c = set(), {}, collections.Counter()
    for r in rs:
        k = (r["tag"], r["instance"])
        off = r["instance"] != home[r["tag"]]
        c["off home"] += off
        if r["cached_tokens"] < L:
            c["miss"] += 1
            if off:
                c["spilled"] += 1
            elif k not in seen:
                c["first on home"] += 1
            elif r["start"] < first_end[k]:
                c["concurrent"] += 1  # arrived before the first one had stored the prefix
            else:
                c["evicted"] += 1
        if k not in seen:
            first_end[k] = r["end"]
        seen.add(k)
    q = sum(r["prompt_tokens"] for r in rs)
    c["ceiling"] = (len(rs) - len(by)) * L / q
    c["split"] = "/".join(map(str, split))
    return c


def col(setting, fn):
    return [fn(r) for r in runs.get(setting, [])]


def fmt(v, p=3):
    return f"{sum(v) / len(v):.{p}f} ({min(v):.{p}f}-{max(v):.{p}f})" if v else "-"


def mean(v, p=1):
    return f"{sum(v) / len(v):.{p}f}" if v else "-"


order = ["uniform-affinity", "uniform-affinity-nobound", "uniform-roundrobin", "skewed-affinity", "skewed-leastconn"]
metrics = [("req/s", lambda r: r["req_s"], 3), ("hit fraction", lambda r: r["prefix_cache"]["hit_fraction"], 3),
           ("engines' hit fraction (/metrics)",
            lambda r: sum(e["hit_tokens"] for e in r["engines"].values()) / sum(e["queried_tokens"] for e in r["engines"].values()), 3),
           ("TTFT p50 ms", lambda r: r["ttft_ms"]["p50"], 0), ("TTFT p99 ms", lambda r: r["ttft_ms"]["p99"], 0),
           ("failed", lambda r: r["failed"], 0)]
print("| setting | runs | " + " | ".join(m[0] for m in metrics) + " |")
print("|---|---|" + "---|" * len(metrics))
for s in order:
    if s in runs:
        print(f"| {s} | {len(runs[s])} | " + " | ".join(fmt(col(s, fn), p) for _, fn, p in metrics) + " |")
print()
print("Where the hits went (mean per run; a miss: fewer than the prefix's tokens cached):")
print()
print("| setting | requests | prefixes per engine (home) | off-home requests | misses | spilled | first on home | concurrent | evicted | ceiling hit fraction |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s in order:
    if s in recs:
        cs = [causes(rs) for rs in recs[s]]
        n = mean([len(rs) for rs in recs[s]], 0)
        splits = ", ".join(sorted(set(c["split"] for c in cs)))
        print(f"| {s} | {n} | {splits} | " + " | ".join(mean([c[k] for c in cs]) for k in ["off home", "miss", "spilled", "first on home", "concurrent", "evicted"])
              + f" | {mean([c['ceiling'] for c in cs], 3)} |")
print()


def ratio(a, b, fn):
    x, y = col(a, fn), col(b, fn)
    if not x or not y:
        return "-"
    pairs = [i / j for i, j in zip(x, y)]
    med = sorted(pairs)[len(pairs) // 2] if len(pairs) % 2 else sum(sorted(pairs)[len(pairs) // 2 - 1:][:2]) / 2
    return (f"{sum(x) / len(x) / (sum(y) / len(y)):.2f}x (per run pair {min(pairs):.2f}-{max(pairs):.2f}, "
            f"median {med:.2f}; {', '.join(f'{v:.2f}' for v in pairs)})")




def lru_model(route, split, n=144, P=8, S=32, pool=4, trials=200):
    """hit fraction of bench/fleet.sh's uniform stream on two LRU pools of `pool` whole
    prefixes, requests one at a time (no concurrency, no partial prefixes): round robin,
    or affinity with `split` of the P prefixes homed on the first engine, no load bound"""
    tot = 0
    for t in range(trials):
        rng, pools, hits = random.Random(t), [collections.OrderedDict(), collections.OrderedDict()], 0
        for i in range(n):
            p = rng.randrange(P)
            c = pools[i % 2 if route == "rr" else int(p >= split)]
            if p in c:
                hits += 1
                c.move_to_end(p)
            else:
                c[p] = True
                if len(c) > pool:
                    c.popitem(last=False)
        tot += hits / n
    return tot / trials * L / (L + S)


print(f"LRU model of the uniform stream (pools of 4 prefixes, no concurrency, 200 seeds): round robin "
      f"{lru_model('rr', 0):.3f}, affinity 4/4 {lru_model('aff', 4):.3f}, 5/3 {lru_model('aff', 5):.3f}, "
      f"6/2 {lru_model('aff', 6):.3f} (no load bound)")
print()
hit, rps, p99 = metrics[1][1], metrics[0][1], metrics[4][1]
print(f"* uniform, affinity / round robin: hit fraction {ratio('uniform-affinity', 'uniform-roundrobin', hit)}"
      f" (target >= 1.8x), req/s {ratio('uniform-affinity', 'uniform-roundrobin', rps)} (target >= 1.5x)")
if "uniform-affinity-nobound" in runs:
    print(f"* uniform, affinity without the load bound / round robin: hit fraction "
          f"{ratio('uniform-affinity-nobound', 'uniform-roundrobin', hit)}, req/s {ratio('uniform-affinity-nobound', 'uniform-roundrobin', rps)}")
print(f"* skewed (half on one prefix), affinity / leastconn: TTFT p99 "
      f"{ratio('skewed-affinity', 'skewed-leastconn', p99)} (target <= 1x), req/s "
      f"{ratio('skewed-affinity', 'skewed-leastconn', rps)}")
