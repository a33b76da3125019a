"""The DeepMind Control experts' returns over held-out seeds, measured in one run.

  MUJOCO_GL=egl python -m launch.bench.dmc_experts [--tasks=reacher-easy,...] [--seeds=100]
      [--out=dmc_experts.json]

For every task with an expert (scripted reacher; the SAC policies shipped in
vcbench/envs/mujoco/experts/): mean return ± standard error, min and 10th percentile over
--seeds test-split episodes (500 decisions at action repeat 2 = dm_control's 1000 control
steps; return on dm_control's 0-1000 scale, the suite's score is return/10), and the episodes'
env-steps/s (physics + the expert, no pixels).
"""
from __future__ import annotations

import json
import time

import numpy as np
from absl import flags

from launch import cli
from vcbench.data.demos import episode_seeds
from vcbench.envs.mujoco import dmc, dmc_experts

_TASKS = flags.DEFINE_list("tasks", ["reacher-easy", "reacher-hard", "walker-stand",
                                     "walker-walk", "cheetah-run", "finger-spin"], "DMC tasks")
_SEEDS = flags.DEFINE_integer("seeds", 100, "expert episodes per task (test-split seeds)")
_OUT = flags.DEFINE_string("out", None, "also write the figures as JSON here")


def expert_returns(task: str, seeds: list[int]) -> tuple[np.ndarray, float]:
  """(per-episode returns, env-steps/s) of the task's expert on `seeds` (every episode runs its
  `dmc.horizon()` steps)."""
  t0 = time.perf_counter()
  returns = dmc_experts.episode_returns(task, seeds)
  return returns, len(seeds) * dmc.horizon() / (time.perf_counter() - t0)


def main(argv):
  del argv
  seeds = episode_seeds("test", _SEEDS.value)
  rows = []
  print("| task | expert | mean return ± s.e. | min | 10th pct | env-steps/s |")
  print("|:--|:--|--:|--:|--:|--:|")
  for task in _TASKS.value:
    if not dmc_experts.available(task):
      print(f"| {task} | none shipped | | | | |")
      continue
    returns, rate = expert_returns(task, seeds)
    kind = "scripted" if dmc_experts.is_scripted(task) else "SAC"
    row = {"task": task, "expert": kind, "version": dmc_experts.version(task),
           "mean": float(returns.mean()),
           "stderr": float(returns.std(ddof=1) / np.sqrt(len(returns))),
           "min": float(returns.min()), "p10": float(np.percentile(returns, 10)),
           "steps_per_second": rate, "seeds": len(seeds)}
    rows.append(row)
    print(f"| {task} | {kind} | {row['mean']:.1f} ± {row['stderr']:.1f} | {row['min']:.1f} | "
          f"{row['p10']:.1f} | {rate:.0f} |", flush=True)
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
