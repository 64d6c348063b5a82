#!/usr/bin/env bash
# Description: allm-ping -n 2000 --json (its own forked responder, no engine) prints one JSON object with ring_spin, ring_sleep and uds, each with positive p50 <= p90 <= p99, a positive mean and n = 2000; the text form prints the three rows.
set -u
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
PING=$BUILD_DIR/tools/allm-ping
[ -x "$PING" ] || { echo "FAIL: $PING not built"; exit 1; }
out=$("$PING" -n 2000 --json) || { echo "FAIL: allm-ping exited $?"; exit 1; }
echo "$out"
if command -v python3 >/dev/null; then
	python3 - "$out" <<'PY' || exit 1
import json, sys
o = json.loads(sys.argv[1])
assert set(o) == {"ring_spin", "ring_sleep", "uds"}, o
for k, v in o.items():
    assert v["n"] == 2000, (k, v)
    assert 0 < v["p50"] <= v["p90"] <= v["p99"], (k, v)
    assert v["mean"] > 0, (k, v)
PY
else
	for k in ring_spin ring_sleep uds; do
		echo "$out" | grep -q "\"$k\": {\"p50\": [0-9.]*, \"p90\": [0-9.]*, \"p99\": [0-9.]*, \"mean\": [0-9.]*, \"n\": 2000}" ||
			{ echo "FAIL: no $k object"; exit 1; }
	done
fi
txt=$("$PING" -n 200) || { echo "FAIL: allm-ping (text) exited $?"; exit 1; }
for k in ring_spin ring_sleep uds; do
	echo "$txt" | grep -q "^$k " || { echo "FAIL: text output lacks $k: $txt"; exit 1; }
done
"$PING" -n 0 >/dev/null 2>&1 && { echo "FAIL: -n 0 accepted"; exit 1; }
echo "cli-allm-ping: all checks passed"
