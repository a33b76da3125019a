#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the main job on its default config.
#   bash launch/quickstart.sh [extra --config.key=value flags]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m launch.main --config configs/zoo_demo.py "$@"
