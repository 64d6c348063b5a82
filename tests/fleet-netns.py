# Description: checks for fleet-netns.sh (not a test by itself): reads allm-load.py's per-request records and the test's event times, and says ok/FAIL for prefix affinity, multi-turn reuse, a killed engine (only its in-flight streams fail; new requests, e1's prefixes too, go to the others at once), a rejoined engine and a drained one (nothing fails, nothing new goes to it).
# usage: python fleet-netns.py CHECK RECORDS [T0 T_EVENT]
import collections
import json
import sys

check, path = sys.argv[1], sys.argv[2]
recs = [json.loads(line) for line in open(path)]
fails = 0


def ok(m):
    print("ok: " + m)


def fail(m):
    global fails
    print("FAIL: " + m)
    fails += 1


good = [r for r in recs if r["status"] == "ok"]
bad = [r for r in recs if r["status"] != "ok"]
by_inst = collections.Counter(r["instance"] for r in good)

if check == "affinity":
    if bad:
        fail(f"shared-prefix: {len(bad)} failed: {[(r['instance'], r['status'], r['error']) for r in bad[:3]]}")
    groups = collections.defaultdict(collections.Counter)
    for r in good:
        groups[r["tag"]][r["instance"]] += 1
    home = sum(c.most_common(1)[0][1] for c in groups.values())
    hit = sum(r["cached_tokens"] for r in good) / max(1, sum(r["prompt_tokens"] for r in good))
    if len(by_inst) >= 2 and home == len(good) and hit > 0.3:
        ok(f"shared prefix: {len(good)} requests on {dict(by_inst)}; {home} of them on their prefix's engine; "
           f"hit fraction {hit:.2f}")
    else:
        fail(f"shared prefix: instances {dict(by_inst)}, on their prefix's engine {home}/{len(good)}, hits {hit:.2f}; "
             f"{dict(groups)}")
elif check == "multiturn":
    if bad:
        fail(f"multi-turn: {len(bad)} failed: {[(r['instance'], r['status'], r['error']) for r in bad[:3]]}")
    conv = collections.defaultdict(list)
    for r in sorted(good, key=lambda r: r["start"]):
        c, t = r["tag"][1:].split("t")
        conv[c].append(r)
    same = [(p, r) for turns in conv.values() for p, r in zip(turns, turns[1:]) if p["instance"] == r["instance"]]
    later = sum(len(t) - 1 for t in conv.values())
    reused = [r for p, r in same if r["cached_tokens"] >= (p["prompt_tokens"] // 16) * 16 - 16]
    # one conversation at a time, its first 160 bytes (model, system prompt, first
    # user turn) the same every turn: the load bound never moves it, every turn stays
    if len(conv) >= 2 and len(same) == later and len(reused) == len(same) and len(by_inst) >= 2:
        ok(f"multi-turn: {len(conv)} conversations on {dict(by_inst)}; {len(same)} of {later} later turns on the "
           f"previous turn's engine, each reusing its history")
    else:
        fail(f"multi-turn: {len(same)}/{later} on the same engine, {len(reused)} of those reused; {dict(by_inst)}")
elif check == "kill":
    t_kill = float(sys.argv[4]) - float(sys.argv[3])
    in_flight = [r for r in recs if r["instance"] == "e1" and r["start"] < t_kill < r["end"]]
    others = [r for r in bad if not (r["instance"] == "e1" and r["start"] < t_kill + 0.05 and r["end"] > t_kill)]
    after = [r for r in good if r["start"] > t_kill + 2.0]
    streamed = [r for r in bad if r["status"] == "error_event"]
    if not bad:
        fail(f"kill: nothing failed (was anything in flight on e1 at {t_kill:.2f} s? {len(in_flight)})")
    elif others:
        fail(f"kill: {len(others)} failures that were not e1's in-flight streams: "
             f"{[(r['instance'], r['status'], round(r['start'], 2), round(r['end'], 2), r['error']) for r in others[:4]]}")
    elif len(streamed) != len(bad):
        fail(f"kill: e1's streams did not end with an error event: {[(r['status'], r['error']) for r in bad[:4]]}")
    else:
        ok(f"kill: {len(bad)} of e1's {len(in_flight)} in-flight streams ended with an error event; "
           f"the other {len(good)} requests succeeded")
    # requests of this load sent 2 s after the kill, if it lasted that long (the next
    # check, "elsewhere", sends new ones at once whatever the timing)
    if any(r["instance"] == "e1" for r in after):
        fail(f"kill: after 2 s: {len(after)} requests, on {collections.Counter(r['instance'] for r in after)}")
elif check == "elsewhere":
    # new requests right after an engine left (killed or drained): none fails, none is
    # served by it, some were on the prefixes it had served (so they needed a new home)
    gone = sys.argv[4]
    gone_tags = {json.loads(x)["tag"] for x in open(sys.argv[3]) if json.loads(x)["instance"] == gone}
    homeless = [r for r in recs if r["tag"] in gone_tags]
    if bad or any(r["instance"] == gone for r in good):
        fail(f"after {gone} left: {len(bad)} failed {[(r['status'], r['error']) for r in bad[:3]]}, "
             f"served {dict(by_inst)}")
    elif not homeless:
        fail(f"after {gone} left: none of the {len(recs)} requests was on a prefix {gone} had served")
    else:
        ok(f"after {gone} left: {len(recs)} new requests, {len(homeless)} of them on its prefixes, "
           f"all served by the others: {dict(by_inst)}")
elif check == "rejoin":
    if not bad and by_inst.get("e1", 0) > 0:
        ok(f"rejoin: e1 serves again: {dict(by_inst)}")
    else:
        fail(f"rejoin: {dict(by_inst)}, failed {[(r['instance'], r['status']) for r in bad[:3]]}")
elif check == "drain":
    t_drain = float(sys.argv[4]) - float(sys.argv[3])
    on_e2 = [r for r in good if r["instance"] == "e2" and r["start"] < t_drain < r["end"]]
    late = [r for r in good if r["instance"] == "e2" and r["start"] > t_drain + 2.0]
    if bad:
        fail(f"drain: {len(bad)} failed: {[(r['instance'], r['status'], r['error']) for r in bad[:3]]}")
    elif not on_e2:
        fail("drain: nothing was in flight on e2 when it was drained")
    else:
        ok(f"drain: e2's {len(on_e2)} in-flight streams finished; none of {len(recs)} requests failed")
    # requests of this load started 2 s after the drain, if it lasted that long ("elsewhere"
    # sends new ones right after the drain whatever the timing)
    rest = [r for r in good if r["start"] > t_drain + 2.0]
    if late:
        fail(f"drain: {len(late)} of the {len(rest)} requests started 2 s after the drain went to e2")
sys.exit(1 if fails else 0)
