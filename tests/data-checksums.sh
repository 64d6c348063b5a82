#!/usr/bin/env bash
# Description: the model files kept in the repository (data/) are exactly the ones data/README.md lists by sha256 — the embedded default model is built from them and the tests read them, so a corrupted or replaced file fails here first.
set -u
DATA_DIR=${DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}
cd "$DATA_DIR" || { echo "FAIL: no $DATA_DIR"; exit 1; }
sums=$(sed -n '/^[0-9a-f]\{64\}  /p' README.md)
n=$(printf '%s\n' "$sums" | grep -c .)
[ "$n" -ge 8 ] || { echo "FAIL: data/README.md lists $n checksums, expected at least 8"; exit 1; }
if printf '%s\n' "$sums" | sha256sum --quiet -c -; then
	echo "ok: $n files match data/README.md"
else
	echo "FAIL: a file under data/ does not match its checksum in data/README.md"
	exit 1
fi
