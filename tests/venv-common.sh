# Description: helper the tests that drive the engine with Python clients source (not a test): venv_need PKG... installs the packages (pinned in tools/venv-pins.txt) into build/venv once and sets PY to its python; it exits 77 (SKIP) only where PyPI cannot be reached.
# shellcheck shell=bash

# venv_need PKG...: sets PY (the venv's python), or exits the test: 77 when pip cannot
# reach PyPI, 1 when a package is not pinned.
venv_need() {
	local root out rc
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	out=$(bash "$root/tools/venv.sh" "$@" 2>"${tmp:-/tmp}/venv.err")
	rc=$?
	case $rc in
	0) PY=$out ;;
	77)
		echo "SKIP: cannot install $* from PyPI:"
		cat "${tmp:-/tmp}/venv.err"
		exit 77
		;;
	*)
		echo "FAIL: tools/venv.sh $*: $(cat "${tmp:-/tmp}/venv.err")"
		exit 1
		;;
	esac
	export PY
}
