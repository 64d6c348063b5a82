#!/usr/bin/env bash
# On the GPU machine (no network): unpack the .debs tools/gpu-deps.sh fetched
# (when the system lacks the libraries), build with the CUDA module, run the
# 'gpu' suite, optionally compute-sanitizer, then the CUDA benchmarks.
#
#   bash tools/gpu-test.sh [deps] [build] [test] [sanitize] [bench] | all
#
# Elastic memory's CUDA path alone (the VMM arena, kernels/cuda/cuda-vmm.c), after
# `build`: meson test -C build-gpu backend-pages-cuda backend-pages-cuda-novmm \
#   elastic-cuda --print-errorlogs   (about a minute; ALLM_CUDA_VMM=0 forces the
#   cudaMalloc fallback anywhere).
#
# Steps run in the order given (default: all); each fits the device tool's
# 10-minute limit on its own, and build-gpu/ survives between its calls.
# Results (logs, bench JSON) go to $OUT when set (the device tool's folder),
# else gpu-results/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
P=$ROOT/.gpu-prefix # the unpacked .debs
L=$P/usr/lib/x86_64-linux-gnu
RES=${OUT:-$ROOT/gpu-results}
mkdir -p "$RES"
export PATH=/usr/local/cuda/bin:$PATH
JOBS=$(nproc)

die() { echo "gpu-test: $*" >&2; exit 1; }

have_system_deps() {
	command -v meson >/dev/null && command -v ninja >/dev/null &&
		pkg-config --exists jansson liburing libzmq msgpack ncursesw openblas 2>/dev/null
}

# Point the build and the programs at the unpacked prefix (no-op without one).
use_prefix() {
	[ -d "$P" ] || return 0
	export PATH=$P/usr/bin:$PATH
	export PYTHONPATH=$P/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}
	export PKG_CONFIG_PATH=$L/pkgconfig:$L/openblas-pthread/pkgconfig:$P/usr/share/pkgconfig
	export LD_LIBRARY_PATH=$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LIBRARY_PATH=$L:$L/openblas-pthread
	export CPATH=$P/usr/include:$P/usr/include/x86_64-linux-gnu
	# libraries the linked ones need (libzmq -> libsodium, libpgm, libnorm...)
	export LDFLAGS="-Wl,-rpath-link,$L -Wl,-rpath-link,$L/openblas-pthread"
}

step_deps() {
	if have_system_deps; then
		echo "deps: the system has them"
		return
	fi
	ls .gpu-debs/*.deb >/dev/null 2>&1 ||
		die "missing libraries and no .gpu-debs/: run tools/gpu-deps.sh with network, carry .gpu-debs"
	rm -rf "$P"
	mkdir -p "$P"
	for d in .gpu-debs/*.deb; do dpkg -x "$d" "$P"; done
	# the .pc files name /usr: make them name the prefix
	find "$P" -name '*.pc' -exec sed -i -e "s|^prefix=/usr\$|prefix=$P/usr|" \
		-e "s|=/usr/|=$P/usr/|g" {} +
	# Debian picks the OpenBLAS flavour with update-alternatives, which dpkg -x
	# does not run: link the pthread one where the linker and loader look
	for f in libopenblas.so libopenblas.so.0; do
		[ -e "$L/$f" ] || ln -sf "openblas-pthread/$f" "$L/$f"
	done
	use_prefix
	have_system_deps || die "the unpacked prefix still lacks a dependency (pkg-config --list-all)"
	echo "deps: unpacked $(ls .gpu-debs/*.deb | wc -l) packages into $P"
}

step_build() {
	use_prefix
	nvidia-smi -L 2>/dev/null || echo "build: no nvidia-smi (building anyway)"
	if [ ! -f build-gpu/build.ninja ]; then
		meson setup build-gpu -Dcuda=enabled -Dbuildtype=release >"$RES/meson-setup.log" 2>&1 ||
			{ tail -30 "$RES/meson-setup.log"; die "meson setup failed"; }
	fi
	local t0=$SECONDS
	ninja -C build-gpu -j"$JOBS" >"$RES/ninja.log" 2>&1 || { tail -40 "$RES/ninja.log"; die "build failed"; }
	echo "build: ok in $((SECONDS - t0)) s ($(ls -la build-gpu/kernels/cuda/liballm-cuda.so | awk '{print $5}') byte module)"
}

step_test() {
	use_prefix
	local rc=0
	meson test -C build-gpu --suite gpu --print-errorlogs --num-processes 1 \
		>"$RES/test-gpu.log" 2>&1 || rc=$?
	cp build-gpu/meson-logs/testlog.txt "$RES/testlog-gpu.txt" 2>/dev/null || true
	tail -25 "$RES/test-gpu.log"
	# a skipped GPU test here means the module could not start: that is a failure
	if grep -qE '^ *Skipped: *[1-9]' "$RES/test-gpu.log"; then
		grep -h "SKIP" "$RES/testlog-gpu.txt" | head -5
		die "GPU tests skipped on a GPU machine"
	fi
	[ $rc = 0 ] || die "gpu suite failed (see $RES/test-gpu.log)"
}

step_sanitize() {
	use_prefix
	local cs
	cs=$(command -v compute-sanitizer || true)
	[ -n "$cs" ] || { echo "sanitize: no compute-sanitizer in this toolkit: skipped"; return 0; }
	local rc=0
	# memcheck over every op and the device-sampling engine path (the end-to-end
	# test injects faults on purpose, so it is not run under the sanitizer)
	"$cs" --tool memcheck --error-exitcode 3 build-gpu/tests/gpu/backend-ops cuda \
		>"$RES/sanitize-ops.log" 2>&1 || rc=$?
	"$cs" --tool memcheck --error-exitcode 3 build-gpu/tests/gpu/test-device-sampling cuda \
		>"$RES/sanitize-sampling.log" 2>&1 || rc=$?
	"$cs" --tool racecheck --error-exitcode 3 build-gpu/tests/gpu/test-device-sampling cuda \
		>"$RES/racecheck-sampling.log" 2>&1 || rc=$?
	# elastic memory's VMM arena: chunks unmapped, mapped again, written by kernels
	"$cs" --tool memcheck --error-exitcode 3 build-gpu/tests/gpu/test-backend-pages cuda \
		>"$RES/sanitize-pages.log" 2>&1 || rc=$?
	tail -3 "$RES"/sanitize-*.log "$RES"/racecheck-*.log
	[ $rc = 0 ] || die "compute-sanitizer found errors"
}

step_bench() {
	use_prefix
	build-gpu/tests/gpu/bench-cuda --dummy llama-7b --dtype f16 --ctx 512 \
		>"$RES/bench-cuda.json" 2>"$RES/bench-cuda.txt" || { cat "$RES/bench-cuda.txt"; die "bench failed"; }
	cat "$RES/bench-cuda.txt"
	build-gpu/tools/allm-run --device cuda --dummy llama-7b --bench --max-tokens 128 \
		>"$RES/allm-run-bench.txt" 2>&1 || true
	tail -3 "$RES/allm-run-bench.txt"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] && [ "${steps[0]}" != all ] || steps=(deps build test sanitize bench)
for s in "${steps[@]}"; do
	case "$s" in
	deps | build | test | sanitize | bench) "step_$s" ;;
	*) die "unknown step '$s' (deps build test sanitize bench all)" ;;
	esac
done
