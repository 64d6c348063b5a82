#!/usr/bin/env bash
# One HTTP user against the others (issue 37 items 1 and 2): allm-engined on
# stories260K (CPU) behind allm-gateway; a heavy user (127.0.0.1) loads it while
# three other users (127.0.0.2-4) send streamed 400-token requests, whose time to
# first token (TTFT) and status are measured (bench/gateway-users.py). Scenarios:
#   idle   the three users alone
#   small  heavy: 4 x (n 128, max_tokens 480), non-streamed, no log-probabilities
#   huge   heavy: the same with logprobs 10 (17 MB of JSON an answer)
#   flood  heavy: 40 x (n 128, max_tokens 480) at once
# "small" carries the engine work of "huge" without its answers, so huge vs small is
# what the size of the answers costs the others (target: TTFT p99 within +-20 %).
# The gateway is started afresh for each scenario and its peak RSS (VmHWM) read at
# the end. With a second build directory the runs alternate between the two builds
# (before / after), REPS times each, under flock /work/.bench.lock when it exists.
# Usage: bench/gateway-users.sh [BUILD_DIR [BASE_BUILD_DIR]]   REPS=3 SCENARIOS="idle small huge flood"
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILDS=("$(cd "${1:-$HERE/../build}" && pwd)")
[ -n "${2:-}" ] && BUILDS+=("$(cd "$2" && pwd)")
REPS=${REPS:-3}
SCENARIOS=${SCENARIOS:-idle small huge flood}
SECONDS_PROBE=${SECONDS_PROBE:-20}
M=${MODEL_DIR:-$(cd "$HERE/../data/models/stories260K" && pwd)}
for B in "${BUILDS[@]}"; do
	for b in "$B/engined/allm-engined" "$B/engined/allm-gateway"; do
		[ -x "$b" ] || { echo "$b not built" >&2; exit 1; }
	done
done
if [ -z "${GW_USERS_LOCKED:-}" ] && [ -e /work/.bench.lock ]; then
	GW_USERS_LOCKED=1 exec flock /work/.bench.lock "$0" "$@"
fi
. "$HERE/gateway-common.sh"
gw_bench_tmp allm-gw-users
RES=$HERE/results/cpu
mkdir -p "$RES"
out=$RES/gateway-users.jsonl
: >"$out"

stop() { # stop PID
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null || true
}

for r in $(seq "$REPS"); do
	for k in "${!BUILDS[@]}"; do
		B=${BUILDS[$k]}
		label=$([ "$k" = 0 ] && echo after || echo before)
		[ ${#BUILDS[@]} = 1 ] && label=run
		gw_bench_engine "$B" gwusers "$tmp/profile-$k.json"
		for s in $SCENARIOS; do
			gw_bench_gateway "$B" gwusers
			failed0=$(grep -c "stopped draining" "$tmp/engine.log" || true)
			res=$(python3 "$HERE/gateway-users.py" "$port" "$s" "$SECONDS_PROBE")
			hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$gpid/status")
			failed=$(($(grep -c "stopped draining" "$tmp/engine.log" || true) - failed0))
			stop "$gpid"
			gpid=
			echo "$res" | python3 -c '
import json, sys
d = json.load(sys.stdin)
d.update(build=sys.argv[1], rep=int(sys.argv[2]), gateway_peak_rss_mib=round(int(sys.argv[3]) / 1024, 1),
         engine_failed_the_gateway=int(sys.argv[4]))
print(json.dumps(d))' "$label" "$r" "$hwm" "$failed" | tee -a "$out"
		done
		stop "$epid"
		epid=
	done
done

# medians over the reps, per build and scenario
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(v):
    v = [x for x in v if x is not None]
    return round(statistics.median(v), 1) if v else None
def rng(v):
    v = [x for x in v if x is not None]
    return "%s..%s" % (min(v), max(v)) if v else "-"
print("%-7s %-6s %5s %-26s %-24s %-22s %-8s %-18s %s" % ("build", "scen.", "reps", "others: TTFT p50 ms (range)",
      "others: TTFT p99 (range)", "others: statuses", "whole ok", "heavy: statuses", "gateway RSS MiB"))
for b in sorted({r["build"] for r in rows}):
    for s in ["idle", "small", "huge", "flood"]:
        g = [r for r in rows if r["build"] == b and r["scenario"] == s]
        if not g:
            continue
        st, hs = {}, {}
        for r in g:
            for k, v in r["others"]["statuses"].items():
                st[k] = st.get(k, 0) + v
            for k, v in r["heavy"]["statuses"].items():
                hs[k] = hs.get(k, 0) + v
        p50 = [r["others"]["ttft_ms"]["p50"] for r in g]
        p99 = [r["others"]["ttft_ms"]["p99"] for r in g]
        whole = "%d/%d" % (sum(r["others"]["whole_400_token_ok"] for r in g), sum(r["others"]["whole"] for r in g))
        print("%-7s %-6s %5d %-26s %-24s %-22s %-8s %-18s %s (%s)" % (
            b, s, len(g), "%s (%s)" % (med(p50), rng(p50)), "%s (%s)" % (med(p99), rng(p99)),
            json.dumps(st, sort_keys=True), whole, json.dumps(hs, sort_keys=True),
            med([r["gateway_peak_rss_mib"] for r in g]), rng([r["gateway_peak_rss_mib"] for r in g])))
PY
echo "rows: $out"
