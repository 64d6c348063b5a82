#!/usr/bin/env bash
# Description: elastic memory through the real daemon (--dummy tiny, --memory-budget, --elastic-memory on): allmctl status shows the pool's split (memory.elastic, pool, KV and scratch bytes that fit the pool) and its decisions after a few concurrent generations (deflations for their prefills, inflations back), the Prometheus text carries allm_memory_pool_bytes and allm_memory_pool_decisions_total, `set gpu_blocks` is refused while elastic memory sizes the pool, and with every client gone no request is left and the engine still serves.
. "$(dirname "$0")/ctl-common.sh"

N=elastic
C() { "$CTL" --name $N "$@"; }
ctl_start $N --dummy tiny --memory-budget 0.06 --elastic-memory on --max-num-batched-tokens 256 \
	--profile "$tmp/profile-tiny.json"

for k in 1 2 3 4 5 6; do
	"$ALLM" --name $N generate --prompt-ids 1,2,3,4,5,6,7,$k --max-tokens 64 --ignore-eos --temperature 0 \
		>"$tmp/g$k.out" 2>&1 &
	BG_PIDS+=($!)
done
for p in "${BG_PIDS[@]}"; do wait "$p" || fail "a generation failed: $(cat "$tmp"/g*.out | tail -3)"; done
BG_PIDS=()
C status --json >"$tmp/s.json" || fail "status --json exit $?"
python3 - "$tmp/s.json" <<'PY' && ok "status: the pool's split and its decisions" || fail "status memory: $(cat "$tmp/s.json" | head -c 600)"
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
print(m)
assert m["elastic"] is True and m["pool_bytes"] > 0
assert 0 < m["kv_bytes"] and 0 < m["scratch_bytes"] and m["kv_bytes"] + m["scratch_bytes"] <= m["pool_bytes"]
assert m["deflations"] >= 1 and m["inflations"] >= 1 and m["max_running"] >= 2
assert m["resident_bytes"] <= m["pool_bytes"]
PY
C metrics >"$tmp/m.txt" || fail "metrics exit $?"
grep -q '^allm_memory_pool_bytes{.*part="kv".*} [1-9]' "$tmp/m.txt" &&
	grep -q '^allm_memory_pool_decisions_total{.*kind="deflate".*} [1-9]' "$tmp/m.txt" &&
	ok "metrics: allm_memory_pool_bytes, allm_memory_pool_decisions_total" ||
	fail "metrics: $(grep allm_memory "$tmp/m.txt")"
C set gpu_blocks=10 >"$tmp/set.out" 2>&1 && fail "set gpu_blocks accepted under elastic memory" ||
	{ grep -q "elastic memory" "$tmp/set.out" && ok "set gpu_blocks refused: $(cat "$tmp/set.out")" ||
		fail "set gpu_blocks: $(cat "$tmp/set.out")"; }
C status --json >"$tmp/s2.json"
[ "$(ctl_json "$tmp/s2.json" queues.running)" = 0 ] && [ "$(ctl_json "$tmp/s2.json" queues.waiting)" = 0 ] &&
	ok "no request left" || fail "requests left: $(ctl_json "$tmp/s2.json" queues)"
"$ALLM" --name $N generate --prompt-ids 1,2 --max-tokens 4 --temperature 0 >/dev/null 2>&1 &&
	ok "still serving" || fail "a later request failed"
C shutdown >/dev/null || fail "shutdown exit $?"
wait $DPID
finish
