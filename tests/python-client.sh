#!/usr/bin/env bash
# Description: the Python package `adaptivellm` (clientlib/python), pip-installed from this tree into build/venv, against a real allm-engined through pytest (tests/python-client.py): ids equal to `allm generate`'s, a stream cancelled halfway frees its blocks, 32 concurrent asyncio streams, a killed engine raises EngineGoneError, bad parameters raise before anything is sent; then the engine stops clean (every block back, nothing left behind).
. "$(dirname "$0")/daemon-common.sh"
. "$(dirname "$0")/venv-common.sh"
TESTS_DIR=$(cd "$(dirname "$0")" && pwd)
# the package built against this build's library (tools/venv.sh: pip install
# ./clientlib/python, offline, redone when its sources or the library change)
export ALLM_BUILD_DIR=$BUILD_DIR
venv_need adaptivellm pytest

daemon_start pyc
export ALLM_TEST_ENGINE=pyc ALLM_TEST_MODEL=$M ALLM_TEST_ENGINED=$ENGINED ALLM_TEST_ALLM=$ALLM \
	ALLM_TEST_ALLMCTL=$BUILD_DIR/ctl/allmctl ALLM_TEST_TMP=$tmp
# the package must load this build's library, not one found elsewhere
export ALLM_LIBRARY
ALLM_LIBRARY="$BUILD_DIR/clientlib/$(readlink "$BUILD_DIR/clientlib/libadaptivellm.so" 2>/dev/null)"
(cd "$tmp" && "$PY" -m pytest -p no:cacheprovider -q -rA "$TESTS_DIR/python-client.py") 2>&1
rc=$?
[ $rc -eq 0 ] && ok "pytest python-client.py" || fail "pytest python-client.py (exit $rc)"
daemon_alive && ok "the engine is still serving" || fail "the engine died; its log: $(tail -n 5 "$DLOG")"
daemon_stop "after the Python clients"
finish
