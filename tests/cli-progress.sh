#!/usr/bin/env bash
# Description: long operations show progress as a redrawn bar on a terminal and as plain occasional lines (no '\r' frames) when stderr is a file: allm-run's calibration (--calibrate-at-start) and request progress, and allm-engined's calibration, both ways; without --calibrate-at-start a fresh profile means a first estimate, said in one line, and no calibration grid.
set -u
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
RUN=$BUILD_DIR/tools/allm-run
ENGINED=$BUILD_DIR/engined/allm-engined
tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-progress.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
has_cr() { grep -q $'\r' "$1"; }

# allm-run, stderr a file: a fresh profile path and --calibrate-at-start force calibration
"$RUN" --device cpu --workload chatbot -n 8 --max-output 8 --temperature 0 --calibrate-at-start \
	--profile "$tmp/p1.json" --json >"$tmp/run.out" 2>"$tmp/run.err" || fail "allm-run exited $?"
! has_cr "$tmp/run.err" && ok "allm-run: no '\\r' in a log" || fail "allm-run wrote '\\r' into a log"
grep -Eq '^calibrating predictors: ([0-9]+)/\1 \(done\)$' "$tmp/run.err" &&
	ok "allm-run: calibration ends with a plain done line" ||
	fail "allm-run: no plain calibration line: $(head -c 400 "$tmp/run.err")"
grep -Eq '^requests: 8/8 \(done\)$' "$tmp/run.err" && ok "allm-run: request progress as lines" ||
	fail "allm-run: no plain request progress line"
# serving at once: no grid, one line about the first estimate
"$RUN" --device cpu --workload chatbot -n 8 --max-output 8 --temperature 0 \
	--profile "$tmp/p0.json" --json >"$tmp/est.out" 2>"$tmp/est.err" || fail "allm-run (estimate) exited $?"
! grep -q 'calibrating predictors' "$tmp/est.err" && grep -q 'predictors: a first estimate' "$tmp/est.err" &&
	ok "allm-run without --calibrate-at-start: a first estimate, no grid" ||
	fail "allm-run without --calibrate-at-start: $(head -c 400 "$tmp/est.err")"

# allm-engined, stderr a file
export ALLM_RUNTIME_DIR=$tmp/rt
"$ENGINED" --name prog --device cpu --profile "$tmp/p2.json" --calibrate-at-start 2>"$tmp/eng.err" &
pid=$!
for _ in $(seq 100); do grep -q 'prog.sock' "$tmp/eng.err" && break; sleep 0.1; done
kill -TERM $pid; wait $pid
! has_cr "$tmp/eng.err" && ok "allm-engined: no '\\r' in its log" || fail "allm-engined wrote '\\r' into its log"
grep -Eq '^allm-engined: calibrating predictors: ([0-9]+)/\1 \(done\)$' "$tmp/eng.err" &&
	ok "allm-engined: calibration as plain lines" ||
	fail "allm-engined: no plain calibration line: $(head -c 400 "$tmp/eng.err")"

# on a terminal (script(1) gives it one): a bar redrawn with '\r'
if command -v script >/dev/null; then
	script -qec "$RUN --device cpu --workload chatbot -n 8 --max-output 8 --temperature 0 --profile $tmp/p3.json --calibrate-at-start --json >/dev/null" \
		"$tmp/tty.log" >/dev/null 2>&1
	has_cr "$tmp/tty.log" && grep -q 'calibrating predictors \[' "$tmp/tty.log" &&
		ok "allm-run on a terminal: a redrawn bar" || fail "allm-run on a terminal drew no bar"
else
	echo "note: script(1) missing: terminal case not checked"
fi
[ $fails -eq 0 ] && echo "all progress checks passed" || exit 1
