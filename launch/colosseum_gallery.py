"""A PNG of every Colosseum test set on every task (the paper's Figures 9-28 in one sheet).

  python -m launch.colosseum_gallery --out runs/colosseum/gallery.png [--size 128] [--seed 0]
      [--tasks hammer,drawer-open]

Rows are tasks (default: every task of `vcbench.benchmarks.colosseum.TASKS`), columns the test
sets (no perturbation, all, each factor); each tile is the first frame of test episode --seed
under that test set, rendered by the simulator the benchmark evaluates with
(`vcbench.viz.galleries.colosseum_gallery`). A factor
that does not apply to a task is a grey '-' tile.
"""
from __future__ import annotations

import argparse

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from launch import cli
from vcbench.benchmarks import colosseum as col
from vcbench.viz import galleries


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
  width, height = galleries.colosseum_gallery(args.out, tasks, args.size, args.seed)
  print(f"wrote {args.out} ({width}x{height})")


if __name__ == "__main__":
  with cli.exit_statuses():
    main()
