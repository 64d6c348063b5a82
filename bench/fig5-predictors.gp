# Paper Fig. 5: predicted vs measured cost of each preemption, swap (out + in) and
# recompute (the prefill that rebuilt the KV), against the y = x line. Variables:
# swapdat, recdat (fig5-*.dat: tokens predicted_ms measured_ms), sub. Terminal:
# bench/plots.sh.
set multiplot layout 1, 2 title "Predicted vs measured preemption cost (".sub.")"
set xlabel "measured (ms)"
set ylabel "predicted (ms)"
set grid
set key top left
set size ratio -1
set title "swap out + in"
plot swapdat using 3:2 with points pt 7 ps 0.5 title "decisions", x with lines lw 1 dt 2 title "y = x"
set title "recompute (prefill)"
plot recdat using 3:2 with points pt 7 ps 0.5 title "decisions", x with lines lw 1 dt 2 title "y = x"
unset multiplot
