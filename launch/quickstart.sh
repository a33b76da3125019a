#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the main job (mini CortexBench).
#   bash launch/quickstart.sh [extra --config.key=value flags]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m launch.main --config configs/cortexbench.py:quick "$@"
