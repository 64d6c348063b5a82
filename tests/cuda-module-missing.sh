#!/usr/bin/env bash
# Description: on a machine with a GPU (played by a fake libcuda.so.1 with one device) whose CUDA module cannot load (it needs libnotthere.so.13, on no library path), the GPU tests FAIL rather than skip and the error names the missing library; without a driver they skip (77), and allm-engined --device cuda says which library is missing.
set -u
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
FAKE=$BUILD_DIR/tests/gpu/fake
OPS=$BUILD_DIR/tests/gpu/backend-ops
SAMPLING=$BUILD_DIR/tests/gpu/test-device-sampling
ENGINED=$BUILD_DIR/engined/allm-engined
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a GPU here, its module broken: exit 1 and the library named
for t in "$OPS cuda" "$SAMPLING cuda"; do
	LD_LIBRARY_PATH=$FAKE/driver ALLM_CUDA_MODULE=$FAKE/liballm-cuda-broken.so $t >"$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 1 ] && grep -q "FAIL" "$tmp/out" && grep -q "needs libnotthere.so.13, which the dynamic loader cannot find" "$tmp/out" &&
		ok "$(basename "${t% *}"): GPU present, module broken: FAIL naming libnotthere.so.13" ||
		fail "$(basename "${t% *}"): exit $rc: $(cat "$tmp/out")"
done
LD_LIBRARY_PATH=$FAKE/driver ALLM_CUDA_MODULE=$FAKE/liballm-cuda-broken.so "$ENGINED" --device cuda \
	--runtime-dir "$tmp" --name m >"$tmp/eng" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "needs libnotthere.so.13" "$tmp/eng" &&
	ok "allm-engined --device cuda: exit $rc, the missing library named" ||
	fail "allm-engined --device cuda: exit $rc: $(tail -n 3 "$tmp/eng")"

# no driver at all (none on this path): skipped, as before
if [ ! -e /dev/nvidiactl ]; then
	env -u LD_LIBRARY_PATH ALLM_CUDA_MODULE=$FAKE/liballm-cuda-broken.so "$OPS" cuda >"$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 77 ] && ok "no GPU: skipped (77)" || fail "no GPU: exit $rc: $(cat "$tmp/out")"
fi
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "cuda-module-missing: all checks passed"
