#!/usr/bin/env bash
# Description: live retuning through allmctl in the middle of a 100-request greedy run on stories260K (4 ring clients x 25, 120 tokens each): lowering gpu_blocks makes preemptions appear in `decision` telemetry (allmctl watch), switching preempt swap -> recompute (a second wave of 40 requests, the pool shrunk under it) changes the kind of every decision made after the switch, and every request still completes with exactly the ids of an undisturbed allm-run.
. "$(dirname "$0")/ctl-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
[ -x "$LOAD" ] || { echo "FAIL: $LOAD not built"; exit 1; }

N=live
C() { "$CTL" --name $N "$@"; }
expected_ids 120 1 "${PROMPTS[@]}" >"$tmp/expect" || exit 1
daemon_start $N
C set preempt=swap >/dev/null || fail "set preempt=swap"

# decisions and stats in one ordered stream: a decision after the first stats
# message that shows the new policy was made after the switch
"$CTL" --name $N watch decision stats >"$tmp/w.out" 2>"$tmp/w.err" &
WP=$!
BG_PIDS+=($WP)
for i in $(seq 200); do grep -q watching "$tmp/w.err" && break; sleep 0.05; done
grep -q watching "$tmp/w.err" || fail "the watcher never saw telemetry: $(cat "$tmp/w.err")"

pids=()
for k in 0 1 2 3; do
	"$LOAD" --name $N --expect "$tmp/expect" --client $k --requests 25 --inflight 5 \
		--max-tokens 120 --ignore-eos >"$tmp/c$k.out" 2>"$tmp/c$k.err" &
	pids+=($!)
	BG_PIDS+=($!)
done
# 30 blocks of 16 tokens: about three of the 20 requests in flight fit. The shrink
# lands once the running requests hold well over 30 device blocks (the GPU column of
# allmctl requests), so it must preempt: set on first streaming, a fast engine beside a
# slow client once had too little in flight by then and made no swap at all.
for i in $(seq 400); do
	C requests 2>/dev/null | awk 'NR > 1 { b += $8 } END { exit !(b > 45) }' && break
	sleep 0.02
done
C set gpu_blocks=30 >"$tmp/set1.out" || fail "set gpu_blocks=30 mid-run: exit $?"
for i in $(seq 400); do grep -q '^decision .*"choice":"swap"' "$tmp/w.out" && break; sleep 0.05; done
grep -q '^decision .*"choice":"swap"' "$tmp/w.out" && ok "lowering gpu_blocks mid-run: swap decisions in telemetry" ||
	fail "no swap decision within 20 s of set gpu_blocks=30"
C set preempt=recompute >/dev/null || fail "set preempt=recompute mid-run"
# decisions count as after the switch once a stats message shows it (published
# about once a second): the second wave starts after that
for i in $(seq 200); do grep -q '^stats .*"preempt":"recompute"' "$tmp/w.out" && break; sleep 0.025; done
grep -q '^stats .*"preempt":"recompute"' "$tmp/w.out" || fail "no stats message showed preempt=recompute within 5 s"
# a second wave under recompute: what is left of the first may fit by now (on a
# quiet machine the whole first wave takes about a second), and the switch must
# be seen changing decisions that are certainly made
for k in 0 1 2 3; do
	"$LOAD" --name $N --expect "$tmp/expect" --client $k --requests 10 --inflight 5 \
		--max-tokens 120 --ignore-eos >"$tmp/d$k.out" 2>"$tmp/d$k.err" &
	pids+=($!)
	BG_PIDS+=($!)
done
# fair admission fits the second wave into 30 blocks without evicting anyone;
# a shrink under it, to room for about one request, preempts at once
for i in $(seq 400); do
	C requests 2>/dev/null | awk 'NR > 1 { b += $8 } END { exit !(b > 16) }' && break
	sleep 0.02
done
C set gpu_blocks=12 >/dev/null || fail "set gpu_blocks=12 mid-run"
bad=0
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || { bad=$((bad + 1)); head -n 6 "$tmp/$([ "$i" -lt 4 ] && echo c$i || echo d$((i - 4))).err"; }
done
[ $bad -eq 0 ] && ok "all 140 requests (100 before the switch, 40 after) completed with exactly the undisturbed ids" ||
	fail "$bad clients saw a wrong, failed or cancelled request"
# every preemption is published as one decision: wait until the watcher has read
# as many as status counts (a starved watcher lagged the 0.3 s once given here)
C status --json >"$tmp/s.json"
npre=$(( $(ctl_json "$tmp/s.json" preemptions.swap) + $(ctl_json "$tmp/s.json" preemptions.recompute) ))
for i in $(seq 200); do
	[ "$(grep -c '^decision .*"measured":false' "$tmp/w.out")" -ge "$npre" ] && break
	sleep 0.05
done
sleep 0.3 # the last stats
kill -INT $WP
wait $WP
python3 - "$tmp/w.out" <<'PY' >"$tmp/an.out" 2>&1 && ok "$(cat "$tmp/an.out")" || fail "decision telemetry: $(cat "$tmp/an.out")"
import json, sys
policy, before, after, measured = None, [], [], 0
keys = {"seq", "time_s", "request", "tag", "length", "blocks", "priority", "pred_swap_ms",
        "pred_recompute_ms", "choice", "reason", "measured_ms", "measured"}
for line in open(sys.argv[1]):
    topic, body = line.split(" ", 1)
    d = json.loads(body)
    if topic == "stats":
        policy = d["policy"]["preempt"]
        continue
    assert keys <= set(d), f"decision keys: {sorted(d)}"
    if d["measured"]:
        measured += 1
        assert d["measured_ms"] is not None and d["measured_ms"] >= 0, d
        continue
    (after if policy == "recompute" else before).append(d["choice"])
assert before.count("swap") > 0, f"no swap decision under preempt=swap: {before[:10]}"
assert after, "no decision after the switch to recompute: the run ended too soon"
assert set(after) == {"recompute"}, f"decisions after the switch: {sorted(set(after))}"
print(f"{len(before)} decisions under swap ({before.count('swap')} swaps), {len(after)} after the "
      f"switch, all recompute; {measured} measured-cost follow-ups")
PY
C status --json >"$tmp/s.json"
sw=$(ctl_json "$tmp/s.json" preemptions.swap) rc=$(ctl_json "$tmp/s.json" preemptions.recompute)
[ "$sw" -gt 0 ] && [ "$rc" -gt 0 ] && ok "status counts both kinds: swap $sw, recompute $rc" ||
	fail "status preemptions: swap $sw recompute $rc"
daemon_stop "live"
ctl_check_clean "live"
finish
