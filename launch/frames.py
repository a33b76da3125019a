"""Writes the frame shards for MAE pretraining: one command, deterministic, resumable.

  MUJOCO_GL=egl python -m launch.frames --out=runs/frames \
      [--metaworld_tasks=all|drawer-open,hammer,...] [--episodes=20] [--size=128] \
      [--stride=2] [--max_steps=200] [--noise=0.3] [--nav=COUNT] [--nav_scenes=100]

MetaWorld: one shard per task, <out>/metaworld/<task>.npy (`all` = every task with a scripted
expert); nav: <out>/nav/frames.npy with COUNT views (0 = none). A shard that already exists
with the same config is skipped, so a killed run is resumed by running it again. Prints the
frames and seconds per shard. The format is documented in `vcbench/data/frames.py`.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

import time

from absl import flags
from launch import cli

from vcbench.data import frames as frames_lib

_OUT = flags.DEFINE_string("out", None, "output folder (shards go under metaworld/ and nav/)",
                           required=True)
_TASKS = flags.DEFINE_string("metaworld_tasks", "all",
                             "'all', 'none' or a comma-separated list of MetaWorld v3 tasks")
_EPISODES = flags.DEFINE_integer("episodes", 20, "noisy expert episodes per MetaWorld task")
_SIZE = flags.DEFINE_integer("size", 128, "frame size in pixels (square)")
_STRIDE = flags.DEFINE_integer("stride", 2, "keep every stride-th MetaWorld frame")
_MAX_STEPS = flags.DEFINE_integer("max_steps", 200, "steps per MetaWorld episode at most")
_NOISE = flags.DEFINE_float("noise", 0.3, "std of the Gaussian noise on the expert's actions")
_CAMERA = flags.DEFINE_string("camera", "top_cap2", "MetaWorld camera (as the CortexBench job)")
_NAV = flags.DEFINE_integer("nav", 0, "vcbench-nav frames to render (0 = none)")
_NAV_SCENES = flags.DEFINE_integer("nav_scenes", 100, "training apartments the nav poses use")
_SEED = flags.DEFINE_integer("seed", 0, "seed of the action noise and the nav poses")


def _report(path: str, start: float) -> None:
  meta = frames_lib.read_meta(path) or {}
  print(f"{path}: {meta.get('count', '?')} frames of {meta.get('size', '?')}² "
        f"({time.perf_counter() - start:.1f} s)", flush=True)


def main(argv):
  del argv
  tasks = frames_lib.metaworld_tasks(_TASKS.value)
  total = 0
  for task in tasks:  # one at a time, so progress shows and a kill loses one task at most.
    start = time.perf_counter()
    [path] = frames_lib.metaworld_frames(
        _OUT.value, [task], _EPISODES.value, size=_SIZE.value, stride=_STRIDE.value,
        max_steps=_MAX_STEPS.value, noise=_NOISE.value, seed=_SEED.value, camera=_CAMERA.value)
    _report(path, start)
    total += (frames_lib.read_meta(path) or {}).get("count", 0)
  if _NAV.value > 0:
    start = time.perf_counter()
    [path] = frames_lib.nav_frames(_OUT.value, _NAV.value, size=_SIZE.value, seed=_SEED.value,
                                   num_scenes=_NAV_SCENES.value)
    _report(path, start)
    total += _NAV.value
  print(f"{total} frames in {len(tasks) + (_NAV.value > 0)} shards under {_OUT.value}")


if __name__ == "__main__":
  cli.run(main)
