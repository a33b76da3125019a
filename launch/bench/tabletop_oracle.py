"""The tabletop oracle's success and score over held-out seeds, per task and split.

  MUJOCO_GL=egl python -m launch.bench.tabletop_oracle [--seeds=100] [--pix_size=0.00625]
      [--out=tabletop_oracle.json]

Every episode runs Ravens' oracle through the pixels and rotation bins a learned policy acts
with (`tabletop_tasks.Action.discretised`); success is every goal step complete, the score
Ravens' reward x100. The interval is Wilson's 95% interval on the success rate.
"""
from __future__ import annotations

import json
import math
import time

from absl import flags

from launch import cli
from vcbench.envs.mujoco import tabletop as tt
from vcbench.envs.mujoco import tabletop_tasks

_SEEDS = flags.DEFINE_integer("seeds", 100, "episodes per task and split (seeds 0..n-1)")
_PIX = flags.DEFINE_float("pix_size", 0.00625, "metres per pixel of the top-down image")
_OUT = flags.DEFINE_string("out", None, "also write the figures as JSON here")


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
  p = successes / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return centre - half, centre + half


def main(argv):
  del argv
  ws = tt.Workspace(pix_size=_PIX.value)
  rows = []
  print("| task | split | success | 95% interval | score | s/episode |")
  print("|:--|:--|--:|--:|--:|--:|")
  for task in tabletop_tasks.TASKS.names():
    for split in tabletop_tasks.SPLITS:
      t0 = time.perf_counter()
      runs = [tabletop_tasks.run_episode(task, split, s, workspace=ws)
              for s in range(_SEEDS.value)]
      wall = (time.perf_counter() - t0) / len(runs)
      wins = sum(r["success"] for r in runs)
      lo, hi = wilson(wins, len(runs))
      score = 100 * sum(r["score"] for r in runs) / len(runs)
      rows.append({"task": task, "split": split, "successes": wins, "episodes": len(runs),
                   "score": score, "seconds_per_episode": wall, "pix_size": _PIX.value})
      print(f"| {task} | {split} | {wins}/{len(runs)} | {100 * lo:.1f}-{100 * hi:.1f}% | "
            f"{score:.1f} | {wall:.2f} |", flush=True)
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
