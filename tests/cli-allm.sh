#!/usr/bin/env bash
# Description: the allm CLI against the fake engine of test-clientlib (--serve): streamed text, --ids, --json (valid JSON, escaped text), --posix-shm, exit status 1 on a refused request, a first token without text, Ctrl-C cancels (130), bad flags exit 2, no engine exits 1 with a clear message.
set -u

BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
ALLM=$BUILD_DIR/clientlib/allm
FAKE=$BUILD_DIR/tests/test-clientlib
for b in "$ALLM" "$FAKE"; do
	[ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-cli.XXXXXX")
fake_pid=
cleanup() {
	[ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$FAKE" --serve "$tmp" eng &
fake_pid=$!
for _ in $(seq 100); do [ -S "$tmp/eng.sock" ] && break; sleep 0.05; done
[ -S "$tmp/eng.sock" ] || { echo "FAIL: the fake engine did not start"; exit 1; }

A=("$ALLM" --runtime-dir "$tmp" --name eng)
piece=$(python3 -c 'print("".join(chr(65 + i % 26) for i in range(150)))' 2>/dev/null ||
	awk 'BEGIN { for (i = 0; i < 150; i++) printf "%c", 65 + i % 26 }')
want_text="Hello$piece, world"

# streamed text, stats line on stderr
out=$("${A[@]}" generate --prompt "aaaa" 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] || fail "stream: exit $rc: $(cat "$tmp/err")"
[ "$out" = "$want_text" ] || fail "stream: got '$out'"
grep -q "4 prompt + 3 generated tokens (length)" "$tmp/err" || fail "stream: stats line: $(cat "$tmp/err")"

# flags after the command work too; the environment names the runtime dir
out=$(ALLM_RUNTIME_DIR=$tmp "$ALLM" generate --name eng --prompt "aa" --temperature 0 --top-k 5 \
	--top-p 0.9 --seed 7 --max-tokens 3 --stop-ids 1,2 --ignore-eos 2>/dev/null) ||
	fail "env runtime dir / sampling flags: exit $?"
[ "$out" = "$want_text" ] || fail "env: got '$out'"

# --ids
"${A[@]}" generate --prompt-ids 0,1,2 --ids >"$tmp/ids" 2>"$tmp/err" || fail "--ids: exit $?"
printf 'prompt: 0 1 2\ngenerated: 100 101 102\ntext: %s\n' "$want_text" | cmp -s - "$tmp/ids" ||
	fail "--ids output: $(cat "$tmp/ids")"
"${A[@]}" generate --prompt "aaa" --ids >"$tmp/ids" 2>/dev/null || fail "--ids text: exit $?"
printf 'generated: 100 101 102\ntext: %s\n' "$want_text" | cmp -s - "$tmp/ids" ||
	fail "--ids text output: $(cat "$tmp/ids")"

# a first token without text: nothing to copy (under UBSan, a memcpy(NULL, ..., 0)
# here failed the sanitizer suite)
"${A[@]}" generate --prompt EMPTY --ids >"$tmp/ids" 2>"$tmp/err" || fail "empty piece: exit $?: $(cat "$tmp/err")"
printf 'generated: 5 6\ntext: ok\n' | cmp -s - "$tmp/ids" || fail "empty piece output: $(cat "$tmp/ids")"

# --json (and --posix-shm)
"${A[@]}" generate --prompt-ids "0, 1" --json --posix-shm >"$tmp/json" 2>"$tmp/err" ||
	fail "--json: exit $?: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/json")" -eq 1 ] || fail "--json: stdout is not one line"
if command -v python3 >/dev/null; then
	python3 - "$tmp/json" "$want_text" <<'PY' || fail "--json content: $(cat "$tmp/json")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["generated_ids"] == [100, 101, 102], o
assert o["prompt_ids"] == [0, 1], o
assert o["text"] == sys.argv[2], o
assert o["finish_reason"] == "length" and o["error"] is None, o
assert o["n_prompt"] == 2 and o["n_generated"] == 3 and o["preemptions"] == 1, o
assert o["queue_ms"] == 1.0 and o["ttft_ms"] == 2.0 and o["total_ms"] == 3.0, o
assert o["model"] == "fake-model", o
PY
fi

# JSON escaping: quotes, backslash, control characters, invalid UTF-8 (as U+FFFD)
"${A[@]}" generate --prompt ESCAPE --json >"$tmp/json" 2>/dev/null || fail "escape --json: exit $?"
if command -v python3 >/dev/null; then
	python3 - "$tmp/json" <<'PY' || fail "escape --json: $(cat "$tmp/json")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["text"] == 'say "hi"\\\n\t\x01\ufffd\u00e9\u20ac\U0001F600', repr(o["text"])
assert o["finish_reason"] == "stop" and o["generated_ids"] == [7, 8, 9], o
PY
fi

# a refused request: exit 1, the engine's message; --json says error
"${A[@]}" generate --prompt REJECT >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "refused: exit $rc"
grep -q "rejected: test" "$tmp/err" || fail "refused: message: $(cat "$tmp/err")"
"${A[@]}" generate --prompt REJECT --json >"$tmp/json" 2>/dev/null; rc=$?
[ $rc -eq 1 ] || fail "refused --json: exit $rc"
grep -q '"finish_reason": "error", "error": "rejected: test"' "$tmp/json" ||
	fail "refused --json: $(cat "$tmp/json")"

# Ctrl-C cancels the request in the engine, then exits 130
"${A[@]}" generate --prompt HOLD >/dev/null 2>"$tmp/err" &
pid=$!
sleep 0.3
kill -INT $pid
wait $pid; rc=$?
[ $rc -eq 130 ] || fail "interrupt: exit $rc: $(cat "$tmp/err")"
grep -q "(cancelled)" "$tmp/err" || fail "interrupt: no cancelled FINAL: $(cat "$tmp/err")"

# bad flags: exit 2 with a message
bad() {
	local re=$1
	shift
	"${A[@]}" "$@" >/dev/null 2>"$tmp/err"
	local rc=$?
	[ $rc -eq 2 ] || fail "bad flags ($*): exit $rc"
	grep -qiE -- "$re" "$tmp/err" || fail "bad flags ($*): message: $(cat "$tmp/err")"
}
bad "no command" --prompt x
bad "unknown command" frobnicate --prompt x
bad "exactly one of" generate
bad "exactly one of" generate --prompt x --prompt-ids 1
bad "max-tokens" generate --prompt x --max-tokens 0
bad "temperature" generate --prompt x --temperature -1
bad "top-p" generate --prompt x --top-p 0
bad "top-k" generate --prompt x --top-k -2
bad "seed" generate --prompt x --seed abc
bad "empty" generate --prompt-ids ""
bad "not a list of integers" generate --prompt-ids 1,,2
bad "not a list of integers" generate --prompt-ids a
bad "unexpected" generate --prompt-ids "1;2"
bad "unexpected|not a list" generate --prompt-ids "1,"
bad "out of range" generate --prompt-ids -1
bad "at most 4" generate --prompt x --stop-ids 1,2,3,4,5
bad "unknown flag" generate --prompt x --frob
bad "missing value" generate --prompt
bad "exclusive" generate --prompt x --ids --json
bad "name" --name a/b generate --prompt x

# no engine: exit 1, a clear message naming the socket
"$ALLM" --runtime-dir "$tmp" --name nobody generate --prompt x >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "no engine: exit $rc"
grep -q "cannot connect to $tmp/nobody.sock" "$tmp/err" || fail "no engine: message: $(cat "$tmp/err")"

"$ALLM" --help | grep -q "usage: allm" || fail "--help"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "cli-allm: all checks passed"
