#!/usr/bin/env bash
# The disk KV tier (issue 16), side by side, one run each, all requests at t = 0, on
# the paper's engine and blocks (128 device / 64 host, DESIGN §11) plus a 4 GiB disk
# tier: adaptive without the tier vs with it, and the three policies with it; the
# disk predictor's error; which tier each adaptive decision took, by request length;
# and this machine's disk bandwidth (dd, O_DIRECT) beside it. Also the tier's
# reach: adaptive with a host pool that never fills (CEIL_BLOCKS blocks, no
# disk), the best any slower tier could do.
# Writes RESULTS/disk-tier/*.json and RESULTS/disk-tier.md.
# Usage: bench/disk-tier.sh   (environment: bench/common.sh, plus
#        WORKLOADS="summary chatbot" OUT_LEN=128 DISK_GIB=4 DISK_DIR=/var/tmp
#        CEIL_BLOCKS=4096, 0 for no ceiling run)
. "$(dirname "$0")/common.sh"
WORKLOADS=${WORKLOADS:-summary chatbot}
OUT_LEN=${OUT_LEN:-128}
DISK_GIB=${DISK_GIB:-4}
DISK_DIR=${DISK_DIR:-/var/tmp}
CEIL_BLOCKS=${CEIL_BLOCKS:-4096}
OUT=$RESULTS/disk-tier
machine_note disk-tier
mkdir -p "$OUT"
t0=$(date +%s)

# the disk itself: 256 MiB written and read back with O_DIRECT, 1 MiB requests
probe=$(mktemp "$DISK_DIR/allm-dd.XXXXXX")
w=$(dd if=/dev/zero of="$probe" bs=1M count=256 oflag=direct conv=fsync 2>&1 | awk '/copied/ { print $(NF-1), $NF }')
r=$(dd if="$probe" of=/dev/null bs=1M iflag=direct 2>&1 | awk '/copied/ { print $(NF-1), $NF }')
rm -f "$probe"
echo "disk in $DISK_DIR ($(df -h "$DISK_DIR" | awk 'NR == 2 { print $1 }')): write $w, read $r (dd, O_DIRECT, 1 MiB)" >"$OUT/disk.txt"
cat "$OUT/disk.txt" >&2

DISK=(--disk-swap-space "$DISK_GIB" --disk-swap-dir "$DISK_DIR")
for wl in $WORKLOADS; do
	echo "== $wl, max output $OUT_LEN, $N requests" >&2
	W=(--workload "$wl" -n "$N" --max-output "$OUT_LEN" "${SAMPLING[@]}")
	"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" "${W[@]}" --preempt adaptive \
		--disk-swap-dir "$DISK_DIR" --compare disk_swap_space=0,"$DISK_GIB" --json --no-progress \
		>"$OUT/$wl-tier.json"
	"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" "${W[@]}" "${DISK[@]}" \
		--compare preempt=adaptive,recompute,swap --json --no-progress >"$OUT/$wl-policies.json"
	rm -f "$OUT/$wl-ceiling.json"
	if [ "$CEIL_BLOCKS" -gt 0 ]; then
		"$ALLM_BENCH" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" "${W[@]}" --preempt adaptive \
			--compare cpu_blocks="$CEIL_BLOCKS" --json --no-progress >"$OUT/$wl-ceiling.json"
	fi
	# the decision log of adaptive with the tier (allm-run: same engine, in-process)
	"$ALLM_RUN" "${ENGINE_ARGS[@]}" "${PAPER_ARGS[@]}" "${DISK[@]}" --preempt adaptive "${W[@]}" \
		--decisions "$OUT/$wl-decisions.jsonl" --json >"$OUT/$wl-run.json" 2>/dev/null
done
echo "disk-tier: $(($(date +%s) - t0)) s" >&2
python3 - "$OUT" "$WORKLOADS" >"$RESULTS/disk-tier.md" <<'PY'
import json, os, sys, collections
out, wls = sys.argv[1], sys.argv[2].split()
def runs(f):
    return {list(r["setting"].values())[0]: r for r in json.load(open(f))["runs"]}
print(open(f"{out}/disk.txt").read().strip() + "\n")
print("| workload | engine | tok/s | vs no disk | swaps | disk | recomputes | recomputed tok | MAPE disk % | same outputs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for wl in wls:
    tier, pol = runs(f"{out}/{wl}-tier.json"), runs(f"{out}/{wl}-policies.json")
    base = next(r for k, r in tier.items() if float(k) == 0)
    ref = base["outputs_sha256"]
    rows = [("adaptive, no disk", base)] + [(f"{k}, disk", r) for k, r in pol.items()]
    if os.path.exists(f"{out}/{wl}-ceiling.json"):  # the tier's reach: a host pool that never fills
        rows += [(f"adaptive, {k} host blocks, no disk", r) for k, r in runs(f"{out}/{wl}-ceiling.json").items()]
    for name, r in rows:
        p = r["preemptions"]
        m = r["predictor_mape"].get("disk")
        print(f"| {wl} | {name} | {r['throughput_tok_s']:.0f} | {r['throughput_tok_s'] / base['throughput_tok_s']:.2f}x | "
              f"{p['swap']} | {p.get('disk', 0)} | {p['recompute']} | {r.get('recomputed_tokens', 0)} | "
              f"{'-' if m is None else f'{m:.1f}'} | {'yes' if r['outputs_sha256'] == ref else 'NO'} |")
print("\n### Which tier adaptive took, by length (allm-run --decisions)\n")
print("| workload | tokens | host | disk | recompute | mean pred ms host / disk / recompute |")
print("|---|---|---|---|---|---|")
for wl in wls:
    b = collections.defaultdict(lambda: collections.Counter())
    pm = collections.defaultdict(lambda: [[], [], []])
    for line in open(f"{out}/{wl}-decisions.jsonl"):
        d = json.loads(line)
        k = min(d["tokens"] // 128, 4)
        b[k][d["choice"]] += 1
        pm[k][0].append(d["pred_swap_s"]); pm[k][1].append(d.get("pred_disk_s", float("nan"))); pm[k][2].append(d["pred_recompute_s"])
    for k in sorted(b):
        lo, hi = k * 128, "" if k == 4 else (k + 1) * 128 - 1
        mean = lambda v: sum(v) / len(v) * 1e3 if v else float("nan")
        print(f"| {wl} | {lo}-{hi} | {b[k]['swap']} | {b[k]['disk']} | {b[k]['recompute']} | "
              f"{mean(pm[k][0]):.3f} / {mean(pm[k][1]):.3f} / {mean(pm[k][2]):.3f} |")
PY
cat "$RESULTS/disk-tier.md"
