#!/usr/bin/env bash
# Description: allm against a real allm-engined on stories260K gives exactly allm-run's greedy ids (text prompt and --prompt-ids, 60 tokens, with penalties too; memfd and --posix-shm), the same log-probabilities,, the text of a continuation ("Once upon a" + " time") as allm-run prints it, and the daemon then stops with exit 0, all KV blocks free, no socket and no /dev/shm objects left.
. "$(dirname "$0")/daemon-common.sh"

daemon_start ids

check_same() {
	local what=$1
	shift
	local want got
	want=$("$RUN" --model "$M" --device cpu "$@" --max-tokens 60 --temperature 0 --ids 2>"$tmp/run.err" |
		grep '^generated:')
	got=$("$ALLM" --name ids generate "$@" --max-tokens 60 --temperature 0 --ids $EXTRA 2>"$tmp/allm.err" |
		grep '^generated:')
	if [ -z "$want" ]; then
		fail "$what: allm-run printed no ids: $(tail -n 3 "$tmp/run.err")"
	elif [ "$got" = "$want" ]; then
		ok "$what: same ids as allm-run ($(echo "$want" | wc -w) words)"
	else
		fail "$what: allm and allm-run differ
  allm-run: $want
  allm:     $got  $(tail -n 2 "$tmp/allm.err")"
	fi
}

EXTRA=
check_same "text prompt" --prompt "Once upon a time"
check_same "prompt ids" --prompt-ids 1,403,407,261,378
# the penalties travel in the submission entry: the same ids as in-process
check_same "penalties" --prompt "Once upon a time" --repetition-penalty 1.3 --frequency-penalty 0.5 \
	--presence-penalty -0.2
# log-probabilities travel in their own entries: the same values as in-process
"$RUN" --model "$M" --device cpu --prompt "Once upon a time" --max-tokens 30 --temperature 0 --logprobs 3 --json \
	2>/dev/null >"$tmp/lp-run.json"
"$ALLM" --name ids generate --prompt "Once upon a time" --max-tokens 30 --temperature 0 --logprobs 3 --json \
	2>/dev/null >"$tmp/lp-allm.json"
if python3 - "$tmp/lp-run.json" "$tmp/lp-allm.json" <<'PY'; then
import json, sys
a, b = (json.load(open(f))["logprobs"] for f in sys.argv[1:3])
near = lambda x, y: abs(x - y) <= 1e-6 * max(1, abs(y))
ok = len(a) == len(b) == 30 and all(
    x["id"] == y["id"] and near(x["logprob"], y["logprob"]) and len(x["top"]) == len(y["top"]) == 3 and
    all(p[0] == q[0] and near(p[1], q[1]) for p, q in zip(x["top"], y["top"])) for x, y in zip(a, b))
sys.exit(0 if ok else 1)
PY
	ok "logprobs: allm --logprobs 3 gives allm-run's values (30 tokens, 3 alternatives each)"
else
	fail "logprobs differ between allm and allm-run: $(head -c 300 "$tmp/lp-allm.json")"
fi
EXTRA=--posix-shm
check_same "text prompt, posix shm" --prompt "Once upon a time"
check_same "prompt ids, posix shm" --prompt-ids 1,403,407,261,378

# text events continue the prompt's text, as allm-run prints it
want=$("$RUN" --model "$M" --device cpu --prompt "Once upon a" --max-tokens 30 --temperature 0 2>/dev/null)
got=$("$ALLM" --name ids generate --prompt "Once upon a" --max-tokens 30 --temperature 0 2>/dev/null)
[ -n "$want" ] && [ "$got" = "$want" ] && [ "${got:0:5}" = " time" ] &&
	ok "text after 'Once upon a': same as allm-run, starts ' time'" ||
	fail "text after 'Once upon a': allm '${got:0:40}' vs allm-run '${want:0:40}'"

daemon_stop "ids"
finish
