#!/usr/bin/env bash
# Description: the old client ABI against a real allm-engined (issue 39): abi-v0 calls libadaptivellm.so.2's ADAPTIVELLM_0 symbols with the old struct allm_request_params and gets the ids and log-probabilities of today's API for the same request.
. "$(dirname "$0")/daemon-common.sh"

daemon_start abiv0
LD_LIBRARY_PATH=$BUILD_DIR/clientlib "$BUILD_DIR/tests/abi-v0" abiv0 >"$tmp/abi.out" 2>&1 &&
	ok "$(cat "$tmp/abi.out")" || fail "abi-v0: $(cat "$tmp/abi.out")"
daemon_stop "abi-v0"
finish
