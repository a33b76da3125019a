#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the default (fast) test suite.
#   bash launch/test.sh [pytest args]        e.g. -m slow for the long tests
# Tests run in parallel processes (pytest-xdist, one per core, at most 4: each holds its own
# JAX runtime, a few GiB). Most of the suite is single-threaded XLA compilation, so two
# workers on two cores take ~0.75 of the serial time. VCBENCH_TEST_WORKERS=0 runs serially.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
workers="${VCBENCH_TEST_WORKERS:-auto}"
if [ "$workers" = "0" ]; then
  python -m pytest "$@"
else
  python -m pytest -n "$workers" --maxprocesses=4 "$@"
fi
