#!/usr/bin/env bash
# Description: every allmctl command round-trips with a real allm-engined (--dummy small, slow enough to hold requests in flight): status has the DESIGN §9 keys and types; set applies each key (status shows it) and rejects bad values and mixes all-or-nothing (exit 1, nothing changed); usage errors exit 2 and a missing engine 3; requests lists live requests; cancel ends one (its client sees a cancelled FINAL); drain refuses new work, finishes what is in flight and keeps the engine up, resume re-admits; reset-stats zeroes counters; calibrate refuses a busy engine and works on an idle one (progress on topic calibrate); shutdown exits 0 leaving no sockets.
. "$(dirname "$0")/ctl-common.sh"

N=cmds
C() { "$CTL" --name $N "$@"; }
ctl_start $N --dummy small --profile "$tmp/profile-small.json"

# --- status ----------------------------------------------------------------------
C status --json >"$tmp/s0.json" || fail "status --json exit $?"
python3 - "$tmp/s0.json" <<'PY' && ok "status --json: DESIGN §9 keys with PROTOCOL.md types" || fail "status keys/types"
import json, sys
d = json.load(open(sys.argv[1]))
num = (int, float)
want = {"model": str, "device": str, "name": str, "pid": int, "uptime_s": num, "state": str,
        "policy.preempt": str, "policy.sched": str, "queues.waiting": int, "queues.running": int,
        "queues.swapped": int, "blocks.gpu.total": int, "blocks.gpu.used": int,
        "blocks.cpu.total": int, "blocks.cpu.used": int, "preemptions.swap": int,
        "preemptions.recompute": int, "throughput_tok_s": num, "predictor_mape.swap": (float, type(None)),
        "predictor_mape.recompute": (float, type(None)), "limits.max_num_seqs": int,
        "limits.max_num_batched_tokens": int, "clients": int, "block_size": int,
        "ttft_ms.p50": (float, type(None)), "e2e_ms.p99": (float, type(None)), "client_list": list,
        "top.waiting": list, "tokens.generated": int, "requests.finished": int}
bad = []
for path, t in want.items():
    x = d
    for k in path.split("."):
        x = x[k] if isinstance(x, dict) and k in x else KeyError
    if x is KeyError or not isinstance(x, t) or isinstance(x, bool):
        bad.append(f"{path}={x!r}")
if d["state"] != "serving" or d["name"] != "cmds":
    bad.append("state/name")
if bad:
    print("bad:", bad); sys.exit(1)
PY
C status | grep -q "^queues .*waiting 0, running 0, swapped 0" && ok "status: a readable block" ||
	fail "status human output: $(C status)"

# --- set: each key, then bad values (nothing changes) ----------------------------
C set gpu_blocks=300 cpu_blocks=100 max_num_seqs=7 max_num_batched_tokens=999 preempt=recompute sched=fcfs \
	>"$tmp/set.out" || fail "set all keys: exit $?"
grep -Eq '^gpu_blocks: [0-9]+ -> 300$' "$tmp/set.out" && grep -q '^preempt: adaptive -> recompute$' "$tmp/set.out" &&
	ok "set prints 'key: old -> new'" || fail "set output: $(cat "$tmp/set.out")"
C status --json >"$tmp/s1.json"
got=$(for k in blocks.gpu.total blocks.cpu.total limits.max_num_seqs limits.max_num_batched_tokens policy.preempt policy.sched; do
	ctl_json "$tmp/s1.json" $k; done | tr '\n' ' ')
[ "$got" = "300 100 7 999 recompute fcfs " ] && ok "status shows every new value ($got)" || fail "after set: $got"
# max_wait_factor is a number like --max-wait-factor's (1.5 was refused: set took an integer)
C set chunked_prefill=off max_wait_factor=1.5 admit_overcommit=1.5 admit_lookahead=3 >/dev/null ||
	fail "set chunked_prefill/max_wait_factor=1.5/admit_overcommit/admit_lookahead"
C status --json >"$tmp/s2.json"
got=$(for k in policy.chunked_prefill policy.max_wait_factor policy.admit_overcommit policy.admit_lookahead steps.decode wasted_prefill_tokens; do
	ctl_json "$tmp/s2.json" $k; done | tr '\n' ' ')
case "$got" in "False 1.5 1.5 3 "[0-9]*" "[0-9]*" ") ok "set chunked_prefill=off max_wait_factor=1.5 admit_overcommit=1.5 admit_lookahead=3; status has steps and wasted work ($got)" ;;
*) fail "chunked/aging settings or step counts in status: $got" ;; esac
C status | grep -Eq '^steps +decode [0-9]+, mixed [0-9]+, prefill [0-9]+ \(chunked prefill off\)' &&
	ok "status: steps by kind" || fail "status text lacks steps: $(C status | grep steps)"
C set chunked_prefill=on max_wait_factor=0 admit_overcommit=0 admit_lookahead=8 >/dev/null || fail "set chunked_prefill=on"
C --json set sched=fair >"$tmp/set.json" && [ "$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["changed"][0]; print(c["key"],c["old"],c["new"])' "$tmp/set.json")" = "sched fcfs fair" ] &&
	ok "set --json: changed [{key, old, new}]" || fail "set --json: $(cat "$tmp/set.json")"
snap() { C status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["blocks"]["gpu"]["total"], d["blocks"]["cpu"]["total"], d["limits"], d["policy"])'; }
before=$(snap)
for bad in gpu_blocks=0 gpu_blocks=-1 gpu_blocks=abc gpu_blocks=99999999999 cpu_blocks=-5 max_num_seqs=0 \
	max_num_batched_tokens=x preempt=foo sched=lifo foo=1 "gpu_blocks=64 preempt=foo" "max_num_seqs=3 gpu_blocks=0" \
	"preempt=swap preempt=recompute" chunked_prefill=maybe max_wait_factor=-1 max_wait_factor=0.5 \
	admit_overcommit=0.05 admit_overcommit=abc block_size=32; do
	# shellcheck disable=SC2086
	C set $bad >/dev/null 2>"$tmp/bad.err"
	rc=$?
	[ $rc -eq 1 ] && [ -s "$tmp/bad.err" ] || fail "set $bad: exit $rc (want 1), stderr '$(cat "$tmp/bad.err")'"
done
after=$(snap)
[ "$before" = "$after" ] && ok "19 invalid sets refused with exit 1, nothing applied" ||
	fail "an invalid set changed something: $before -> $after"
"$CTL" complete set >"$tmp/complete.txt" && grep -qx 'max_wait_factor=' "$tmp/complete.txt" &&
	grep -qx 'preempt=swap' "$tmp/complete.txt" && "$CTL" complete | grep -qx set &&
	ok "complete: commands and set's keys and words (the shell completion)" || fail "complete: $(cat "$tmp/complete.txt")"
C set gpu_blocks >/dev/null 2>&1; rc1=$?
C frobnicate >/dev/null 2>&1; rc2=$?
C cancel >/dev/null 2>&1; rc3=$?
[ $rc1 = 2 ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] && ok "usage errors exit 2" || fail "usage exits $rc1 $rc2 $rc3"
t0=$(date +%s%N)
"$CTL" --name nosuch --timeout 300 status 2>"$tmp/none.err"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 3 ] && grep -q "no engine answered on ipc://.*/nosuch.ctl within 300 ms" "$tmp/none.err" &&
	ok "no engine: exit 3 after ${ms} ms with a clear message" || fail "no engine: exit $rc: $(cat "$tmp/none.err")"

# --- requests, cancel -------------------------------------------------------------
C set max_num_seqs=1 gpu_blocks=400 >/dev/null || fail "set max_num_seqs=1"
# 1000 tokens each (the model's context is 1024), one at a time (max_num_seqs=1):
# about 0.7 s each here, so all three are live for the first one's run
gen() { "$ALLM" --name $N generate --prompt-ids "$1" --max-tokens 1000 --ignore-eos --temperature 0 >/dev/null 2>"$tmp/g$2.err"; echo $? >"$tmp/g$2.rc"; }
gen 1,2,3 a & BG_PIDS+=($!)
gen 4,5,6 b & BG_PIDS+=($!)
gen 7,8,9 c & BG_PIDS+=($!)
# The table and the JSON are read back to back in one cheap poll (no python): a
# table read after the JSON checks below once found the waiting ones already run.
for i in $(seq 200); do
	C requests >"$tmp/rq.txt" 2>&1 && [ "$(grep -c ' waiting ' "$tmp/rq.txt")" = 2 ] &&
		C requests --json >"$tmp/rq.json" 2>/dev/null && [ "$(grep -c '"state": "waiting"' "$tmp/rq.json")" = 2 ] && break
	sleep 0.02
done
# the last waiting one is cancelled at once, before the checks take their time
victim=$(awk '$3 == "waiting" { id = $1 } END { print id }' "$tmp/rq.txt")
C cancel "$victim" >"$tmp/cancel.out" 2>&1 && grep -q "cancelled request $victim" "$tmp/cancel.out" ||
	fail "cancel $victim: $(cat "$tmp/cancel.out")"
python3 - "$tmp/rq.json" <<'PY' && ok "requests lists the 3 live requests (1 running, 2 waiting)" || fail "requests: $(cat "$tmp/rq.json")"
import json, sys
r = json.load(open(sys.argv[1]))["requests"]
keys = {"id", "client", "tag", "state", "prompt_tokens", "generated", "length", "priority",
        "blocks_gpu", "blocks_cpu", "preemptions", "age_s"}
assert len(r) == 3 and all(keys <= set(x) for x in r), r
assert sorted(x["state"] for x in r) == ["running", "waiting", "waiting"], r
assert all(x["prompt_tokens"] == 3 and x["client"] > 0 for x in r), r
PY
head -n 1 "$tmp/rq.txt" | grep -q "ID *CLIENT *STATE *PROMPT" && grep -Eq "^ +[0-9]+ +[0-9]+ waiting +3 " "$tmp/rq.txt" &&
	ok "requests: a readable table" || fail "requests table: $(cat "$tmp/rq.txt")"
C cancel 987654 2>"$tmp/c2.err"; rc=$?
[ $rc = 1 ] && grep -q "no request 987654" "$tmp/c2.err" && ok "cancel of an unknown id: exit 1, 'no request'" ||
	fail "cancel unknown: exit $rc $(cat "$tmp/c2.err")"

# --- drain, resume ----------------------------------------------------------------
C --json drain --no-wait >"$tmp/dr.json" || fail "drain --no-wait"
left=$(ctl_json "$tmp/dr.json" in_flight)
st=$(C status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
# the state is read after the drain reply: requests may have finished in between
[ "$st" = draining ] || { [ "$st" = drained ] && [ "$(C status --json | python3 -c 'import json,sys; q=json.load(sys.stdin)["queues"]; print(sum(q.values()))')" = 0 ]; } &&
	ok "drain --no-wait: $left in flight, state: $st" || fail "state after drain: $st ($left in flight)"
"$ALLM" --name $N generate --prompt-ids 1,2 --max-tokens 4 >/dev/null 2>"$tmp/late.err"; rc=$?
[ $rc = 1 ] && grep -q "draining" "$tmp/late.err" && ok "a new request while draining is refused: $(cat "$tmp/late.err")" ||
	fail "new request while draining: exit $rc $(cat "$tmp/late.err")"
C drain 2>"$tmp/drain.err" >"$tmp/drain.out" || fail "drain (waiting): exit $?"
grep -q "^drained" "$tmp/drain.out" && ok "drain waited until nothing was in flight ($(grep -c draining: "$tmp/drain.err") progress lines)" ||
	fail "drain: $(cat "$tmp/drain.out" "$tmp/drain.err")"
wait "${BG_PIDS[@]}" 2>/dev/null
BG_PIDS=()
cancelled=0 finished=0
for k in a b c; do
	if grep -q "(cancelled)" "$tmp/g$k.err"; then cancelled=$((cancelled + 1)); fi
	if grep -q "1000 generated tokens (length)" "$tmp/g$k.err" && [ "$(cat "$tmp/g$k.rc")" = 0 ]; then finished=$((finished + 1)); fi
done
[ $cancelled = 1 ] && ok "the cancelled request's client got a cancelled FINAL" || fail "cancelled FINALs: $cancelled"
[ $finished = 2 ] && ok "the 2 other requests finished normally (during the drain: $left)" ||
	fail "finished during drain: $finished; $(cat "$tmp"/g?.err)"
daemon_alive && [ "$(C status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = drained ] &&
	ok "engine up, state: drained" || fail "after drain: engine down or state wrong"
C resume >/dev/null || fail "resume"
"$ALLM" --name $N generate --prompt-ids 1,2 --max-tokens 4 --temperature 0 >/dev/null 2>&1 &&
	ok "resume re-admits new requests" || fail "a request after resume failed"

# --- reset-stats ------------------------------------------------------------------
C status --json >"$tmp/s2.json"
[ "$(ctl_json "$tmp/s2.json" requests.finished)" -ge 3 ] && [ "$(ctl_json "$tmp/s2.json" tokens.generated)" -gt 0 ] ||
	fail "counters before reset-stats: $(ctl_json "$tmp/s2.json" requests)"
C reset-stats >/dev/null || fail "reset-stats"
C status --json >"$tmp/s3.json"
z=$(for k in requests.finished tokens.generated tokens.prompt preemptions.swap ttft_ms.p50 mean_weighted_turnaround; do
	ctl_json "$tmp/s3.json" $k; done | tr '\n' ' ')
[ "$z" = "0 0 0 0 None None " ] && ok "reset-stats zeroes counters and latency windows" || fail "after reset-stats: $z"

# --- calibrate --------------------------------------------------------------------
# three requests one at a time (max_num_seqs=1): busy for about 2 s, not the 0.7 s
# of one that a slow allmctl start could miss
for k in 1 2 3; do
	"$ALLM" --name $N generate --prompt-ids 1,2,$k --max-tokens 1000 --ignore-eos >/dev/null 2>&1 & BG_PIDS+=($!)
done
for i in $(seq 200); do
	C requests >"$tmp/busy.txt" 2>/dev/null && [ "$(grep -c ' waiting ' "$tmp/busy.txt")" = 2 ] && break
	sleep 0.02
done
C calibrate 2>"$tmp/cal.err" >/dev/null; rc=$?
[ $rc = 1 ] && grep -Eq "engine busy: [1-3] requests in flight \(drain first\)" "$tmp/cal.err" &&
	ok "calibrate on a busy engine: refused" || fail "calibrate busy: exit $rc $(cat "$tmp/cal.err")"
for id in $(C requests --json | python3 -c 'import json,sys; print(*[r["id"] for r in json.load(sys.stdin)["requests"]])'); do
	C cancel "$id" >/dev/null 2>&1 # it may have finished meanwhile
done
# a small grid: calibration times prefills up to max_num_batched_tokens
C set max_num_batched_tokens=64 >/dev/null || fail "set max_num_batched_tokens=64"
wait "${BG_PIDS[@]}" 2>/dev/null
BG_PIDS=()
C watch calibrate --count 2 --duration 30 >"$tmp/cw.out" 2>"$tmp/cw.err" & wp=$!
BG_PIDS+=($wp)
for i in $(seq 100); do grep -q watching "$tmp/cw.err" && break; sleep 0.05; done
C --json calibrate >"$tmp/cal.json" || fail "calibrate on an idle engine: exit $?"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["swap"]["out_bytes_per_s"] > 0 and d["recompute"]["s_per_token"] is not None' "$tmp/cal.json" &&
	ok "calibrate: fitted swap and recompute summaries" || fail "calibrate result: $(cat "$tmp/cal.json")"
wait $wp
grep -q '^calibrate {"phase":' "$tmp/cw.out" && ok "calibration progress published on topic calibrate" ||
	fail "no calibrate telemetry: $(cat "$tmp/cw.out" "$tmp/cw.err")"

# --- shutdown ---------------------------------------------------------------------
C shutdown >/dev/null || fail "shutdown: exit $?"
for i in $(seq 200); do daemon_alive || break; sleep 0.05; done
daemon_alive && fail "still running 10 s after shutdown"
wait "$DPID"; rc=$?
[ $rc = 0 ] && ok "shutdown: the engine exited 0" || fail "shutdown: exit status $rc"
daemon_check_clean "shutdown"
ctl_check_clean "shutdown"
DPID=
finish
