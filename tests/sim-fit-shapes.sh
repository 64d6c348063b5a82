#!/usr/bin/env bash
# Description: allm-sim-fit times every GEMM the executor runs: the cpu-local profile it fits on stories260K has a measured curve for each matrix shape of the model (q, k and v, o, gate and up, down, lm_head), so no call escapes its timing proxy (a fused call such as gemm_multi would, and the simulated device would then price shapes nobody measured).
set -u
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
DATA_DIR=${DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}
FIT=$BUILD_DIR/tools/allm-sim-fit
M=$DATA_DIR/models/stories260K
[ -x "$FIT" ] || { echo "FAIL: $FIT not built"; exit 1; }
[ -d "$M" ] || { echo "FAIL: $M is missing from the checkout"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the JSON"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sim-fit-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$FIT" --model "$M" --threads 1 --repeat 3 --quiet --out "$tmp/p.json" 2>"$tmp/err" ||
	{ echo "FAIL: allm-sim-fit: $(cat "$tmp/err")"; exit 1; }
python3 - "$tmp/p.json" "$M/config.json" <<'PY'
import json, sys
prof, cfg = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
D, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
H = cfg["num_attention_heads"]
KV = cfg.get("num_key_value_heads", H)
hd = cfg.get("head_dim", D // H)
want = {"q": (D, H * hd), "k and v": (D, KV * hd), "o": (H * hd, D), "gate and up": (D, F),
        "down": (F, D), "lm_head": (D, V)}
have = {(s["k"], s["m"]) for s in prof["gemm_shapes"]}
bad = 0
for name, km in want.items():
    ok = km in have
    print(("ok  " if ok else "FAIL") + f" {name}: k={km[0]} m={km[1]} " + ("timed" if ok else "never timed"))
    bad += not ok
sys.exit(1 if bad else 0)
PY
