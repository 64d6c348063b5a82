#!/usr/bin/env bash
# Description: a full disk tier is learnt (issue 37 item 5): with every disk write failing ENOSPC (ALLM_KV_DISK_FAULT), no host pool and --preempt swap (every victim to the disk while it has room), 8 load clients still get allm-run's exact ids, and after the first failures the engine stops choosing the disk — most victims recompute at once instead of paying for a write that fails again (before: every victim went to the disk and failed). The writes go behind, so the first failures show at the reads of the victims written before them; the predictor's rule itself (decay, threshold) is unit-tested in test-predictor.
. "$(dirname "$0")/ctl-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
[ -x "$LOAD" ] || { echo "FAIL: $LOAD not built"; exit 1; }
KV=$tmp/kv
mkdir -p "$KV"
expected_ids 24 0 "${PROMPTS[@]}" >"$tmp/expect" || exit 1

policy=swap
# no host pool and the paper's admission: memory pressure preempts, and the disk
# is the only tier a victim could keep its KV in
ALLM_KV_DISK_FAULT=enospc-write=1+ daemon_start "full-$policy" --gpu-blocks 24 --cpu-blocks 0 \
	--admit-lookahead 0 --preempt $policy --disk-swap-space 0.01 --disk-swap-dir "$KV"
pids=()
for k in $(seq 0 7); do
	"$LOAD" --name "full-$policy" --expect "$tmp/expect" --client "$k" --requests 12 --max-tokens 24 \
		>"$tmp/c$k.out" 2>&1 &
	pids+=($!)
done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
[ $bad -eq 0 ] && ok "$policy: 8 clients x 12 requests on a full disk: all ids exact" ||
	fail "$policy: $bad clients got wrong ids or failed: $(head -n 3 "$tmp"/c*.out | head -n 6)"
"$CTL" --name "full-$policy" status --json >"$tmp/st.json"
victims=$(ctl_json "$tmp/st.json" preemptions.recompute)
failed=$(grep -c "disk \(read\|write\) failed" "$DLOG")
[ "$victims" -ge 16 ] && ok "$policy: $victims victims" || fail "$policy: only $victims victims: nothing to learn from"
[ "$failed" -ge 1 ] && [ $((failed * 2)) -lt "$victims" ] &&
	ok "$policy: $failed disk failures for $victims victims: the disk stopped being chosen" ||
	fail "$policy: $failed disk failures for $victims victims (the disk kept being chosen?)"
daemon_stop "$policy on a full disk"
finish
