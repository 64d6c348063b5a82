#!/usr/bin/env bash
# Description: prompts far longer than the context are refused by their length before they are copied or tokenized (issue 13 item 4): a 64 MiB and a 32 MiB text prompt and a 16 Mi-token prompt each end with an -E2BIG FINAL that names the limit, the engine's peak memory stays far below one such prompt, and meanwhile allmctl status answers and another client gets its exact ids.
. "$(dirname "$0")/daemon-common.sh"
PEER=$BUILD_DIR/tests/daemon-peer
CTL=$BUILD_DIR/ctl/allmctl
[ -x "$PEER" ] && [ -x "$CTL" ] || { echo "FAIL: daemon-peer or allmctl not built"; exit 1; }

expected_ids 24 0 "1,403,407,261,378" >"$tmp/expect" || exit 1
want=$(cut -f3 "$tmp/expect")
daemon_start big
hwm0=$(awk '/^VmHWM/ { print $2 }' "/proc/$DPID/status")

"$PEER" --socket "$ALLM_RUNTIME_DIR/big.sock" bigprompt >"$tmp/big.out" 2>&1 &
peer=$!
BG_PIDS+=($peer)
# meanwhile: the control plane and another client
"$CTL" --name big --timeout 10000 status >"$tmp/status.out" 2>&1 &&
	ok "allmctl status answers beside the huge prompts" || fail "allmctl status: $(cat "$tmp/status.out")"
got=$("$ALLM" --name big generate --prompt-ids 1,403,407,261,378 --max-tokens 24 --temperature 0 \
	--ids 2>"$tmp/n.err" | sed -n 's/^generated: //p')
[ "$got" = "$want" ] && ok "another client gets its exact ids beside the huge prompts" ||
	fail "another client got '$got' ($(cat "$tmp/n.err"))"
wait $peer
rc=$?
BG_PIDS=()
sed 's/^/  peer: /' "$tmp/big.out"
[ $rc -eq 0 ] && ok "every huge prompt got exactly one FINAL" || fail "daemon-peer bigprompt exited $rc"
n=$(grep -cE "^final -7 (text of (67108864|33554432) bytes cannot fit|prompt of 16777216 tokens: the context is)" "$tmp/big.out")
[ "$n" -eq 3 ] && ok "3 huge prompts refused by length with -E2BIG" ||
	fail "$n of 3 huge prompts refused by length (want -E2BIG, 'cannot fit' / 'the context is')"
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$DPID/status")
grew=$(( (hwm - hwm0) / 1024 ))
# a copy of one huge prompt would be 64 MiB; below 48 leaves room for what a
# sanitizer itself allocates (ThreadSanitizer: 23-34 MiB here, other builds 0)
[ "$grew" -lt 48 ] && ok "the engine's peak RSS grew by $grew MiB: no 64 MiB prompt was read or copied" ||
	fail "the engine's peak RSS grew by $grew MiB: a 64 MiB prompt was read or copied"
daemon_stop "big"
finish
