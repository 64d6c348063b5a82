#!/usr/bin/env bash
# Description: files and folders the engine writes, with two real uids (issue 37 items 3-5): run as root with --profile in a folder another uid (nobody) can write, the engine refuses that folder, and a symlink nobody plants at the old predictable temp name (profile.json.tmp.PID) makes `allmctl calibrate` overwrite nothing (a root-only file stays intact, no symlink becomes the profile); a folder of nobody's or a symlinked one is refused too; in a private folder the profile is saved 0600 with no temp file left and loaded by the next engine; a shared 1777 --runtime-dir (and ALLM_RUNTIME_DIR) is refused and left 1777, an existing 0755 one is used and left 0755, a new one is created 0700; the socket is 0600 (0666 with --allow-uid); uid 1 connecting 200 times to an --allow-uid engine is logged on one line, not 200. Needs root: skipped otherwise.
. "$(dirname "$0")/ctl-common.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run a second uid"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) missing"; exit 77; }
[ -x /usr/bin/python3 ] || { echo "SKIP: /usr/bin/python3 (the other uid's client) missing"; exit 77; }
NOBODY=65534
# the other uid runs only system programs (ln, /usr/bin/python3), never a binary of the clone,
# and reaches nothing but the folders of $tmp it is given (the clone may be private)
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"; }
chmod 711 "$tmp"
MODEL=(--model "$M" --device cpu)

# secret FILE: a file only root may read or write, whose content the test knows
secret() {
	echo "root's own data" >"$1"
	chmod 600 "$1"
}
intact() { # intact WHAT FILE
	[ "$(cat "$2")" = "root's own data" ] && [ ! -L "$2" ] && ok "$1: root's file is intact" ||
		fail "$1: root's file was overwritten: $(head -c 120 "$2")"
}
# plant DIR TARGET: nobody plants symlinks to TARGET at every name the old engine's
# save used (profile.json.tmp.PID for the engine's pid and its neighbours) and at
# the profile's own name
plant() {
	local p
	for p in $(seq $((DPID - 2)) $((DPID + 8))); do
		as $NOBODY ln -sf "$2" "$1/profile.json.tmp.$p" 2>/dev/null
	done
}
calibrate() { # calibrate NAME: `allmctl calibrate` (it saves the profile when it can)
	"$CTL" --name "$1" --timeout 120000 calibrate >"$tmp/calib.out" 2>&1 ||
		fail "allmctl calibrate: $(tail -n 3 "$tmp/calib.out")"
}

# --- 3. a profile folder another user can write ----------------------------------
shared=$tmp/shared
mkdir "$shared" && chmod 777 "$shared"
secret "$tmp/secret"
ctl_start pshared "${MODEL[@]}" --profile "$shared/profile.json"
log_has "refusing the profile directory $shared: mode 0777 lets other users" &&
	ok "a folder others can write: refused ($(grep -o "refusing the profile directory [^;]*" "$DLOG" | head -n 1))" ||
	fail "no refusal of $shared in the log: $(grep -i profile "$DLOG" | head -n 3)"
plant "$shared" "$tmp/secret"
calibrate pshared
intact "calibrate with symlinks planted in a folder others can write" "$tmp/secret"
[ ! -L "$shared/profile.json" ] && ok "no planted symlink became the profile" ||
	fail "the profile is now a symlink: $(ls -l "$shared/profile.json")"
[ ! -e "$shared/profile.json" ] && ok "nothing saved in that folder" || fail "a profile was saved in $shared"
log_has "cannot save the profile: .*refusing the profile directory $shared" &&
	ok "calibrate says why it did not save" || fail "no 'cannot save' line: $(grep -i profile "$DLOG" | tail -n 2)"
daemon_stop "engine with a shared profile folder"

# a folder of nobody's (it could plant what it likes), and a symlink to a folder
theirs=$tmp/theirs
mkdir -m 755 "$theirs" && chown $NOBODY:$NOBODY "$theirs"
ctl_start ptheirs "${MODEL[@]}" --profile "$theirs/profile.json"
log_has "refusing the profile directory $theirs: it belongs to uid $NOBODY" &&
	ok "a folder of uid $NOBODY: refused" || fail "no refusal of $theirs: $(grep -i profile "$DLOG" | head -n 3)"
plant "$theirs" "$tmp/secret"
calibrate ptheirs
intact "calibrate with symlinks planted in a folder of uid $NOBODY" "$tmp/secret"
daemon_stop "engine with a profile folder of uid $NOBODY"
mkdir -m 700 "$tmp/mine"
ln -s "$tmp/mine" "$tmp/minelink"
ctl_start plink "${MODEL[@]}" --profile "$tmp/minelink/profile.json"
log_has "refusing the profile directory $tmp/minelink: it is a symlink" &&
	ok "a symlinked profile folder: refused" || fail "no refusal of the symlink: $(grep -i profile "$DLOG" | head -n 3)"
daemon_stop "engine with a symlinked profile folder"

# a private folder: saved whole, 0600, no temp name left; the next engine loads it
ctl_start pmine "${MODEL[@]}" --profile "$tmp/mine/profile.json"
calibrate pmine
[ -f "$tmp/mine/profile.json" ] && [ ! -L "$tmp/mine/profile.json" ] &&
	[ "$(stat -c %a "$tmp/mine/profile.json")" = 600 ] && ok "the profile is saved, a regular file, mode 0600" ||
	fail "profile: $(ls -la "$tmp/mine")"
[ "$(ls -A "$tmp/mine")" = profile.json ] && ok "no temp file left beside it" || fail "left: $(ls -A "$tmp/mine")"
daemon_stop "engine with a private profile folder"
ctl_start pmine2 "${MODEL[@]}" --profile "$tmp/mine/profile.json"
log_has "predictor profile loaded from $tmp/mine/profile.json" && ok "the next engine loads it" ||
	fail "not loaded: $(grep -i profile "$DLOG" | head -n 3)"
daemon_stop "engine that loaded the profile"

# --- 4. the runtime folder: a shared one is refused and never chmod'ed -----------------
# start_in DIR [env...]: an engine with that runtime folder; waits until it serves
# (its socket) or exits; its log is $tmp/rt.log
start_in() {
	local dir=$1 i
	shift
	env "$@" "$ENGINED" --name rt "${MODEL[@]}" --profile "$tmp/mine/profile.json" ${dir:+--runtime-dir "$dir"} \
		>"$tmp/rt.log" 2>&1 &
	RT=$!
	BG_PIDS+=($RT)
	for i in $(seq 400); do
		kill -0 $RT 2>/dev/null || return 1
		[ -S "${dir:-$ALLM_RUNTIME_DIR}/rt.sock" ] && return 0
		sleep 0.025
	done
	return 0
}
stop_rt() {
	kill -TERM $RT 2>/dev/null
	wait $RT 2>/dev/null
}
pub=$tmp/pub
mkdir "$pub" && chmod 1777 "$pub"
if start_in "$pub"; then
	fail "--runtime-dir on a 1777 folder: the engine serves from it"
	stop_rt
fi
[ "$(stat -c %a "$pub")" = 1777 ] && ok "--runtime-dir 1777: left 1777" || fail "the shared folder is now $(stat -c %a "$pub")"
grep -q "refusing the runtime directory $pub: mode 1777 lets other users create files in it" "$tmp/rt.log" &&
	ok "--runtime-dir 1777: refused with why ($(grep -o 'name a directory[^,]*' "$tmp/rt.log"))" ||
	fail "no refusal: $(tail -n 2 "$tmp/rt.log")"
if start_in "" ALLM_RUNTIME_DIR="$pub"; then
	fail "ALLM_RUNTIME_DIR on a 1777 folder: the engine serves from it"
	stop_rt
fi
[ "$(stat -c %a "$pub")" = 1777 ] && grep -q "refusing the runtime directory $pub" "$tmp/rt.log" &&
	ok "ALLM_RUNTIME_DIR 1777: refused, left 1777" || fail "ALLM_RUNTIME_DIR: $(stat -c %a "$pub") $(tail -n 1 "$tmp/rt.log")"
ro=$tmp/ro
mkdir -m 755 "$ro"
if start_in "$ro"; then
	[ "$(stat -c %a "$ro")" = 755 ] && ok "an existing 0755 folder: used, left 0755" ||
		fail "an existing 0755 folder is now $(stat -c %a "$ro")"
	[ "$(stat -c %a "$ro/rt.sock")" = 600 ] && ok "the socket is 0600" || fail "socket mode $(stat -c %a "$ro/rt.sock")"
	stop_rt
else
	fail "an existing 0755 folder: $(tail -n 2 "$tmp/rt.log")"
fi
if start_in "$tmp/new"; then
	[ "$(stat -c %a "$tmp/new")" = 700 ] && ok "a new folder: created 0700" || fail "created $(stat -c %a "$tmp/new")"
	stop_rt
else
	fail "a new folder: $(tail -n 2 "$tmp/rt.log")"
fi

# --- 5. a refused uid's connections: one line, not one each -----------------------
export ALLM_RUNTIME_DIR=$tmp/run-au # made by this engine: 0711, the other uids reach the socket
ctl_start refuse "${MODEL[@]}" --profile "$tmp/mine/profile.json" --allow-uid $NOBODY
[ "$(stat -c %a "$ALLM_RUNTIME_DIR/refuse.sock")" = 666 ] && ok "--allow-uid: the socket is 0666 (each peer is checked)" ||
	fail "--allow-uid socket mode $(stat -c %a "$ALLM_RUNTIME_DIR/refuse.sock")"
as 1 /usr/bin/python3 - "$ALLM_RUNTIME_DIR/refuse.sock" <<'PY' >"$tmp/refused.out" 2>&1
import socket, sys
n = 0
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sys.argv[1])
        s.settimeout(5)
        s.recv(256)  # the welcome that refuses, or the close
        n += 1
    except OSError as e:
        print("connect:", e)
    s.close()
print("connected", n)
PY
grep -q "connected 200" "$tmp/refused.out" && ok "uid 1 connected 200 times" || fail "uid 1: $(tail -n 2 "$tmp/refused.out")"
log_has "uid 1 is not allowed" # the engine logs from its own loop, after the refusal
lines=$(grep -c "uid 1 is not allowed" "$DLOG")
[ "$lines" -ge 1 ] && [ "$lines" -le 2 ] && ok "200 refusals of uid 1 logged on $lines line(s)" ||
	fail "200 refusals of uid 1 logged on $lines lines"
daemon_stop "engine that refused uid 1"
finish
