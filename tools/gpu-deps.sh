#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages a build on the GPU machine
# needs, which has no network: the -dev packages of jansson, liburing, OpenBLAS,
# ZeroMQ, msgpack-c and ncurses, their runtime libraries and every dependency
# below them, plus meson / ninja / pkgconf. Run here, with network; the .debs
# land in .gpu-debs/ (git-ignored) and travel with the tree (the device tool's
# `carry: [".gpu-debs"]`); tools/gpu-test.sh unpacks them there with dpkg -x.
#
# Packages of priority required/important (libc6, libgcc-s1, ...) are part of
# every Debian base system and are left out: unpacking a second libc next to
# the system's would only break things.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-debs
want=(libjansson-dev liburing-dev libopenblas-dev libzmq3-dev libmsgpack-dev libncurses-dev
      pkgconf meson ninja-build)

if [ "${1:-}" != "--no-update" ]; then
	if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
fi
mkdir -p "$out"

# The dependency closure of what we want, first alternative of each "a | b"
# only (what apt would pick), minus a base system the GPU machine has: the
# packages of priority required/important and the closure of build-essential
# and python3 (nvcc needs g++; meson needs python3).
mapfile -t pkgs < <(python3 - "${want[@]}" <<'PY'
import re, subprocess, sys

def deps(pkgs, first_alt_only=True):
    out = subprocess.run(["apt-cache", "depends", "--no-recommends", "--no-suggests",
                          "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                          *pkgs], capture_output=True, text=True).stdout
    res, skip_next = set(), False
    for line in out.splitlines():
        m = re.match(r"\s+(\|?)(?:Pre)?Depends: (\S+)", line)
        if not m:
            continue
        if not skip_next and not m.group(2).startswith("<"):
            res.add(m.group(2).split(":")[0])
        # "|Depends: a" then "Depends: b": keep a, drop b
        skip_next = first_alt_only and (m.group(1) == "|" or skip_next and m.group(1) == "|")
        if m.group(1) != "|":
            skip_next = False if not m.group(1) else skip_next
        if m.group(1) == "|":
            skip_next = True
    return res

def closure(roots):
    seen, todo = set(), set(roots)
    while todo:
        seen |= todo
        todo = deps(sorted(todo)) - seen
    return seen

status = open("/var/lib/dpkg/status").read().split("\n\n")
base = {re.search(r"^Package: (\S+)", b, re.M).group(1) for b in status
        if re.search(r"^Priority: (required|important)", b, re.M)
        and "Status: install ok installed" in b}
base |= closure(["build-essential", "python3"])
for p in sorted(closure(sys.argv[1:]) - base):
    print(p)
PY
)
[ ${#pkgs[@]} -gt 0 ] || { echo "gpu-deps: nothing to download?" >&2; exit 1; }
# C++ / XML headers that only other -dev packages depend on; nothing we build
# includes them and dpkg -x checks no dependencies (-20 MB: the tree travels to
# the GPU machine within a 64 MiB limit).
skip=" libboost-dev libboost1.74-dev libicu-dev icu-devtools libmsgpack-cxx-dev "
keep=()
for p in "${pkgs[@]}"; do [[ "$skip" == *" $p "* ]] || keep+=("$p"); done
pkgs=("${keep[@]}")
rm -f "$out"/*.deb
(cd "$out" && apt-get download "${pkgs[@]}" >/dev/null)
n=$(ls "$out"/*.deb | wc -l)
echo "gpu-deps: ${#pkgs[@]} packages ($n .debs, $(du -sh "$out" | cut -f1)) in $out/"
