#!/usr/bin/env bash
# Description: allm-sim-fit --check --by-op splits each forward into GEMMs, attention and the other ops, timed in place on the CPU and priced by the profile; its priced columns add up to the simulated device's own forward time for every batch of the grid, so the breakdown accounts for every op the simulator charges (none missed, none counted twice); a profile that cannot be read is a clear error and a failed exit.
set -u
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
DATA_DIR=${DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}
FIT=$BUILD_DIR/tools/allm-sim-fit
M=$DATA_DIR/models/stories260K
P=$DATA_DIR/sim-profiles/cpu-local.json
[ -x "$FIT" ] || { echo "FAIL: $FIT not built"; exit 1; }
[ -d "$M" ] && [ -f "$P" ] || { echo "FAIL: $M or $P is missing from the checkout"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the tables"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sim-fit-by-op.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# a profile that is not there: a clear error and a failed exit, no table
if "$FIT" --check "$tmp/none.json" --by-op --model "$M" --threads 1 --repeat 3 >"$tmp/out" 2>"$tmp/err"; then
	echo "FAIL: --check of a missing profile exited 0"; exit 1
fi
grep -q "none.json" "$tmp/err" && ! grep -q "by op" "$tmp/out" ||
	{ echo "FAIL: missing profile: stderr '$(cat "$tmp/err")'"; exit 1; }
echo "ok   a missing profile: $(cat "$tmp/err")"

"$FIT" --check "$P" --by-op --model "$M" --threads 1 --repeat 3 >"$tmp/out" 2>"$tmp/err" ||
	{ echo "FAIL: allm-sim-fit --check --by-op: $(cat "$tmp/err")"; exit 1; }
python3 - "$tmp/out" <<'PY'
import re, sys
whole, parts = {}, {}
row = re.compile(r"^\s*(\d+) decodes @(\d+)\s+\+ (\d+) x (\d+)\s+prefill\s+(.*)$")
section = "whole"
for line in open(sys.argv[1]):
    if line.startswith("# by op"):
        section = "by op"
    m = row.match(line)
    if not m:
        continue
    key = m.group(1, 2, 3, 4)
    cols = m.group(5).split()
    if section == "whole":
        whole[key] = (float(cols[0]), float(cols[1]))  # real ms, sim ms
    else:
        pairs = [tuple(map(float, c.split("/"))) for c in cols]
        parts[key] = pairs
bad = 0
if not whole or set(whole) != set(parts):
    print(f"FAIL: {len(whole)} forwards in the check, {len(parts)} in the breakdown")
    sys.exit(1)
for key, (real, sim) in sorted(whole.items(), key=lambda kv: tuple(map(int, kv[0]))):
    pairs = parts[key]
    priced = sum(s for _, s in pairs)
    timed = sum(r for r, _ in pairs)
    ok = len(pairs) == 3 and abs(priced - sim) <= 0.001 * sim + 3e-4 and all(r > 0 for r, _ in pairs[:2])
    bad += not ok
    print(("ok  " if ok else "FAIL") + f" {key[0]} decodes @{key[1]} + {key[2]} x {key[3]}: simulated forward "
          f"{sim:.4f} ms, its ops priced {priced:.4f} ms; real forward {real:.4f} ms, its ops timed {timed:.4f} ms")
sys.exit(1 if bad else 0)
PY
