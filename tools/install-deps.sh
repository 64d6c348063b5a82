#!/usr/bin/env bash
# Installs every Debian package the build and the tests need.
# Idempotent: packages already present are skipped by apt. Runs as root or via sudo.
set -euo pipefail

PKGS=(
  build-essential meson ninja-build pkg-config python3
  liburing-dev libzmq3-dev libmsgpack-dev libncurses-dev libjansson-dev
  libopenblas-dev gnuplot-nox clang libclang-rt-14-dev tmux
  libmicrohttpd-dev curl python3-jinja2
  libpcre2-dev
  haproxy iproute2 strace
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" = 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
