#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the main job (mini CortexBench).
#   bash launch/quickstart.sh [extra --config.key=value flags]
set -euo pipefail
# The four suites' simulators: MuJoCo (MetaWorld, DMC), gymnasium-robotics (Adroit), pybullet
# (TriFinger); no torch.
VCBENCH_EXTRAS="${VCBENCH_EXTRAS:-mujoco,adroit,trifinger}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m launch.main --config configs/cortexbench.py:quick "$@"
