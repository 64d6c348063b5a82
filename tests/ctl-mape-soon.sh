#!/usr/bin/env bash
# Description: the dashboard's predictor error appears from ordinary traffic (issue 53): a fresh allm-engined on stories260K with no profile (it serves on a first estimate) answers 8 requests one after another, nothing preempted; `allmctl status --json` then shows a number for predictor_mape.recompute (the step model's rolling error, learned from those prefill steps, not from preemptions) (more than ALLM_PRED_MAPE_MIN = 5 of them); before any request it is null.
. "$(dirname "$0")/ctl-common.sh"

N=soon
C() { "$CTL" --name $N "$@"; }
ctl_start $N --model "$M" --profile "$tmp/fresh-profile.json"

C status --json >"$tmp/s0.json" || fail "status --json exit $?"
[ "$(ctl_json "$tmp/s0.json" predictor_mape.recompute)" = None ] && ok "no MAPE before any step" ||
	fail "a MAPE before any step: $(ctl_json "$tmp/s0.json" predictor_mape)"

# one at a time: each request is its own prefill step (a burst would be one)
for i in 0 1 2 3 4 5 6 7; do
	"$ALLM" generate --name $N --prompt "${PROMPTS[$((i % 6))]} $i" --max-tokens 8 --temperature 0 \
		>/dev/null 2>"$tmp/g$i.err" || fail "request $i: $(cat "$tmp/g$i.err")"
done

C status --json >"$tmp/s1.json" || fail "status --json exit $?"
python3 - "$tmp/s1.json" <<'PY' && ok "status shows the step model's MAPE after ordinary traffic" ||
import json, sys
d = json.load(open(sys.argv[1]))
m = d["predictor_mape"]["recompute"]
steps = d["steps"]["prefill"] + d["steps"].get("mixed", 0)
bad = []
if d["preemptions"]["swap"] or d["preemptions"]["recompute"]:
    bad.append("preempted: %r" % d["preemptions"])
if steps < 5:
    bad.append("only %d prefill steps" % steps)
if not isinstance(m, float) or not m >= 0:
    bad.append("predictor_mape.recompute = %r after %d prefill steps" % (m, steps))
if bad:
    print("bad:", bad)
    sys.exit(1)
PY
	fail "status after 8 requests: $(cat "$tmp/s1.json")"
C shutdown >/dev/null 2>&1
wait "$DPID" 2>/dev/null
DPID=
finish
