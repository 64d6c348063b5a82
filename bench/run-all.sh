#!/usr/bin/env bash
# Every figure of the paper for one model on this machine: the throughput table
# (Fig. 3 / Table 4), fair vs fcfs turnaround (Fig. 4), predictor accuracy (Fig. 5,
# Tables 5-6), then the plots. Environment: bench/common.sh.
#   bash bench/run-all.sh                                   # stories260K on the cpu
#   MODEL="--dummy small" bash bench/run-all.sh             # a larger model, cpu
#   DEVICE=cuda MODEL="--dummy llama-7b" bash bench/run-all.sh   # paper scale, GPU
set -euo pipefail
d=$(dirname "$0")
bash "$d/paper-table.sh"
bash "$d/turnaround.sh"
bash "$d/predictors.sh"
bash "$d/plots.sh"
