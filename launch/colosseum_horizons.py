"""How many steps MetaWorld's scripted expert needs on each Colosseum task without perturbation:
the measurement behind `benchmarks.colosseum.HORIZONS` (a task's horizon is the smallest
multiple of 25 steps within which the clean expert succeeds in >= 95% of episodes, or, where
it never does, reaches the success it has within --max_steps).

  python -m launch.colosseum_horizons [--episodes=100] [--max_steps=500] [--tasks=...]

Runs the expert without rendering on the test split's first --episodes seeds of each task's
Colosseum scene, records the step of its first success, and prints per task: success within
the current horizon and within --max_steps, percentiles of the success step, and the horizon
that reaches 95% (or its plateau). ~1 min per task on one core at 100 episodes (measured
2026-12-07: peg-insert-side plateaus at 88% from 275 steps; every other task reaches >= 95%
within 200).
"""
from __future__ import annotations

from absl import flags
import numpy as np
from launch import cli

from vcbench.benchmarks import colosseum as col
from vcbench.data.demos import episode_seeds
from vcbench.envs.mujoco import metaworld as mw

_EPISODES = flags.DEFINE_integer("episodes", 100, "episodes per task")
_MAX_STEPS = flags.DEFINE_integer("max_steps", 500, "steps before an episode counts as failed")
_TASKS = flags.DEFINE_list("tasks", list(col.TASKS), "Colosseum tasks")
TARGET = 0.95


def success_steps(task: str, episodes: int, max_steps: int) -> np.ndarray:
  """Step of the expert's first success per episode (max_steps + 1: none)."""
  policy = mw.expert_policy(task)
  sim = col.make_sim(task, None, max_steps)()
  out = []
  try:
    for seed in episode_seeds("test", episodes):
      sim.reset(col.encode(col.NONE, seed))
      step = max_steps + 1
      for t in range(1, max_steps + 1):
        if sim.step(sim.expert_action(policy))[3]["success"]:
          step = t
          break
      out.append(step)
  finally:
    sim.close()
  return np.asarray(out)


def horizon_for(steps: np.ndarray, max_steps: int, target: float = TARGET,
                quantum: int = 25) -> int:
  """The smallest multiple of `quantum` within which a fraction >= `target` succeed, or the
  fraction that ever succeeds (within `max_steps`) if that is smaller."""
  reach = min(target, float(np.mean(steps <= max_steps)))
  need = np.sort(steps)[int(np.ceil(reach * len(steps) - 1e-9)) - 1]
  return int(quantum * np.ceil(need / quantum))


def main(argv) -> None:
  del argv
  print(f"| task | horizon now | success within it | within {_MAX_STEPS.value} | p50 | p95 | "
        f"max | horizon for {100 * TARGET:.0f}% (or plateau) |")
  print("|:---|---:|---:|---:|---:|---:|---:|---:|")
  for task in _TASKS.value:
    steps = success_steps(task, _EPISODES.value, _MAX_STEPS.value)
    now = col.horizon(task)
    ok = steps <= _MAX_STEPS.value
    print(f"| {task} | {now} | {100 * np.mean(steps <= now):.0f}% | {100 * np.mean(ok):.0f}% | "
          f"{np.percentile(steps, 50):.0f} | {np.percentile(steps, 95):.0f} | "
          f"{steps[ok].max() if ok.any() else '-'} | {horizon_for(steps, _MAX_STEPS.value)} |",
          flush=True)


if __name__ == "__main__":
  cli.run(main)
