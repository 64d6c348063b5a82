#!/usr/bin/env bash
# Issue 53: how soon the dashboard shows the predictors' error on a real model.
# Starts allm-engined on SmolLM2 with no profile (it serves at once on a first
# estimate, as a new model does), sends it Poisson traffic with allm-bench (RATE
# requests/s, pools small enough to preempt), and polls `allmctl --json status` every
# 0.5 s: the seconds from ready until the step and copy models' rolling MAPE
# (predictor_mape) and the decisions' (decision_mape) first show a number, and the
# numbers then. Run it under the bench lock: flock /work/.bench.lock bash bench/cost-model-live.sh
# Environment: N (40), RATE (4), SECONDS_MAX (60).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/build
N=${N:-40}
RATE=${RATE:-4}
SECONDS_MAX=${SECONDS_MAX:-60}
MODEL=$(bash "$ROOT/tools/models.sh" smollm2)
tmp=$(mktemp -d)
export ALLM_RUNTIME_DIR=$tmp/run
mkdir -p "$ALLM_RUNTIME_DIR"
cleanup() {
	[ -n "${BPID:-}" ] && kill "$BPID" 2>/dev/null || true
	[ -n "${EPID:-}" ] && kill "$EPID" 2>/dev/null && wait "$EPID" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
"$B/engined/allm-engined" --name live --device cpu --model "$MODEL" --gpu-blocks 48 --cpu-blocks 24 \
	--profile "$tmp/profile.json" >"$tmp/engine.log" 2>&1 &
EPID=$!
for _ in $(seq 1200); do
	[ -S "$ALLM_RUNTIME_DIR/live.ctl" ] && [ -S "$ALLM_RUNTIME_DIR/live.sock" ] && break
	sleep 0.05
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); engine: $(grep -m1 predictors "$tmp/engine.log" || true)"
t0=$(date +%s.%N)
"$B/tools/allm-bench" --name live --workload chatbot -n "$N" --rate "$RATE" --max-output 64 --ignore-eos \
	--json --no-progress >"$tmp/bench.json" 2>/dev/null &
BPID=$!
python3 - "$B/ctl/allmctl" "$t0" "$SECONDS_MAX" "$BPID" <<'PY'
import json, subprocess, sys, time, os
ctl, t0, tmax, bpid = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
first = {}
keys = [("predictor_mape", "recompute"), ("predictor_mape", "swap"), ("decision_mape", "recompute"),
        ("decision_mape", "swap")]
print("| s since traffic | prefill steps | step model: prefill MAPE % | copy MAPE % | decisions measured "
      "| decision MAPE recompute % | swap % |")
print("|---|---|---|---|---|---|---|")
last = -10
while time.time() - t0 < tmax:
    p = subprocess.run([ctl, "--name", "live", "--json", "status"], capture_output=True, text=True)
    if p.returncode:
        break
    s = json.loads(p.stdout)
    t = time.time() - t0
    for k in keys:
        v = s.get(k[0], {}).get(k[1])
        if v is not None and k not in first:
            first[k] = (t, v)
    steps = s.get("steps", {})
    if t - last >= 2:
        last = t
        f = lambda v: "-" if v is None else "%.1f" % v
        print("| %.1f | %d | %s | %s | %d | %s | %s |" % (
            t, steps.get("prefill", 0) + steps.get("mixed", 0), f(s["predictor_mape"].get("recompute")),
            f(s["predictor_mape"].get("swap")), s.get("decision_mape", {}).get("measured", 0),
            f(s.get("decision_mape", {}).get("recompute")), f(s.get("decision_mape", {}).get("swap"))))
    try:
        os.kill(bpid, 0)
    except OSError:
        break
    time.sleep(0.5)
print()
for k in keys:
    print("%s.%s first shown after %s" % (k[0], k[1], "%.1f s (%.1f %%)" % first[k] if k in first else "never"))
PY
