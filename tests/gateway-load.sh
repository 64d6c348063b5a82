#!/usr/bin/env bash
# Description: allm-gateway under load and abuse, on loopback and bounded: 64 concurrent streams through the openai Python SDK, each complete and equal to allm-run's greedy text; 100 slowloris and 800 idle connections do not stop a normal client and are closed within --timeout; at --max-connections a new connection is refused rather than queued, and served once slots free up.
. "$(dirname "$0")/gateway-common.sh"
gw_py
ulimit -n 12000 2>/dev/null

daemon_start gwl
# every peer is on 127.0.0.1: the per-address cap (gateway-keys.sh) is the whole cap here
gw_start gwl --timeout 2 --max-connections 1000 --max-connections-per-address 1000
L_URL=$GW_URL L_PID=$GW_PID
gw_up "$L_URL" || exit 1

# the reference: allm-run, in-process, for each prompt the streams use
{
	echo '{'
	sep=
	for p in "${PROMPTS[@]}"; do
		[[ $p =~ ^[0-9,]+$ ]] && continue
		printf '%s"%s": %s\n' "$sep" "$p" "$(reference_text "$p" 64)"
		sep=,
	done
	echo '}'
} >"$tmp/ref.json"

run_py() { # run_py MODE [VAR=value...]: one part of gateway-load.py
	local mode=$1
	shift
	env GW_URL="$L_URL" GW_MODEL="$M" GW_REF="$tmp/ref.json" GW_TIMEOUT=2 "$@" \
		"$PY" "$TESTS_DIR/gateway-load.py" "$mode" >"$tmp/$mode.out" 2>&1
	local rc=$?
	cat "$tmp/$mode.out"
	[ $rc -eq 0 ] || fail "gateway-load.py $mode (exit $rc)"
}
run_py streams
run_py abuse
"$CTL" --name gwl status --json >"$tmp/st.json"
[ "$(ctl_json "$tmp/st.json" queues.running)$(ctl_json "$tmp/st.json" queues.waiting)" = 00 ] &&
	ok "nothing left in the engine" || fail "engine queues not empty: $(cat "$tmp/st.json" | head -c 200)"
gw_stop "$L_PID" "gateway under load"

gw_start gwl --max-connections 50 --max-connections-per-address 50
L_URL=$GW_URL L_PID=$GW_PID
gw_up "$L_URL" || exit 1
run_py cap GW_CAP=50
gw_stop "$L_PID" "gateway at its connection cap"
daemon_stop "engine under load"
finish
