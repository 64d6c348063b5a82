# Description: helpers the gateway integration tests source (not a test): ctl-common.sh (daemon-common.sh, allmctl) plus allm-gateway's path, gw_start (a gateway on a free port, waited for), gw_up (its engine connected), gw_stop, and gw_py (the openai Python SDK and prometheus-client's parser, installed once into build/venv).
# shellcheck shell=bash
. "$(dirname "$0")/ctl-common.sh"
GATEWAY=$BUILD_DIR/engined/allm-gateway
[ -x "$GATEWAY" ] || { echo "FAIL: $GATEWAY not built"; exit 1; }
TESTS_DIR=$(cd "$(dirname "$0")" && pwd)
command -v curl >/dev/null || { echo "FAIL: curl is not installed (tools/install-deps.sh)"; exit 1; }

# gw_py: the test clients no one here wrote, from PyPI — the openai SDK and
# prometheus-client's text parser — installed once into build/venv (tools/venv.sh,
# pinned in tools/venv-pins.txt). Sets PY, the venv's python. Exits 77 only when
# PyPI cannot be reached.
. "$(dirname "${BASH_SOURCE[0]}")/venv-common.sh"
gw_py() {
	venv_need openai prometheus-client
}

# gw_start ENGINE [allm-gateway flags...]: a gateway on a free port; sets GW_PID,
# GW_PORT, GW_URL, GW_LOG (the log is $tmp/gw-N.log, N counting up).
GW_N=0
gw_start() {
	local engine=$1 i
	shift
	GW_N=$((GW_N + 1))
	GW_LOG=$tmp/gw-$GW_N.log
	"$GATEWAY" --engine "$engine" --port 0 "$@" >"$GW_LOG" 2>&1 &
	GW_PID=$!
	BG_PIDS+=("$GW_PID")
	GW_PORT=
	for i in $(seq 400); do
		GW_PORT=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$GW_LOG" | head -n 1)
		[ -n "$GW_PORT" ] && break
		kill -0 "$GW_PID" 2>/dev/null || break
		sleep 0.025
	done
	if [ -z "$GW_PORT" ]; then
		echo "FAIL: allm-gateway did not start; its log:"
		tail -n 20 "$GW_LOG"
		exit 1
	fi
	GW_URL=http://127.0.0.1:$GW_PORT
}

# gw_up URL: waits until GET /health answers 200 (the gateway reached its engine).
gw_up() {
	local i
	for i in $(seq 400); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0
		sleep 0.025
	done
	echo "FAIL: $1/health never answered 200"
	return 1
}

# gw_stop PID WHAT: SIGTERM; the gateway must exit 0 within 15 s.
gw_stop() {
	local pid=$1 what=$2 i rc
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		fail "$what: the gateway did not exit 15 s after SIGTERM"
		kill -9 "$pid"
	fi
	wait "$pid"
	rc=$?
	if [ $rc -eq 0 ]; then
		ok "$what: gateway exited 0"
	else
		fail "$what: gateway exit status $rc"
		grep -h -B2 -A25 -E "ERROR|Sanitizer|FATAL" "$tmp"/gw-*.log | head -n 60
	fi
}

# reference_text PROMPT MAX_TOKENS [allm-run flags]: the greedy text allm-run makes
# in-process (no daemon, no gateway), as a JSON string, for comparing with what HTTP
# clients got. allm-run decodes the generated ids alone, so SentencePiece drops the
# space of their first word; after a prompt that space stays (as vLLM returns it),
# so it is put back when the first generated piece starts with "▁".
reference_text() {
	local p=$1 n=$2
	shift 2
	"$RUN" --model "$M" --device cpu --prompt "$p" --max-tokens "$n" --temperature 0 "$@" --json \
		2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
vocab = {i: t for t, i in json.load(open(sys.argv[1]))["model"]["vocab"].items()}
space = r["generated_ids"] and vocab.get(r["generated_ids"][0], "").startswith("\u2581")
print(json.dumps((" " if space else "") + r["text"]))' "$M/tokenizer.json"
}
