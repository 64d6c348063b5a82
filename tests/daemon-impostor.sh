#!/usr/bin/env bash
# Description: clients verify the engine before they send a prompt (issue 13 item 7): with a real allm-engined of another uid (nobody) serving from a directory it owns, `allm generate` and `allmctl status` refuse that directory and nothing reaches the impostor; a symlinked or world-writable directory and a socket whose listener runs as another uid (SO_PEERCRED) are refused too; ALLM_ENGINE_UID opts in to another uid's engine; allm-engined refuses a symlinked or foreign runtime directory. Needs root (to be two users): skipped otherwise.
. "$(dirname "$0")/daemon-common.sh"
CTL=$BUILD_DIR/ctl/allmctl
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run a second uid"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) missing"; exit 77; }
NOBODY=65534
# an array, not a function: `"${AS_NOBODY[@]}" cmd &` leaves $! the command's own pid
# (a function would run in a subshell the cleanup's kill would not reach through)
AS_NOBODY=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --)
chmod 711 "$tmp" # the other uid reaches its directories in here, lists nothing
# what nobody runs and reads is copied out of the clone, which may be closed to it
other_uid_tree engined/allm-engined tests/test-clientlib

# wait_sock PATH: until the socket exists (10 s)
wait_sock() {
	local i
	for i in $(seq 400); do [ -S "$1" ] && return 0; sleep 0.025; done
	return 1
}
# refused WHAT REGEX CMD...: CMD fails with a message matching REGEX
refused() {
	local what=$1 re=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ $rc -ne 0 ] && grep -qE "$re" "$tmp/err" && ok "$what: refused ($(head -c 160 "$tmp/err"))" ||
		fail "$what: exit $rc, stderr '$(cat "$tmp/err")', stdout '$(head -c 200 "$tmp/out")'"
}

# --- a real engine of another user, in a directory it owns ----------------------
# (it serves our uid: that is what an impostor wants)
evil=$tmp/evil
# 0711: its users reach the socket (the engine never changes the mode of a directory
# it did not create)
mkdir -m 711 "$evil" && chown $NOBODY:$NOBODY "$evil"
"${AS_NOBODY[@]}" "$OTHER_BUILD/engined/allm-engined" --name x --model "$OTHER_M" --device cpu --runtime-dir "$evil" --allow-uid 0 \
	--profile "$evil/profile.json" --log-level debug >"$tmp/evil.log" 2>&1 &
evil_pid=$!
BG_PIDS+=($evil_pid)
wait_sock "$evil/x.sock" || { fail "the impostor engine did not start: $(tail -n 3 "$tmp/evil.log")"; finish; }
refused "allm, directory of uid $NOBODY" "refusing the runtime directory $evil: it belongs to uid $NOBODY" \
	"$ALLM" --runtime-dir "$evil" --name x generate --prompt "my secret prompt" --max-tokens 4
refused "allmctl, directory of uid $NOBODY" "refusing the runtime directory $evil: it belongs to uid $NOBODY" \
	"$CTL" --runtime-dir "$evil" --name x --timeout 3000 status
sleep 0.2
grep -q "connected" "$tmp/evil.log" && fail "a client connected to the impostor: $(grep connected "$tmp/evil.log")" ||
	ok "the impostor saw no client"
# opting in: ALLM_ENGINE_UID names the uid whose engine we mean to use
ALLM_ENGINE_UID=$NOBODY "$ALLM" --runtime-dir "$evil" --name x generate --prompt-ids 1,403,407 \
	--max-tokens 4 --ids >"$tmp/optin.out" 2>&1 && grep -q '^generated:' "$tmp/optin.out" &&
	ok "ALLM_ENGINE_UID=$NOBODY: that engine is used on purpose" || fail "ALLM_ENGINE_UID: $(cat "$tmp/optin.out")"

# --- a symlink to it; a world-writable directory; a listener of another uid ------
ln -s "$evil" "$tmp/link"
refused "allm, symlinked directory" "refusing the runtime directory $tmp/link: it is a symlink" \
	"$ALLM" --runtime-dir "$tmp/link" --name x generate --prompt "my secret prompt"
mkdir -m 777 "$tmp/open" "$tmp/peer"
"${AS_NOBODY[@]}" "$OTHER_BUILD/tests/test-clientlib" --serve "$tmp/open" y >/dev/null 2>&1 &
BG_PIDS+=($!)
"${AS_NOBODY[@]}" "$OTHER_BUILD/tests/test-clientlib" --serve "$tmp/peer" z >/dev/null 2>&1 &
BG_PIDS+=($!)
wait_sock "$tmp/open/y.sock" && wait_sock "$tmp/peer/z.sock" || fail "the fake engines did not start"
chmod 777 "$tmp/open" # mkdir -m is subject to no umask, but be sure
refused "allm, world-writable directory" "refusing the runtime directory $tmp/open: mode 0777" \
	"$ALLM" --runtime-dir "$tmp/open" --name y generate --prompt "my secret prompt"
chmod 700 "$tmp/peer" # ours and private now, but the socket's listener is nobody's
refused "allm, listener of uid $NOBODY in our own directory" \
	"refusing the engine at $tmp/peer/z.sock: it runs as uid $NOBODY, not uid 0" \
	"$ALLM" --runtime-dir "$tmp/peer" --name z generate --prompt "my secret prompt"

# --- the engine's side: it never adopts a symlinked or foreign directory ----------
mkdir -m 700 "$tmp/mine"
ln -s "$tmp/mine" "$tmp/minelink"
refused "allm-engined, symlinked runtime directory" "is not a directory owned by uid 0 \(a symlink\)" \
	"$ENGINED" --name w --model "$M" --device cpu --runtime-dir "$tmp/minelink"
refused "allm-engined, directory of uid $NOBODY" "is not a directory owned by uid 0" \
	"$ENGINED" --name w --model "$M" --device cpu --runtime-dir "$evil"
finish
