# Description: helpers the control-plane integration tests source (not a test): daemon-common.sh plus allmctl's path, ctl_start (an engine on any model flags), ctl_json (one key of a JSON reply) and ctl_check_clean (no .ctl/.pub left).
# shellcheck shell=bash
. "$(dirname "$0")/daemon-common.sh"
CTL=$BUILD_DIR/ctl/allmctl
[ -x "$CTL" ] || { echo "FAIL: $CTL not built"; exit 1; }

# ctl_start NAME MODEL-FLAGS...: like daemon_start, with the model chosen by the
# caller (e.g. --dummy small) and a profile of its own per model.
ctl_start() {
	local name=$1 i
	shift
	DNAME=$name
	DLOG=$tmp/$name.log
	"$ENGINED" --name "$name" --device cpu "$@" >"$DLOG" 2>&1 &
	DPID=$!
	# up to 120 s while it lives: a first start calibrates its predictors, which
	# under ThreadSanitizer on a slow machine took more than 30 s
	for i in $(seq 2400); do
		[ -S "$ALLM_RUNTIME_DIR/$name.ctl" ] && [ -S "$ALLM_RUNTIME_DIR/$name.sock" ] && return 0
		kill -0 $DPID 2>/dev/null || break
		sleep 0.05
	done
	echo "FAIL: allm-engined --name $name did not start; its log:"
	tail -n 20 "$DLOG"
	exit 1
}

# ctl_json FILE PATH: the value at a dotted PATH of the JSON object in FILE
# (python repr for maps; "None" for null).
ctl_json() {
	python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'):
    d = d[k]
print(d)
PY
}

# ctl_check_clean WHAT: after the engine exited, no control socket file is left.
ctl_check_clean() {
	local what=$1
	[ ! -e "$ALLM_RUNTIME_DIR/$DNAME.ctl" ] && [ ! -e "$ALLM_RUNTIME_DIR/$DNAME.pub" ] &&
		ok "$what: control sockets removed" ||
		fail "$what: left behind: $(ls "$ALLM_RUNTIME_DIR")"
}
