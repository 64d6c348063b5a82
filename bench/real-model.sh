#!/usr/bin/env bash
# The real model (SmolLM2-135M-Instruct, GGUF Q4_1, fetched by tools/models.sh):
#   speed   prefill and decode tok/s of `allm-run --bench` (f32 and --quant q8_0
#           weights) beside llama.cpp's on the same file (bench/real-model-llama-cpp.py,
#           run by $LLAMA_CPP_PY, a python with llama-cpp-python), THREADS threads, the
#           three alternating, REPS rounds; every line printed, then the medians
#   table   the paper's table (adaptive / recompute / swap) on this model: bench/paper-
#           table.sh with N requests, OUTPUTS max outputs, the paper's 128 / 64 blocks
#   gateway 64 streams through allm-gateway vs the rings: bench/gateway-vs-rings.sh
# Usage: LLAMA_CPP_PY=/tmp/ref-venv/bin/python bench/real-model.sh [speed] [table] [gateway]
#        (default: all three; REPS=3 THREADS=2 N=32 OUTPUTS=64 GW_N=64 GW_T=32)
# Results: results/cpu/smollm2/{speed.txt, paper-table*, gateway-vs-rings.json}
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
B=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)
G=$(bash "$ROOT/tools/models.sh")
OUT=$HERE/results/cpu/smollm2
REPS=${REPS:-3}
THREADS=${THREADS:-2}
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- speed table gateway

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for what in "$@"; do
	case $what in
	speed)
		[ -x "${LLAMA_CPP_PY:-}" ] || { echo "speed: set LLAMA_CPP_PY to a python with llama-cpp-python" >&2; exit 1; }
		{
			echo "# $(date -u +%FT%TZ) $(git -C "$ROOT" rev-parse --short HEAD), $THREADS threads, $REPS rounds, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
			for r in $(seq "$REPS"); do
				for kind in f32 q8_0 llama.cpp; do
					case $kind in
					f32) line=$("$B/tools/allm-run" --model "$G" --device cpu --threads "$THREADS" --bench --max-tokens 128 2>/dev/null) ;;
					q8_0) line=$("$B/tools/allm-run" --model "$G" --device cpu --threads "$THREADS" --quant q8_0 --bench --max-tokens 128 2>/dev/null) ;;
					llama.cpp) line=$("$LLAMA_CPP_PY" "$HERE/real-model-llama-cpp.py" "$G" "$THREADS") ;;
					esac
					echo "round $r $kind: $line"
				done
			done
			echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
		} | tee "$OUT/speed.txt"
		for kind in f32 q8_0 llama.cpp; do
			p=$(grep " $kind: " "$OUT/speed.txt" | sed -n 's/.*prefill [0-9]* tokens in [0-9.]* ms = \([0-9.]*\) tok\/s.*/\1/p' | median)
			d=$(grep " $kind: " "$OUT/speed.txt" | sed -n 's/.*decode [0-9]* tokens in [0-9.]* ms = \([0-9.]*\) tok\/s.*/\1/p' | median)
			echo "median $kind: prefill $p tok/s, decode $d tok/s" | tee -a "$OUT/speed.txt"
		done
		;;
	table)
		MODEL="--model $G" RESULTS=$OUT N=${N:-32} OUTPUTS=${OUTPUTS:-64} \
			bash "$HERE/paper-table.sh"
		;;
	gateway)
		MODEL_DIR=$G N=${GW_N:-64} C=64 T=${GW_T:-32} OUT=$OUT/gateway-vs-rings.json \
			bash "$HERE/gateway-vs-rings.sh" "$B"
		;;
	*) echo "unknown part '$what' (speed, table, gateway)" >&2; exit 2 ;;
	esac
done
