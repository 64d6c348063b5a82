#!/usr/bin/env bash
# Description: KV events on ipc://PATH (issue 49 item 1): the engine makes PATH's directory 0700 (or refuses one that is not its own and private: mode 0755, a symlink, another uid's, a PATH another engine serves), its uid decodes the stream and replays, and another uid — one the engine serves rings to with --allow-uid — can neither connect to the sockets nor list the directory, nor receive a single batch with pyzmq; the socket files go at stop. Needs root: skipped otherwise.
. "$(dirname "$0")/daemon-common.sh"
. "$(dirname "$0")/venv-common.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run a second uid"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) missing"; exit 77; }
venv_need msgspec pyzmq
NOBODY=65534
PROBE=$(dirname "$0")/kv-events-probe.py
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"; }
chmod 711 "$tmp" # uid $NOBODY may reach what lies in here, and enter what lets it

# refusals: one clear line, no engine
refused() { # WHY ENDPOINT: the engine must exit non-zero naming the directory
	local why=$1 ep=$2
	if ALLM_RUNTIME_DIR=$tmp/bad-run "$ENGINED" --name bad --model "$M" --device cpu --kv-events-endpoint "$ep" \
		>"$tmp/bad.log" 2>&1; then
		fail "$why: accepted"
	elif grep -q "KV events: refusing\|KV events: .*symlink\|served by another process" "$tmp/bad.log"; then
		ok "$why: refused: $(grep -m1 "KV events" "$tmp/bad.log" | sed 's/.*KV events/KV events/')"
	else
		fail "$why: $(tail -n 3 "$tmp/bad.log")"
	fi
}
mkdir -m 755 "$tmp/open"
refused "a directory others can enter (0755)" "ipc://$tmp/open/ev"
mkdir -m 700 "$tmp/theirs" && chown $NOBODY "$tmp/theirs"
refused "a directory of uid $NOBODY" "ipc://$tmp/theirs/ev"
mkdir -m 700 "$tmp/real" && ln -s "$tmp/real" "$tmp/link"
refused "a symlink to a private directory" "ipc://$tmp/link/ev"

# the engine serves rings to uid $NOBODY, and the KV events to itself alone
EP=ipc://$tmp/kv/ev
daemon_start ipc --allow-uid $NOBODY --gpu-blocks 24 --cpu-blocks 16 --kv-events-endpoint "$EP"
log_has "KV events on $EP (replay $EP.replay" && ok "the engine says where its KV events are and who reads them: \
$(grep -m1 -o "readable by.*" "$DLOG")" || fail "no KV events line: $(tail -n 3 "$DLOG")"
[ "$(stat -c '%a %u' "$tmp/kv")" = "700 0" ] && ok "the engine made $tmp/kv mode 700" ||
	fail "$tmp/kv: $(stat -c '%a %u' "$tmp/kv")"
refused "a PATH another engine serves" "$EP"

# generate while a probe listens, so the PUB has batches to send
gen_while() { # PID: requests until the probe PID exits
	local i=0
	while kill -0 "$1" 2>/dev/null; do
		"$ALLM" --name ipc generate --prompt-ids "$((i % 300 + 1)),7,42,300,11,99,5,6,7,8,9,10,11,12,13,14,15,16,17" \
			--max-tokens 4 --temperature 0 >/dev/null 2>&1
		i=$((i + 1))
	done
}
"$PY" "$PROBE" "$EP" "$EP.replay" --wait 20 --want-pub 2 >"$tmp/own.json" &
p=$!
gen_while $p
wait $p
own=$(cat "$tmp/own.json")
"$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(not (r["pub"] >= 2 and r["replay"] >= 1 and r["end"]))' "$own" &&
	ok "the engine's uid decodes the stream and a replay: $own" || fail "the engine's uid: $own"

# another uid: the kernel refuses it the directory and both sockets (with a python
# that uid can run: this clone's venv may lie in a directory closed to it)
OPY=
for c in /usr/bin/python3 "$PY"; do
	as $NOBODY "$c" -c 'import socket' 2>/dev/null && { OPY=$c; break; }
done
[ -n "$OPY" ] || fail "no python uid $NOBODY can run"
for s in "$tmp/kv/ev" "$tmp/kv/ev.replay"; do
	out=$(as $NOBODY "$OPY" -c 'import socket,sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(type(e).__name__, e.errno)' "$s" 2>&1)
	case $out in
	"PermissionError 13") ok "uid $NOBODY cannot connect to $(basename "$s"): EACCES" ;;
	*) fail "uid $NOBODY connecting to $s: $out" ;;
	esac
done
as $NOBODY ls "$tmp/kv" >/dev/null 2>&1 && fail "uid $NOBODY can list $tmp/kv" ||
	ok "uid $NOBODY cannot list the KV events' directory"
# and with pyzmq, as a router of that uid would read it (where the venv is open to it)
cp "$PROBE" "$tmp/probe.py" && chmod 644 "$tmp/probe.py"
if as $NOBODY "$PY" -c 'import zmq, msgspec' 2>/dev/null; then
	as $NOBODY "$PY" "$tmp/probe.py" "$EP" "$EP.replay" --wait 3 >"$tmp/other.json" 2>"$tmp/other.err" &
	p=$!
	gen_while $p
	wait $p
	other=$(cat "$tmp/other.json")
	[ "$other" = '{"pub": 0, "replay": 0, "end": false}' ] && ok "uid $NOBODY's subscriber receives nothing: $other" ||
		fail "uid $NOBODY's subscriber: $other $(cat "$tmp/other.err")"
else
	echo "note: $PY is closed to uid $NOBODY here; the socket-level checks above stand for its subscriber"
fi
daemon_stop ipc
[ ! -e "$tmp/kv/ev" ] && [ ! -e "$tmp/kv/ev.replay" ] && ok "the KV events' socket files are gone" ||
	fail "left behind: $(ls "$tmp/kv")"
finish
