# Paper Fig. 4: mean weighted turnaround vs the running-batch cap (max_num_seqs) for
# fair and FCFS admission, one panel per workload. Variables: dat
# (fig4-turnaround.dat, one index per workload), wls, sub. Terminal: bench/plots.sh.
n = words(wls)
set multiplot layout 1, n title "Mean weighted turnaround vs max\\_num\\_seqs (".sub.")"
set xlabel "max\\_num\\_seqs"
set ylabel "mean weighted turnaround (lower is better)"
set logscale x 2
set xtics (8, 16, 32, 64, 128)
set xrange [6.5:158]
set key top right
set grid
do for [i = 1:n] {
	set title word(wls, i)
	plot dat index (i - 1) using 1:2 with linespoints lw 2 pt 7 title "fair (AdaptiveLLM)", \
	     ''  index (i - 1) using 1:3 with linespoints lw 2 pt 5 title "fcfs (vLLM)"
}
unset multiplot
