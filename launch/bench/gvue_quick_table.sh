#!/usr/bin/env bash
# The README's G-VUE quick table: first the `quick` variant alone (two PVRs, seed 0; its wall
# time is the quick figure), then the same workdir completed to three PVRs x three seeds (the
# config hash leaves out pvrs and seeds, so the first run's cells are reused).
#   bash launch/bench/gvue_quick_table.sh [workdir]     # the first part: 21 min on 2 CPU cores
set -euo pipefail
workdir="${1:-runs/gvue_quick}"
start=$(date +%s)
python -m launch.main --config configs/gvue.py:quick --config.workdir="$workdir"
echo "gvue quick (2 PVRs, seed 0): $(( $(date +%s) - start )) s"
python -m launch.main --config configs/gvue.py:quick --config.workdir="$workdir" \
  --config.pvrs='("in1k_mobilenetv2","vcbench_vit_ti","random_vit_ti")' \
  --config.seeds='(0,1,2)'
echo "gvue quick table (3 PVRs x 3 seeds): $(( $(date +%s) - start )) s"
