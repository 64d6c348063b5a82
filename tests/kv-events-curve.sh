#!/usr/bin/env bash
# Description: KV events over tcp with ZeroMQ CURVE (issue 49 item 1): keys come from files (the secret one refused unless private to the engine's uid, a symlink refused, a clients file others can write refused, CURVE's two files only together), the engine logs its public key; a subscriber with a listed client key decodes the stream and a replay, while one with an unlisted key, one with the wrong server key and a plaintext one receive nothing (refusals counted in status); a plaintext bind beyond loopback is refused without --kv-events-insecure and says so loudly with it.
. "$(dirname "$0")/daemon-common.sh"
. "$(dirname "$0")/venv-common.sh"
venv_need msgspec pyzmq
CTL=$BUILD_DIR/ctl/allmctl
PROBE=$(dirname "$0")/kv-events-probe.py
"$PY" -c 'import zmq, sys; sys.exit(not zmq.has("curve"))' || { echo "SKIP: pyzmq without CURVE"; exit 77; }

# keys: the engine's, a listed subscriber's, an unlisted one's, a stranger server's
"$PY" - "$tmp" <<'PY'
import os, sys, zmq
d = sys.argv[1]
def pair(name):
    pub, sec = zmq.curve_keypair()
    open(f"{d}/{name}.pub", "w").write(pub.decode() + "\n")
    with open(f"{d}/{name}.client", "w") as f:  # the probe's --client-key file
        f.write(pub.decode() + "\n" + sec.decode() + "\n")
    return pub.decode(), sec.decode()
spub, ssec = pair("server")
# the engine's secret as a ZeroMQ certificate (zmq.auth's *.key_secret layout)
with open(f"{d}/server.key_secret", "w") as f:
    f.write(f'#   ZeroMQ CURVE **Secret** Certificate\ncurve\n    public-key = "{spub}"\n    secret-key = "{ssec}"\n')
apub, _ = pair("alice")
pair("mallory")
pair("stranger")
with open(f"{d}/clients", "w") as f:
    f.write(f'# the routers allowed to read\npublic-key = "{apub}"\n')
PY
chmod 600 "$tmp/server.key_secret"
KEY=$tmp/server.key_secret
CLIENTS=$tmp/clients

# refusals: one clear line, no engine
refused() { # WHY PATTERN FLAGS...
	local why=$1 pat=$2
	shift 2
	if ALLM_RUNTIME_DIR=$tmp/bad-run "$ENGINED" --name bad --model "$M" --device cpu "$@" >"$tmp/bad.log" 2>&1; then
		fail "$why: accepted"
	elif grep -q -- "$pat" "$tmp/bad.log"; then
		ok "$why: refused: $(grep -m1 -- "$pat" "$tmp/bad.log" | sed 's/^.*\(KV events\|allm-engined\): //')"
	else
		fail "$why: $(tail -n 3 "$tmp/bad.log")"
	fi
}
P0=$(free_port_pair)
cp "$KEY" "$tmp/open.key" && chmod 644 "$tmp/open.key"
refused "a secret key file others can read (0644)" "readable by it alone" \
	--kv-events-endpoint "tcp://127.0.0.1:$P0" --kv-events-curve-key "$tmp/open.key" --kv-events-curve-clients "$CLIENTS"
ln -s "$KEY" "$tmp/link.key"
refused "a secret key file that is a symlink" "symlink" \
	--kv-events-endpoint "tcp://127.0.0.1:$P0" --kv-events-curve-key "$tmp/link.key" --kv-events-curve-clients "$CLIENTS"
cp "$CLIENTS" "$tmp/open.clients" && chmod 666 "$tmp/open.clients"
refused "a clients file others can write" "not be writable by others" \
	--kv-events-endpoint "tcp://127.0.0.1:$P0" --kv-events-curve-key "$KEY" --kv-events-curve-clients "$tmp/open.clients"
cp "$KEY" "$tmp/secret.clients" && chmod 600 "$tmp/secret.clients"
refused "a clients file holding a secret key" "a secret key (list" \
	--kv-events-endpoint "tcp://127.0.0.1:$P0" --kv-events-curve-key "$KEY" --kv-events-curve-clients "$tmp/secret.clients"
refused "a CURVE key without a clients file" "go together" \
	--kv-events-endpoint "tcp://127.0.0.1:$P0" --kv-events-curve-key "$KEY"
refused "plaintext on every interface" "plaintext bind beyond loopback" --kv-events-endpoint "tcp://0.0.0.0:$P0"

# --kv-events-insecure: accepted, and the engine says who can read
daemon_start insecure --kv-events-endpoint "tcp://0.0.0.0:$P0" --kv-events-insecure
log_has "warn: KV events on tcp://0.0.0.0:$P0 .*readable by anyone who reaches this address" &&
	ok "--kv-events-insecure: a warning says anyone who reaches it reads every prompt" ||
	fail "--kv-events-insecure: $(grep "KV events" "$DLOG")"
daemon_stop insecure

# CURVE on every interface: allowed, the stream is closed to unlisted keys
P=$(free_port_pair)
daemon_start curve --kv-events-endpoint "tcp://*:$P" --kv-events-curve-key "$KEY" --kv-events-curve-clients "$CLIENTS"
SPUB=$(cat "$tmp/server.pub")
log_has -F "public key (ZMQ_CURVE_SERVERKEY): $SPUB" && ok "the engine logs its public key, derived from the secret file" ||
	fail "no public key in the log: $(grep "KV events" "$DLOG")"
any_alive() {
	local p
	for p; do kill -0 "$p" 2>/dev/null && return 0; done
	return 1
}
gen_while() { # PID...: requests until every probe PID... has exited
	local i=0
	while any_alive "$@"; do
		"$ALLM" --name curve generate --prompt-ids "$((i % 300 + 1)),7,42,300,11,99,5,6,7,8,9,10,11,12,13,14,15,16,17" \
			--max-tokens 4 --temperature 0 >/dev/null 2>&1
		i=$((i + 1))
	done
}
probe() { # NAME ARGS...: starts a probe, its JSON to $tmp/NAME.json; its pid in $!
	local name=$1
	shift
	"$PY" "$PROBE" "tcp://127.0.0.1:$P" "tcp://127.0.0.1:$((P + 1))" "$@" >"$tmp/$name.json" 2>"$tmp/$name.err" &
}
# the four at once, requests running meanwhile: alice's is the positive control
probe alice --server-key="$SPUB" --client-key "$tmp/alice.client" --wait 20 --want-pub 2
pids=($!)
probe mallory --server-key="$SPUB" --client-key "$tmp/mallory.client" --wait 3
pids+=($!)
probe stranger --server-key="$(cat "$tmp/stranger.pub")" --client-key "$tmp/alice.client" --wait 3
pids+=($!)
probe plain --wait 3
pids+=($!)
gen_while "${pids[@]}"
wait "${pids[@]}"
got=$(cat "$tmp/alice.json")
"$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r["pub"] >= 2 and r["replay"] >= 1 and r["end"]))' "$got" &&
	ok "a listed client key decodes the stream and a replay: $got" || fail "listed key: $got $(cat "$tmp/alice.err")"
nothing='{"pub": 0, "replay": 0, "end": false}'
got=$(cat "$tmp/mallory.json")
[ "$got" = "$nothing" ] && ok "an unlisted client key receives nothing: $got" || fail "unlisted key: $got"
got=$(cat "$tmp/stranger.json")
[ "$got" = "$nothing" ] && ok "the wrong server key receives nothing: $got" || fail "wrong server key: $got"
got=$(cat "$tmp/plain.json")
[ "$got" = "$nothing" ] && ok "a plaintext subscriber receives nothing: $got" || fail "plaintext: $got"
denied=$("$CTL" --name curve status --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["kv_events"]["curve_denied"])')
[ "$denied" -ge 1 ] 2>/dev/null && ok "status.kv_events.curve_denied counts the refused handshakes ($denied)" ||
	fail "curve_denied: $denied"
log_has "refused a subscriber from .*its CURVE key is not in $CLIENTS" && ok "the first refusal is logged" ||
	fail "no refusal in the log"
daemon_stop curve
finish
