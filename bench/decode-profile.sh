#!/usr/bin/env bash
# Where a batch-1 decode step's time goes, by `perf record` of allm-run --bench on
# --dummy medium (2 threads, a long decode so that loading and the prefill are a
# small part, and those samples are left out by symbol): the share of the samples in
# the GEMV kernels, attention, norms, RoPE, SiLU, the K/V write, sampling, the
# thread pool's hand-offs (spinning and waking), activation quantization, and the
# rest. One line per weight format.
#
# usage: bench/decode-profile.sh [BUILD_DIR]   env: FORMATS ("q4_0 q8_0 f16"),
#   DECODE (512), THREADS (2), KV (f16)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
FORMATS=${FORMATS:-q4_0 q8_0 f16}
DECODE=${DECODE:-512}
THREADS=${THREADS:-2}
KV=${KV:-f16}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
command -v perf >/dev/null || { echo "decode-profile: needs perf" >&2; exit 1; }

for f in $FORMATS; do
  case $f in f32|f16|bf16) w="--dtype $f" ;; *) w="--quant $f" ;; esac
  # shellcheck disable=SC2086
  flock /work/.bench.lock perf record -q -o "$TMP/$f.data" -F 4000 -g -- "$B/tools/allm-run" --dummy medium \
    --threads "$THREADS" $w --kv-cache-dtype "$KV" --bench --max-tokens "$DECODE" --temperature 0 \
    >"$TMP/$f.bench" 2>/dev/null
  perf report -q -i "$TMP/$f.data" --no-children --sort symbol --percent-limit 0 -g none 2>/dev/null |
    sed -n 's/^ *\([0-9.]*\)% *\[[.k]\] *\([^ ]*\).*/\1 \2/p' >"$TMP/$f.syms"
  python3 - "$f" "$TMP/$f.syms" "$TMP/$f.bench" <<'PY'
import re, sys
fmt, syms, bench = sys.argv[1], sys.argv[2], sys.argv[3]
groups = [  # first match wins
    ("load (left out)", r"quantize|allm_model_dummy|splitmix|fill_spec|from_f32|f32_to_|page_fault|clear_page|memset|file_read"),
    ("attention", r"atten|score_block|pv_block|softmax"),
    ("GEMV/GEMM kernels", r"qb_item|item_|amx_|unpack_item|tile_|vnni|gemm_op|gemm_worker|op_tile|op_pack|w16|fma_step|q8_decode|dpbf16|run_group|scale_block"),
    ("activation quantization", r"x_prep|prep_worker|q8x_prep|bf16x_prep"),
    ("K/V write", r"kv_write"),
    ("norms", r"rmsnorm|layernorm"),
    ("RoPE", r"rope"),
    ("SiLU x up, adds", r"silu|_add|relu"),
    ("sampling, argmax, top-k", r"argmax|sampl|topk|logit"),
    ("thread pool hand-offs", r"worker_main|pool_|futex|sched_yield|spin|pthread|syscall|__schedule|_raw_spin"),
]
tot, acc = 0.0, {}
for line in open(syms):
    p, s = line.split(maxsplit=1)
    p, s = float(p), s.strip()
    g = next((n for n, rx in groups if re.search(rx, s)), "other")
    acc[g] = acc.get(g, 0.0) + p
    acc.setdefault("_top_" + g, []).append((p, s))
load = acc.pop("load (left out)", 0.0)
rest = sum(v for k, v in acc.items() if not k.startswith("_top_"))
b = open(bench).read().strip()
m = re.search(r"decode (\d+) tokens in ([\d.]+) ms = ([\d.]+) tok/s", b)
print(f"{fmt}: decode {m.group(3) if m else '?'} tok/s; samples without loading ({100 - load:.0f} % of all):")
for n, _ in [g for g in groups if g[0] != "load (left out)"] + [("other", "")]:
    if n in acc:
        top = ", ".join(f"{s} {p:.1f}" for p, s in sorted(acc['_top_' + n], reverse=True)[:3])
        print(f"  {n:28s} {100 * acc[n] / rest:5.1f} %   (top symbols, % of all samples: {top})")
PY
done
