#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the default (fast) test suite.
#   bash launch/test.sh [pytest args]        e.g. -m slow for the long tests
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m pytest "$@"
