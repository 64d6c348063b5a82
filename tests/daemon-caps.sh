#!/usr/bin/env bash
# Description: caps on what clients hold in flight (issue 13 item 6): per client, per uid and for the whole engine, on requests and on prompt bytes; a submission over a cap ends with one FINAL whose status is -EAGAIN (the gateway's HTTP 429) and whose message names the flag, exactly at the cap (two clients submitting at once, counted from their ACCEPTED and refusing FINALs); a client below the caps is served.
. "$(dirname "$0")/daemon-common.sh"
PEER=$BUILD_DIR/tests/daemon-peer
[ -x "$PEER" ] || { echo "FAIL: $PEER not built"; exit 1; }

# caps NAME WHAT X_N Y_N "X line" "Y line" FLAGS...: an engine with FLAGS; client X
# submits X_N requests (5 prompt tokens = 20 bytes each), then client Y Y_N while
# X's are in flight; each client's result line must be the one given
caps() {
	local name=$1 what=$2 xn=$3 yn=$4 xwant=$5 ywant=$6
	shift 6
	daemon_start "$name" --max-num-seqs 1 "$@"
	"$PEER" --socket "$ALLM_RUNTIME_DIR/$name.sock" caps "$xn" "$yn" >"$tmp/$name.out" 2>&1
	sed 's/^/  peer: /' "$tmp/$name.out"
	local x y
	x=$(sed -n 1p "$tmp/$name.out")
	y=$(sed -n 2p "$tmp/$name.out")
	[ "$x" = "$xwant" ] && ok "$what: client X: $x" || fail "$what: client X: '$x', want '$xwant'"
	if [ "$yn" -gt 0 ]; then
		[ "$y" = "$ywant" ] && ok "$what: client Y: $y" || fail "$what: client Y: '$y', want '$ywant'"
	fi
	daemon_stop "$what"
}

caps per-client "per client and per uid" 12 12 \
	"accepted 10 refused 2 status -11: client: 10 requests in flight (--max-queued-per-client)" \
	"accepted 5 refused 7 status -11: uid $(id -u): 15 requests in flight (--max-queued-per-uid)" \
	--max-queued-per-client 10 --max-queued-per-uid 15
caps global "whole engine" 12 12 \
	"accepted 10 refused 2 status -11: client: 10 requests in flight (--max-queued-per-client)" \
	"accepted 2 refused 10 status -11: engine: 12 requests in flight (--max-queued)" \
	--max-queued-per-client 10 --max-queued 12
caps bytes-uid "prompt bytes of a uid" 5 0 \
	"accepted 2 refused 3 status -11: uid $(id -u): prompt bytes at cap (--max-prompt-bytes-per-uid)" "" \
	--max-prompt-bytes-per-uid 50
caps bytes "prompt bytes of the engine" 5 0 \
	"accepted 3 refused 2 status -11: engine: prompt bytes at cap (--max-prompt-bytes)" "" \
	--max-prompt-bytes 70
finish
