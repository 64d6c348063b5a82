cd /work/wt/g-cost
R=bench/results/cpu/stories260K/paper-table-r4
M=data/models/stories260K
for rep in 1 2 3; do
  for out in 64 128 256; do
    echo "$(date -u +%H:%M:%S) rep $rep out $out: load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/runs.txt
    build/tools/allm-bench --model $M --device cpu --gpu-blocks 128 --cpu-blocks 64 --block-size 16 --profile $R/profile.json --chunked-prefill off --admit-lookahead 0 --max-wait-factor 0 --workload chatbot -n 200 --max-output $out --temperature 0 --ignore-eos --seed 1 --compare preempt=adaptive,recompute,swap --json --no-progress > $R/paper-table/chatbot-$out-r$rep.json
  done
done
