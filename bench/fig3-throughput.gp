# Paper Fig. 3: throughput vs max output length per preemption policy, one panel per
# workload. Variables (gnuplot -e): dat (fig3-throughput.dat, one index per
# workload), wls (the workload names, in that order), sub (subtitle).
# The terminal and output are set by bench/plots.sh.
n = words(wls)
set multiplot layout 1, n title "Throughput vs max output length (".sub.")"
set xlabel "max output length (tokens)"
set ylabel "throughput (prompt + generated tok/s)"
set logscale x 2
set xtics (64, 128, 256)
set xrange [52:315]
set key top right
set grid
set yrange [0:*]
do for [i = 1:n] {
	set title word(wls, i)
	plot dat index (i - 1) using 1:2 with linespoints lw 2 pt 7 title "adaptive", \
	     ''  index (i - 1) using 1:3 with linespoints lw 2 pt 5 title "recompute (vLLM)", \
	     ''  index (i - 1) using 1:4 with linespoints lw 2 pt 9 title "swap (vLLM_s)"
}
unset multiplot
