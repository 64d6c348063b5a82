#!/usr/bin/env bash
# Description: the engine's socket appearing means it is ready: a watcher polling every 0.1 ms sees NAME.sock only when NAME.ctl is already there, "serving" is already in the log and allmctl answers at once, on three starts with KV events and every bind(2) held 0.2 s by strace (before, that left the ring socket alone for 0.2 s); the name it is bound under while starting is gone after a stop. Before, the ring socket was made before the control plane, and a test that ran allmctl or read the log as soon as it appeared failed in CI.
. "$(dirname "$0")/daemon-common.sh"
CTL=$BUILD_DIR/ctl/allmctl
[ -x "$CTL" ] || { echo "FAIL: $CTL not built"; exit 1; }

# watch_start NAME LOG: wait for NAME.sock, then at once check the rest; prints one line
watch_start() {
	python3 - "$ALLM_RUNTIME_DIR" "$1" "$2" "$CTL" <<'PY'
import os, stat, subprocess, sys, time
rt, name, log, ctl = sys.argv[1:]
sock = os.path.join(rt, name + ".sock")
end = time.monotonic() + 120
while True:
    try:
        if stat.S_ISSOCK(os.lstat(sock).st_mode):
            break
    except FileNotFoundError:
        pass
    if time.monotonic() > end:
        print("no socket in 120 s"); sys.exit(1)
    time.sleep(0.0001)
# nothing may wait from here on: each check is of the moment the socket appeared
try:
    ctl_up = stat.S_ISSOCK(os.lstat(os.path.join(rt, name + ".ctl")).st_mode)
except FileNotFoundError:
    ctl_up = False
logged = any(" serving " in l for l in open(log, errors="replace"))
st = subprocess.run([ctl, "--name", name, "status", "--json"], capture_output=True, text=True,
                    env=dict(os.environ, ALLM_RUNTIME_DIR=rt))
print("ctl-socket" if ctl_up else "NO-ctl-socket",
      "logged" if logged else "NOT-logged",
      "status-ok" if st.returncode == 0 and st.stdout.startswith("{") else
      "status-failed(%d: %s)" % (st.returncode, st.stderr.strip()[:200]))
PY
}

strace -f -qq -o /dev/null true 2>/dev/null ||
	{ echo "SKIP: strace cannot trace here (not installed, or ptrace is not allowed)"; exit 77; }

PORT=$(free_port_pair)
for k in 1 2 3; do
	DNAME=ready$k
	DLOG=$tmp/$DNAME.log
	# every bind(2) held 0.2 s: before, the ring socket was visible for at least that
	# long before the control socket existed. -D: the engine is our child ($!), not
	# strace; LeakSanitizer cannot stop a process that strace traces.
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -D -f -qq -o /dev/null -e trace=bind -e inject=bind:delay_exit=200000 \
		"$ENGINED" --name "$DNAME" --model "$M" --device cpu --profile "$tmp/profile.json" \
		--kv-events-endpoint "tcp://127.0.0.1:$PORT" >"$DLOG" 2>&1 &
	DPID=$!
	got=$(watch_start "$DNAME" "$DLOG")
	[ "$got" = "ctl-socket logged status-ok" ] &&
		ok "start $k: when $DNAME.sock appeared, the control socket was up, 'serving' logged, allmctl answered" ||
		fail "start $k: when $DNAME.sock appeared: $got"
	daemon_stop "start $k" # daemon_check_clean: neither NAME.sock nor .NAME.sock left
done

# an engine killed while starting leaves .NAME.sock; the next start clears it
DNAME=ready1
: >"$ALLM_RUNTIME_DIR/.$DNAME.sock"
daemon_start "$DNAME"
[ ! -e "$ALLM_RUNTIME_DIR/.$DNAME.sock" ] && ok "a stale .$DNAME.sock is cleared by the next start" ||
	fail "stale .$DNAME.sock still there"
daemon_stop "after a stale starting name"
finish
