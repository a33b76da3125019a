"""The TriFinger experts' scores and the simulator's speed, measured in one run.

  python -m launch.bench.trifinger_experts [--tasks=reach-cube,push-cube] [--seeds=100]
      [--render_size=256] [--render_steps=20] [--out=trifinger_experts.json]

Reports, per task:
- the expert's score over --seeds test-split episodes (eai-vc's scaled score on the 0-100
  scale of the tables: mean, min, 10th percentile) and its success rate (vcbench's 2 cm flag);
- env-steps/s (one step = 0.4 s simulated: 100 pybullet steps and 25 IK solves) of the
  physics alone, the rate of the expert episodes themselves;
- env-steps/s with a camera60 frame rendered per step (TinyRenderer at --render_size), over
  --render_steps steps of the expert.
"""
from __future__ import annotations

import json
import time

import numpy as np
from absl import flags

from launch import cli
from vcbench.data.demos import episode_seeds
from vcbench.envs import trifinger as tf

_TASKS = flags.DEFINE_list("tasks", list(tf.TASKS), "TriFinger tasks")
_SEEDS = flags.DEFINE_integer("seeds", 100, "expert episodes per task (test-split seeds)")
_RENDER_SIZE = flags.DEFINE_integer("render_size", 256, "frame side for the render rate")
_RENDER_STEPS = flags.DEFINE_integer("render_steps", 20, "env steps timed with rendering")
_OUT = flags.DEFINE_string("out", None, "also write the figures as JSON here")


def expert_episodes(task: str, seeds: list[int]) -> dict:
  """The expert on every seed without pixels: per-episode scores, successes and the rate."""
  sim = tf.TriFingerSim(task, None)
  policy = tf.expert(task)
  scores, successes, steps, seconds = [], [], 0, 0.0
  try:
    for seed in seeds:
      obs, terminal = sim.reset(seed), False
      t0 = time.perf_counter()
      while not terminal:
        obs, _, terminal, info = sim.step(policy(sim, obs))
        steps += 1
      seconds += time.perf_counter() - t0
      scores.append(info["score"])
      successes.append(info["success"])
  finally:
    sim.close()
  scores = 100 * np.asarray(scores)
  return {"score": float(scores.mean()), "score_min": float(scores.min()),
          "score_p10": float(np.percentile(scores, 10)),
          "success_rate": float(np.mean(successes)), "episodes": len(seeds),
          "physics_steps_per_s": steps / seconds}


def render_rate(task: str, size: int, num_steps: int) -> float:
  """Env-steps/s of the expert with a camera60 frame per step (episodes restart as needed)."""
  sim = tf.TriFingerSim(task, tf.RenderConfig(size=size, camera="camera60"))
  policy = tf.expert(task)
  try:
    seed, obs = 0, sim.reset(0)
    t0 = time.perf_counter()
    for _ in range(num_steps):
      obs, _, terminal, _ = sim.step(policy(sim, obs))
      if terminal:
        seed += 1
        obs = sim.reset(seed)
    return num_steps / (time.perf_counter() - t0)
  finally:
    sim.close()


def main(argv):
  del argv
  seeds = episode_seeds("test", _SEEDS.value)
  out = {"seeds": f"test split, {len(seeds)} episodes", "version": tf.version()}
  for task in _TASKS.value:
    tf.check_task(task)
    row = expert_episodes(task, seeds)
    row[f"render{_RENDER_SIZE.value}_steps_per_s"] = render_rate(task, _RENDER_SIZE.value,
                                                                 _RENDER_STEPS.value)
    out[task] = row
    print(f"{task}: expert score {row['score']:.1f} (min {row['score_min']:.1f}, p10 "
          f"{row['score_p10']:.1f}) over {row['episodes']} episodes, success "
          f"{100 * row['success_rate']:.0f}%; env-steps/s: physics "
          f"{row['physics_steps_per_s']:.1f}, physics + {_RENDER_SIZE.value}px render "
          f"{row[f'render{_RENDER_SIZE.value}_steps_per_s']:.1f}", flush=True)
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump(out, f, indent=2)
  print(json.dumps(out, indent=2))


if __name__ == "__main__":
  cli.run(main)
