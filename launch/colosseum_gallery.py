"""A PNG of every Colosseum test set on every task (the paper's Figures 9-28 in one sheet).

  python -m launch.colosseum_gallery --out runs/colosseum/gallery.png [--size 128] [--seed 0]
      [--tasks hammer,drawer-open]

Rows are tasks (default: every task of `vcbench.benchmarks.colosseum.TASKS`), columns the test
sets (no perturbation, all, each factor); each tile is the first frame of test episode --seed
under that test set, rendered by the same `PerturbedSim` the benchmark evaluates with. A factor
that does not apply to a task is a grey '-' tile.
"""
from __future__ import annotations

import argparse
import os

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

import numpy as np

from vcbench.benchmarks import colosseum as col
from vcbench.data.demos import episode_seeds
from vcbench.envs.mujoco import metaworld as mw
from vcbench.reports import gallery
from vcbench.robustness import perturbed


def task_row(task: str, size: int, seed: int) -> list[np.ndarray | None]:
  """The first frame of test episode `seed` under every test set (None: not applicable)."""
  sim = perturbed.PerturbedSim(task, mw.RenderConfig(size=size), 10)
  episode = episode_seeds("test", seed + 1)[-1]
  try:
    return [None if col.inapplicable(task, t) and t not in (col.NONE, col.ALL)
            else sim.reset(perturbed.encode(t, episode))["rgb"] for t in col.TEST_SETS]
  finally:
    sim.close()


def write_gallery(out: str | os.PathLike[str], tasks=tuple(col.TASKS), size: int = 128,
                  seed: int = 0) -> tuple[int, int]:
  rows = {task: task_row(task, size, seed) for task in tasks}
  return gallery.save_png(gallery.labelled_grid(rows, col.TEST_SETS, label_width=140), out)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", required=True, help="the PNG to write")
  parser.add_argument("--size", type=int, default=128, help="frame side in pixels")
  parser.add_argument("--seed", type=int, default=0, help="test episode index")
  parser.add_argument("--tasks", default=",".join(col.TASKS), help="comma-separated tasks")
  args = parser.parse_args()
  tasks = [t for t in args.tasks.split(",") if t]
  unknown = [t for t in tasks if t not in col.TASKS]
  if unknown:
    parser.error(f"unknown tasks {unknown}; Colosseum tasks: {list(col.TASKS)}")
  if args.size < 16:
    parser.error(f"--size must be at least 16, got {args.size}")
  width, height = write_gallery(args.out, tasks, args.size, args.seed)
  print(f"wrote {args.out} ({width}x{height})")


if __name__ == "__main__":
  main()
