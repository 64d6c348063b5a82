#!/usr/bin/env bash
# Description: hostile control-plane peers (raw ZeroMQ: 5-byte headers claiming 4 GiB, wrong types, truncation, nesting 1000 deep, non-map bodies, extra frames, 1 MiB and 5 MiB bodies) each get an error reply and change nothing; afterwards allmctl status and a ring client (allm generate) are still served, and the engine stops cleanly.
. "$(dirname "$0")/ctl-common.sh"
HOSTILE=$BUILD_DIR/tests/ctl-hostile
[ -x "$HOSTILE" ] || { echo "FAIL: $HOSTILE not built"; exit 1; }

ctl_start hostile --model "$M" --profile "$tmp/profile.json"
"$HOSTILE" "ipc://$ALLM_RUNTIME_DIR/hostile.ctl" >"$tmp/h.out" 2>&1 &&
	ok "every hostile message got an error reply; nothing changed" ||
	{ cat "$tmp/h.out"; fail "hostile messages"; }
grep -c '^ok:' "$tmp/h.out" | { read -r n; echo "($n hostile cases)"; }
daemon_alive && ok "the engine survived" || fail "the engine died: $(tail -n 5 "$DLOG")"
"$CTL" --name hostile status --json >"$tmp/s.json" && [ "$(ctl_json "$tmp/s.json" state)" = serving ] &&
	ok "allmctl status still works" || fail "allmctl status after the hostile peers"
out=$("$ALLM" --name hostile generate --prompt-ids 1,403,407,261,378 --max-tokens 8 --temperature 0 --ids 2>&1)
echo "$out" | grep -Eq '^generated:( [0-9]+){8}$' && ok "a ring client is still served" ||
	fail "ring client after the hostile peers: $out"
daemon_stop "hostile"
ctl_check_clean "hostile"
finish
