#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the main job: the quick leaderboard of
# in1k_mobilenetv2, vcbench_vit_ti and random_vit_ti on CortexBench's four suites (the part that
# fits half an hour on 2 CPU cores; README: "The main job" gives the time of the others and the
# flag that adds them).
#   bash launch/quickstart.sh [extra --config.key=value flags]
set -euo pipefail
# The four suites' simulators: MuJoCo (MetaWorld, DMC), gymnasium-robotics (Adroit), pybullet
# (TriFinger); no torch.
VCBENCH_EXTRAS="${VCBENCH_EXTRAS:-mujoco,adroit,trifinger}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m launch.main --config configs/leaderboard.py:quick \
    --config.benchmarks='("cortexbench",)' "$@"
