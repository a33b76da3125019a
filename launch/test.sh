#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the default (fast) test suite.
#   bash launch/test.sh [pytest args]        e.g. -m slow for the long tests
# Tests run in parallel processes (pytest-xdist, one per core, at most 4, since each holds its
# own JAX runtime and compiled programs); most of the suite is single-threaded XLA compilation.
# On 2 cores: 12-13 min with two workers, 15-18 min serially (README). VCBENCH_TEST_WORKERS=0
# runs it serially (xdist's -n 0).
set -euo pipefail
VCBENCH_EXTRAS="${VCBENCH_EXTRAS:-mujoco,adroit,trifinger,gvue,analysis,parity,tensorboard,sweep,test}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m pytest -n "${VCBENCH_TEST_WORKERS:-auto}" --maxprocesses=4 "$@"
