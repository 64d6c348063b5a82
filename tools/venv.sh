#!/usr/bin/env bash
# The Python packages tests use, from PyPI, in one venv under build/ (build/venv, or
# $ALLM_VENV): `bash tools/venv.sh PKG...` installs each named package once, at the
# version tools/venv-pins.txt pins (its dependencies pinned there too), and prints the
# venv's python. With no PKG it installs the set every run of the suite needs
# (ALLM_VENV_DEFAULT). A flock keeps tests running in parallel from installing twice;
# a package already installed costs a stat.
#
# Exit status: 0 installed (or already there); 2 a package not in the pins file (pin it
# first); 77 PyPI cannot be reached or pip failed (tests turn this into SKIP, and the
# last lines of pip's log are on stderr).
#
# Tests source tests/venv-common.sh, whose venv_need does the same and exits 77 for them.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PINS=$ROOT/tools/venv-pins.txt
VENV=${ALLM_VENV:-$ROOT/build/venv}
ALLM_VENV_DEFAULT="openai prometheus-client pytest"

[ $# -gt 0 ] || set -- $ALLM_VENV_DEFAULT
norm() { echo "$1" | tr 'A-Z_.' 'a-z--'; } # PEP 503: Foo_Bar.baz == foo-bar-baz
pin_of() {
	local want
	want=$(norm "$1")
	sed -n 's/^\([A-Za-z0-9_.-]*\)==\([^ #]*\).*/\1 \2/p' "$PINS" | while read -r n v; do
		[ "$(norm "$n")" = "$want" ] && { echo "$n==$v"; break; }
	done
}
specs=()
for p in "$@"; do
	s=$(pin_of "$p")
	[ -n "$s" ] || { echo "venv: '$p' has no pin in $PINS: add it there first" >&2; exit 2; }
	specs+=("$s")
done

mkdir -p "$VENV"
exec 9>"$VENV.lock"
flock 9
todo=()
for s in "${specs[@]}"; do
	[ -f "$VENV/.pinned/$s" ] || todo+=("$s")
done
if [ ${#todo[@]} -gt 0 ]; then
	if [ ! -x "$VENV/bin/python" ]; then
		echo "venv: creating $VENV" >&2
		python3 -m venv "$VENV" >"$VENV.log" 2>&1 || {
			echo "venv: python3 -m venv failed (Debian: python3-venv):" >&2
			tail -n 5 "$VENV.log" >&2
			exit 77
		}
	fi
	echo "venv: installing ${todo[*]} from PyPI (log: $VENV.log)" >&2
	# --progress-bar off: these lines go to a log (meson's), a bar would be noise there
	"$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
		--timeout 30 --retries 2 -c "$PINS" "${todo[@]}" >>"$VENV.log" 2>&1 || {
		echo "venv: pip could not install ${todo[*]}:" >&2
		tail -n 5 "$VENV.log" >&2
		exit 77
	}
	mkdir -p "$VENV/.pinned"
	for s in "${todo[@]}"; do touch "$VENV/.pinned/$s"; done
	echo "venv: installed ${todo[*]}" >&2
fi
echo "$VENV/bin/python"
