# Paper Fig. 5: predicted vs measured cost of each preemption, swap (out + in) and
# recompute (the prefill that rebuilt the KV), against the y = x line, one point a
# decision of the decision logs (tables.py writes them out), coloured by the share
# of its time the engine thread ran on a CPU (dark: the machine's other processes
# had it). Variables: swapdat, recdat (fig5-*.dat: tokens predicted_ms measured_ms
# oncpu_frac), sub. Terminal: bench/plots.sh.
set multiplot layout 1, 2 title "Predicted vs measured preemption cost (".sub.")"
set xlabel "measured (ms)"
set ylabel "predicted (ms)"
set grid
set key top left
set size ratio -1
set logscale xy
set palette defined (0 "#b2182b", 0.5 "#f4a582", 1 "#2166ac")
set cbrange [0:1]
set cblabel "on-CPU share"
set title "swap out + in"
plot swapdat using 3:2:4 with points pt 7 ps 0.6 lc palette title "decisions", x with lines lw 1 dt 2 title "y = x"
set title "recompute (prefill)"
plot recdat using 3:2:4 with points pt 7 ps 0.6 lc palette title "decisions", x with lines lw 1 dt 2 title "y = x"
unset multiplot
