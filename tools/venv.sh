#!/usr/bin/env bash
# The Python packages tests use, from PyPI, in one venv under build/ (build/venv, or
# $ALLM_VENV): `bash tools/venv.sh PKG...` installs each named package once, at the
# version tools/venv-pins.txt pins (its dependencies pinned there too), and prints the
# venv's python. With no PKG it installs the set every run of the suite needs
# (ALLM_VENV_DEFAULT). A flock keeps tests running in parallel from installing twice;
# a package already installed costs a stat.
#
# PKG `adaptivellm` is this clone's own package (clientlib/python): pip installs it from
# the tree, offline (--no-build-isolation --no-index, with the pinned setuptools and
# wheel), built against include/ and build/'s libadaptivellm ($ALLM_BUILD_DIR when
# set); it is reinstalled whenever its sources, the public headers or the library change.
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
local_pkg=
args=()
for p in "$@"; do
	if [ "$(norm "$p")" = adaptivellm ]; then
		local_pkg=1
		args+=(setuptools wheel) # what building it needs, pinned like the rest
	else
		args+=("$p")
	fi
done
set -- "${args[@]}"
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
if [ -n "$local_pkg" ]; then
	BUILD=${ALLM_BUILD_DIR:-$ROOT/build}
	LIB="$BUILD/clientlib/$(readlink "$BUILD/clientlib/libadaptivellm.so" 2>/dev/null)"
	[ -f "$LIB" ] || { echo "venv: adaptivellm: $BUILD/clientlib/libadaptivellm.so is not built (tools/build.sh)" >&2; exit 2; }
	# what the installed copy was built from: its sources, the headers, the library
	stamp=$( (cd "$ROOT" && find clientlib/python/adaptivellm clientlib/python/src include/adaptivellm \
		clientlib/python/setup.py clientlib/python/pyproject.toml -type f \( -name '*.py' -o -name '*.pyi' -o -name '*.c' -o \
		-name '*.h' -o -name '*.toml' -o -name py.typed \) -print0 | sort -z | xargs -0 sha256sum;
		echo "$LIB"; sha256sum <"$LIB") | sha256sum | cut -c1-16)
	if [ ! -f "$VENV/.pinned/adaptivellm-local-$stamp" ]; then
		echo "venv: installing ./clientlib/python (log: $VENV.log)" >&2
		ALLM_BUILD_DIR=$BUILD "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
			--no-build-isolation --no-index --no-deps --force-reinstall "$ROOT/clientlib/python" \
			>>"$VENV.log" 2>&1 || {
			echo "venv: pip could not build ./clientlib/python:" >&2
			tail -n 15 "$VENV.log" >&2
			exit 1 # our own code failed: not a network problem to skip over
		}
		rm -f "$VENV"/.pinned/adaptivellm-local-*
		touch "$VENV/.pinned/adaptivellm-local-$stamp"
	fi
fi
echo "$VENV/bin/python"
