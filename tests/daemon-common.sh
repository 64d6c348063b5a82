# Description: helpers the daemon integration tests source (not a test): start and stop a real allm-engined on stories260K in a private runtime dir, compute expected ids with allm-run, and check that a stopped daemon left no blocks, socket or /dev/shm objects behind.
# shellcheck shell=bash
#
# Usage (from a test script):
#   . "$(dirname "$0")/daemon-common.sh"     # sets BUILD_DIR, DATA_DIR, M, tmp, RUN...
#   daemon_start NAME [allm-engined flags...] # -> $DPID, log in $tmp/NAME.log
#   ... ; daemon_stop NAME                    # SIGTERM, wait, then daemon_check_clean
# Everything the test started is killed on exit (trap), and $tmp is removed.

set -u

BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
DATA_DIR=${DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}
M=$DATA_DIR/models/stories260K
ENGINED=$BUILD_DIR/engined/allm-engined
ALLM=$BUILD_DIR/clientlib/allm
RUN=$BUILD_DIR/tools/allm-run

[ -f "$M/model.safetensors" ] || { echo "FAIL: $M is missing from the checkout"; exit 1; }
for b in "$ENGINED" "$ALLM" "$RUN"; do
	[ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-daemon.XXXXXX")
export ALLM_RUNTIME_DIR=$tmp/run
DPID=
BG_PIDS=()
fails=0

cleanup() {
	local p
	for p in "${BG_PIDS[@]}" $DPID; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if [ "${KEEP_TMP:-0}" = 1 ]; then
		echo "kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() {
	echo "ok: $*"
}
finish() {
	if [ $fails -gt 0 ]; then
		echo "$fails failures"
		exit 1
	fi
	echo "$(basename "$0"): all checks passed"
	exit 0
}

# daemon_start NAME [flags...]: starts allm-engined on stories260K (CPU, a profile in
# $tmp shared by every daemon of the test) and waits for its socket.
daemon_start() {
	local name=$1
	shift
	DNAME=$name
	DLOG=$tmp/$name.log
	"$ENGINED" --name "$name" --model "$M" --device cpu --profile "$tmp/profile.json" \
		"$@" >"$DLOG" 2>&1 &
	DPID=$!
	local i
	for i in $(seq 400); do
		[ -S "$ALLM_RUNTIME_DIR/$name.sock" ] && return 0
		kill -0 $DPID 2>/dev/null || break
		sleep 0.025
	done
	echo "FAIL: allm-engined --name $name did not start; its log:"
	tail -n 20 "$DLOG"
	exit 1
}

# file_has FILE [-E] PATTERN: whether a server's log FILE has a matching line
# within 5 s (engine and gateway write their logs from their own loops: a line about
# what just happened, or about start-up, may land a moment after a client or the
# listening socket saw it happen)
file_has() {
	local file=$1 i
	shift
	for i in $(seq 100); do
		grep -q "$@" "$file" && return 0
		sleep 0.05
	done
	return 1
}

# log_has [-E] PATTERN: file_has on the engine's log ($DLOG)
log_has() {
	file_has "$DLOG" "$@"
}

# free_port_pair: a port P on 127.0.0.1 free with P+1 (--kv-events-endpoint binds
# its replay socket on PORT+1)
free_port_pair() {
	python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randint(20000, 60000)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass
PY
}

daemon_alive() {
	kill -0 "$DPID" 2>/dev/null
}

# daemon_check_clean: after the daemon exited: every block back in its pool, no
# socket left (nor the name it was bound under while starting), no /dev/shm object
# of this daemon's (the names carry its pid).
daemon_check_clean() {
	local what=$1
	grep -q "stopped; KV blocks in use: GPU 0, CPU 0;" "$DLOG" &&
		ok "$what: KV pools fully free" ||
		fail "$what: no 'GPU 0, CPU 0' line: $(grep stopped "$DLOG" || tail -n 3 "$DLOG")"
	[ ! -e "$ALLM_RUNTIME_DIR/$DNAME.sock" ] && [ ! -e "$ALLM_RUNTIME_DIR/.$DNAME.sock" ] &&
		ok "$what: socket removed" || fail "$what: $ALLM_RUNTIME_DIR/$DNAME.sock or .$DNAME.sock left behind"
	local left
	left=$(ls /dev/shm 2>/dev/null | grep -c "^allm-$DPID-")
	[ "$left" -eq 0 ] && ok "$what: no /dev/shm/allm-$DPID-* left" ||
		fail "$what: $left /dev/shm/allm-$DPID-* objects left"
}

# daemon_stop WHAT: SIGTERM; the daemon must exit 0 within 30 s and leave nothing.
daemon_stop() {
	local what=$1 i rc
	kill -TERM "$DPID" 2>/dev/null
	for i in $(seq 600); do
		daemon_alive || break
		sleep 0.05
	done
	if daemon_alive; then
		fail "$what: the daemon did not exit 30 s after SIGTERM"
		kill -9 "$DPID"
	fi
	wait "$DPID"
	rc=$?
	if [ $rc -eq 0 ]; then
		ok "$what: daemon exited 0"
	else
		fail "$what: daemon exit status $rc"
		grep -B2 -A25 -E "ERROR|Sanitizer|FATAL" "$DLOG" | head -n 60
	fi
	daemon_check_clean "$what"
	local pid=$DPID
	DPID=
	DPID_LAST=$pid
}

# other_uid_tree PATH...: copies these build outputs (paths under BUILD_DIR, e.g.
# clientlib/allm), libadaptivellm and the model into $tmp/other-uid (mode 755, the
# build tree's layout so each binary's RUNPATH still finds the library), for tests that
# run programs as another uid: the clone may lie in a directory only its owner can
# enter (any mktemp -d, root's home), where that uid can neither run the build's
# binaries nor read the model. Sets OTHER_BUILD and OTHER_M. The caller makes $tmp
# reachable (chmod 711).
other_uid_tree() {
	local p
	OTHER_BUILD=$tmp/other-uid/build
	OTHER_M=$tmp/other-uid/model
	mkdir -p "$OTHER_BUILD/clientlib" "$OTHER_M"
	cp -L "$BUILD_DIR"/clientlib/libadaptivellm.so.[0-9] "$OTHER_BUILD/clientlib/" # the soname: .so.2 (ABI 2)
	for p in "$@"; do
		mkdir -p "$OTHER_BUILD/$(dirname "$p")"
		cp "$BUILD_DIR/$p" "$OTHER_BUILD/$p"
	done
	cp "$M"/* "$OTHER_M/"
	chmod -R a+rX "$tmp/other-uid"
}

# expected_ids MAX_TOKENS IGNORE_EOS(0/1) PROMPT... -> lines "KIND<TAB>PROMPT<TAB>IDS" on
# stdout (KIND T: text, I: comma-separated ids), greedy, from allm-run; the format
# daemon-client-load --expect reads.
expected_ids() {
	local max=$1 ign=$2 p kind gen
	shift 2
	local extra=()
	[ "$ign" = 1 ] && extra=(--ignore-eos)
	for p in "$@"; do
		if [[ $p =~ ^[0-9]+(,[0-9]+)*$ ]]; then
			kind=I
			gen=$("$RUN" --model "$M" --device cpu --prompt-ids "$p" --max-tokens "$max" \
				--temperature 0 --ids "${extra[@]}" 2>/dev/null | grep '^generated:')
		else
			kind=T
			gen=$("$RUN" --model "$M" --device cpu --prompt "$p" --max-tokens "$max" \
				--temperature 0 --ids "${extra[@]}" 2>/dev/null | grep '^generated:')
		fi
		[ -n "$gen" ] || { echo "FAIL: allm-run gave no ids for '$p'" >&2; exit 1; }
		printf '%s\t%s\t%s\n' "$kind" "$p" "${gen#generated: }"
	done
}

# A fixed list of prompts the load tests cycle through.
PROMPTS=(
	"Once upon a time"
	"The little dog"
	"Lily and Ben went to the park"
	"One day, a big bear"
	"Tom had a red ball. He"
	"The sun was"
	"1,403,407,261,378"
	"1,7,42,300,11,99"
	"She was very happy because"
	"In a small house there lived"
)
