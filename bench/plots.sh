#!/usr/bin/env bash
# Draws the figures from the .dat files tables.py (and sim-tables.py) wrote beside
# the JSON, as PNG and SVG in the same folder: fig3-throughput, fig4-turnaround,
# fig5-predictors, fig-sim-validate.
# Usage: bench/plots.sh [RESULTS_DIR]   (default: that of bench/common.sh)
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
	RESULTS=$1
else
	. "$BENCH_DIR/common.sh"
fi
command -v gnuplot >/dev/null || { echo "gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
sub=$(sed -n 's/^model: \([^,]*\), device: \([^,]*\),.*/\1 on \2/p' "$RESULTS/machine.txt" 2>/dev/null | sed 's/--model [^ ]*\///; s/--dummy /dummy /; s/_/\\\\_/g')
sub=${sub:-$(basename "$RESULTS")}
# pngcairo when gnuplot has it (antialiased), else the plain png terminal
png="pngcairo size 1500,500 font ',10'"
gnuplot -e "set terminal $png" 2>/dev/null </dev/null || png="png size 1500,500"

draw() { # NAME VARS...
	local name=$1 t
	shift
	for t in png svg; do
		local term=$png ext=png
		[ $t = svg ] && term="svg size 1500,500 dynamic" && ext=svg
		gnuplot -e "set terminal $term; set output '$RESULTS/$name.$ext'; sub='$sub'; $*" \
			"$BENCH_DIR/$name.gp"
	done
	echo "wrote $RESULTS/$name.png, .svg" >&2
}
# workload names in the order their indices were written (from the .dat comments)
wls() { grep -o '^# [a-z0-9_.-]*:' "$1" | tr -d '#:' | xargs; }

[ -f "$RESULTS/fig3-throughput.dat" ] &&
	draw fig3-throughput "dat='$RESULTS/fig3-throughput.dat'; wls='$(wls "$RESULTS/fig3-throughput.dat")'"
[ -f "$RESULTS/fig4-turnaround.dat" ] &&
	draw fig4-turnaround "dat='$RESULTS/fig4-turnaround.dat'; wls='$(wls "$RESULTS/fig4-turnaround.dat")'"
[ -f "$RESULTS/fig-sim-validate.dat" ] &&
	draw fig-sim-validate "dat='$RESULTS/fig-sim-validate.dat'"
[ -f "$RESULTS/fig5-swap.dat" ] &&
	draw fig5-predictors "swapdat='$RESULTS/fig5-swap.dat'; recdat='$RESULTS/fig5-recompute.dat'"
exit 0
