#!/usr/bin/env bash
# Description: allm-engined with a disk KV tier (--disk-swap-space, no host pool, the paper's admission, --preempt swap) under 8 load clients: every request gets allm-run's exact ids while victims go to disk; the KV file is open with no name (O_TMPFILE, "(deleted)" in /proc/PID/fd); status shows blocks.disk and preemptions.disk; `set disk_blocks` shrinks the pool mid-run and nothing is lost; kill -9 leaves nothing in the directory; a disk whose reads all fail (ALLM_KV_DISK_FAULT) is timed with a warning and every disk swap-in becomes a recompute with a log line, ids unchanged.
. "$(dirname "$0")/daemon-common.sh"
LOAD=$BUILD_DIR/tests/daemon-client-load
CTL=$BUILD_DIR/ctl/allmctl
for b in "$LOAD" "$CTL"; do [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }; done
KV=$tmp/kv
mkdir -p "$KV"
# no host pool and the paper's admission (no headroom): memory pressure preempts, and every
# victim goes to disk
TIER=(--gpu-blocks 24 --cpu-blocks 0 --admit-lookahead 0 --preempt swap --disk-swap-space 0.01 --disk-swap-dir "$KV")

expected_ids 24 0 "${PROMPTS[@]}" >"$tmp/expect" || exit 1

# run_clients NAME N: N load clients at once, 3 requests in flight each (so the
# pressure does not hang on the clients' timing); returns how many failed
run_clients() {
	local name=$1 n=$2 k pids=() bad=0
	for k in $(seq 0 $((n - 1))); do
		"$LOAD" --name "$name" --expect "$tmp/expect" --client "$k" --requests 12 --inflight 3 \
			--max-tokens 24 >"$tmp/$name-c$k.out" 2>"$tmp/$name-c$k.err" &
		pids+=($!)
	done
	for k in $(seq 0 $((n - 1))); do
		wait "${pids[$k]}" || { bad=$((bad + 1)); head -n 8 "$tmp/$name-c$k.err"; }
	done
	return $bad
}
st() { "$CTL" --name "$1" status --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$2"; }

# --- the tier under load, a shrink mid-run ---------------------------------------
daemon_start disk "${TIER[@]}"
log_has "disk KV tier: .* in $KV" && ok "the log says how the disk tier was opened" ||
	fail "no disk tier line: $(head -n 5 "$DLOG")"
ls -l /proc/$DPID/fd 2>/dev/null | grep -q "$KV/.*(deleted)" &&
	ok "the KV file is open with no name in $KV" || fail "no unnamed file of $KV in /proc/$DPID/fd"
[ "$(st disk "['blocks']['disk']['total']")" -gt 0 ] && ok "status: blocks.disk.total" ||
	fail "status has no disk blocks"
run_clients disk 8 &
loaders=$!
for _ in $(seq 100); do [ "$(st disk "['preemptions']['disk']")" -gt 0 ] && break; sleep 0.05; done
"$CTL" --name disk set disk_blocks=3 >/dev/null && ok "set disk_blocks=3 under load" ||
	fail "set disk_blocks=3 refused"
wait $loaders && ok "8 clients x 12 requests with a disk tier: all ids match" ||
	fail "disk tier: $? clients got wrong ids or failed"
nd=$(st disk "['preemptions']['disk']")
[ "$nd" -gt 0 ] && ok "$nd victims went to disk" || fail "nothing went to disk: the test tests nothing"
"$CTL" --name disk set disk_blocks=600 >/dev/null || fail "set disk_blocks back"
"$CTL" --name nope set disk_blocks=3 >/dev/null 2>&1
# --- kill -9: nothing left --------------------------------------------------------
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
[ -z "$(ls -A "$KV")" ] && ok "kill -9: nothing left in $KV" || fail "kill -9 left $(ls -A "$KV")"
rm -f "$ALLM_RUNTIME_DIR"/disk.*

# --- an injected read error: a recompute and a log line, same ids ----------------
ALLM_KV_DISK_FAULT=eio-read=1+ daemon_start fault "${TIER[@]}"
run_clients fault 8 && ok "an injected disk read error: all ids still match" ||
	fail "injected read error: $? clients failed"
log_has "warn: request [0-9]*: disk read failed (.*): recomputing instead" &&
	ok "the failed read was logged and recomputed" ||
	fail "no 'disk read failed' line: $(grep -i disk "$DLOG" | tail -n 3)"
daemon_stop "disk fault"
[ -z "$(ls -A "$KV")" ] && ok "SIGTERM: nothing left in $KV" || fail "left $(ls -A "$KV")"
finish
