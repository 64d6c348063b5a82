# The simulator against the real CPU backend (bench/sim-validate.sh): simulated vs
# real p99 TTFT, p99 TPOT and throughput, one point per row, the real value as
# measured (wall clock) and as it would be with its core to itself (own core).
# Points on the diagonal are exact; the band is the target (+-20 %, +-10 %).
# Variables (gnuplot -e): dat (fig-sim-validate.dat), sub (subtitle).
set multiplot layout 1, 3 title "Simulated (sim:cpu-local) vs real CPU (".sub.")"
set logscale xy
set grid
set key top left
set xlabel "real"
set ylabel "simulated"
band(x, f) = x * f
do for [panel = 1:3] {
	c = panel == 1 ? 4 : panel == 2 ? 7 : 1
	lim = panel == 3 ? 1.10 : 1.20
	set title panel == 1 ? "p99 TTFT (ms)" : panel == 2 ? "p99 TPOT (ms)" : "throughput (tok/s)"
	plot dat using c:(column(c + 2)) with points pt 6 ps 1.3 title "real: wall clock", \
	     ''  using (column(c + 1)):(column(c + 2)) with points pt 7 ps 1.0 title "real: own core", \
	     x with lines lc rgb "black" dt 1 notitle, \
	     band(x, lim) with lines lc rgb "gray" dt 2 notitle, \
	     band(x, 1 / lim) with lines lc rgb "gray" dt 2 notitle
}
unset multiplot
