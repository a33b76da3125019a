"""The Adroit experts' DAPG success over seeds, and the simulator's speed (README figures).

  MUJOCO_GL=egl python -m launch.bench.adroit_experts [--tasks=pen,relocate] [--seeds=100]
      [--first_seed=0] [--render=224] [--speed_steps=400]

For each task: runs the expert (`adroit_experts.expert`) on episodes --first_seed.. (+ --seeds), without
pixels, and counts DAPG successes (goal achieved on more than 20 / 25 steps, `info['success']`
at the episode's end); then times random-action steps of physics alone and of physics plus a
--render px frame. Prints one table row per task and the failed seeds.
"""
from __future__ import annotations

import time

import numpy as np
from absl import app, flags

from vcbench.envs.core import RenderConfig
from vcbench.envs.mujoco import adroit, adroit_experts

_TASKS = flags.DEFINE_list("tasks", ["pen", "relocate"], "Adroit tasks")
_SEEDS = flags.DEFINE_integer("seeds", 100, "expert episodes per task")
_FIRST = flags.DEFINE_integer("first_seed", 0, "seed of the first episode")
_RENDER = flags.DEFINE_integer("render", 224, "render size (px) of the speed test")
_SPEED_STEPS = flags.DEFINE_integer("speed_steps", 400, "steps timed per speed test")


def expert_success(task: str, seeds: list[int]) -> tuple[list[int], list[int], float]:
  """(successful seeds, failed seeds, seconds): the expert run to each episode's end."""
  sim, policy = adroit.AdroitSim(task, None), adroit_experts.expert(task)
  ok, failed, t0 = [], [], time.perf_counter()
  try:
    for seed in seeds:
      obs, done, info = sim.reset(seed), False, {"success": False}
      while not done:
        obs, _, done, info = sim.step(policy(sim, obs))
      (ok if info["success"] else failed).append(seed)
      print(f"  {task} seed {seed}: {'ok' if info['success'] else 'FAILED'} "
            f"(goal steps {sim.goal_steps}/{sim.steps})", flush=True)
  finally:
    sim.close()
  return ok, failed, time.perf_counter() - t0


def steps_per_second(task: str, render: RenderConfig | None, steps: int) -> float:
  sim = adroit.AdroitSim(task, render)
  rng = np.random.default_rng(0)
  try:
    sim.reset(0)
    t0, done = time.perf_counter(), False
    for _ in range(steps):
      if done:
        sim.reset(1)
      _, _, done, _ = sim.step(rng.uniform(-1, 1, adroit.ACTION_DIM))
    return steps / (time.perf_counter() - t0)
  finally:
    sim.close()


def main(argv) -> None:
  del argv
  seeds = list(range(_FIRST.value, _FIRST.value + _SEEDS.value))
  render = RenderConfig(size=_RENDER.value, camera=adroit.DEFAULT_CAMERA)
  rows = []
  for task in _TASKS.value:
    adroit.check_task(task)
    ok, failed, seconds = expert_success(task, seeds)
    physics = steps_per_second(task, None, _SPEED_STEPS.value)
    pixels = steps_per_second(task, render, _SPEED_STEPS.value)
    rows.append((task, len(ok), len(seeds), seconds, physics, pixels, failed))
  print(f"\nAdroit experts ({adroit.version()}), seeds {seeds[0]}..{seeds[-1]}:")
  print(f"| task | DAPG success | expert s/episode | steps/s physics | steps/s + "
        f"{_RENDER.value}px render |")
  print("|---|---|---|---|---|")
  for task, n_ok, n, seconds, physics, pixels, _ in rows:
    print(f"| {task} | {100 * n_ok / n:.0f}% ({n_ok}/{n}) | {seconds / n:.2f} | {physics:.0f} | "
          f"{pixels:.0f} |")
  for task, *_, failed in rows:
    print(f"{task} failed seeds: {failed}")


if __name__ == "__main__":
  app.run(main)
