#!/usr/bin/env bash
# Description: an engine error keeps its cause up to the client: a queued request that no longer fits after `allmctl set gpu_blocks` shrank the pool ends with the engine's -E2BIG and its words ("needs N KV blocks") in the FINAL entry (allm prints strerror: "Argument list too long"), not the -EIO every engine error used to become; the engine serves on.
. "$(dirname "$0")/ctl-common.sh"

N=errno
# --dummy small with one sequence at a time: a 1000-token request holds the slot
# for about a second here, so the second one waits in the queue
ctl_start $N --dummy small --max-num-seqs 1 --profile "$tmp/profile-small.json"
gen() { "$ALLM" --name $N generate --prompt-ids "$1" --max-tokens 1000 --ignore-eos --temperature 0 >/dev/null 2>"$tmp/g$2.err"; echo $? >"$tmp/g$2.rc"; }
gen 1,2,3 a & BG_PIDS+=($!)
for i in $(seq 200); do
	[ "$("$CTL" --name $N status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["queues"]["running"])')" = 1 ] && break
	sleep 0.02
done
gen 4,5,6 b & BG_PIDS+=($!)
for i in $(seq 200); do
	[ "$("$CTL" --name $N status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["queues"]["waiting"])')" = 1 ] && break
	sleep 0.02
done
# 8 blocks of 16 tokens hold 128: neither 1003-token request fits any more
"$CTL" --name $N set gpu_blocks=8 >/dev/null || fail "set gpu_blocks=8"
wait "${BG_PIDS[@]}"
BG_PIDS=()
[ "$(cat "$tmp/gb.rc")" != 0 ] && grep -q "KV blocks" "$tmp/gb.err" && grep -q "Argument list too long" "$tmp/gb.err" &&
	ok "the queued request's FINAL carries the engine's cause: $(cat "$tmp/gb.err")" ||
	fail "the cause was lost: rc $(cat "$tmp/gb.rc"), $(cat "$tmp/gb.err")"
! grep -q "Input/output error" "$tmp/ga.err" "$tmp/gb.err" && ok "no engine error became -EIO" ||
	fail "an -EIO: $(cat "$tmp/ga.err" "$tmp/gb.err")"
"$CTL" --name $N set gpu_blocks=200 >/dev/null || fail "set gpu_blocks=200"
"$ALLM" --name $N generate --prompt-ids 7,8,9 --max-tokens 4 --temperature 0 >/dev/null 2>"$tmp/g3.err" &&
	ok "the engine serves on" || fail "after the errors: $(cat "$tmp/g3.err")"
daemon_stop "after the errors"
finish
