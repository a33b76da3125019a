"""How well do the imitation teachers navigate? SR and SPL (± 95%) of the shortest-path expert
and the exploring teacher on held-out vcbench-nav episodes: the ceiling of an imitated agent.

  python -m launch.nav_teacher --task objectnav --split val --episodes 300 [--teachers
      expert,explorer] [--size 32] [--scenes 15] [--batch 150]

The teachers act on the env state (no policy): the expert knows the shortest path to the goal;
the explorer (`vcbench/envs/nav/explorer.py`) only what it has seen (ObjectNav, ImageNav).
Frame size matters only through ObjectNav's goal-in-view test (semantic frame).
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
from launch import cli


def define_flags() -> None:
  flags.DEFINE_enum("task", "objectnav", ["pointnav", "objectnav", "imagenav"], "nav task")
  flags.DEFINE_enum("split", "val", ["val", "test"], "held-out apartments")
  flags.DEFINE_integer("episodes", 300, "episodes (balanced over the difficulty bins)")
  flags.DEFINE_integer("scenes", 15, "apartments")
  flags.DEFINE_list("teachers", ["expert", "explorer"], "teachers to measure")
  flags.DEFINE_integer("size", 32, "frame size (pixels)")
  flags.DEFINE_integer("batch", 150, "episodes per jitted batch")


def evaluate(env, teacher: str, batch: int) -> dict:
  """Per-episode metrics (`env.METRICS`) of `teacher` on every episode of `env` (no auto-reset)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from vcbench.envs.nav import expert, explorer  # pylint: disable=g-import-not-at-top
  mapped = explorer.WithMap(env)
  act = mapped.label if teacher == "explorer" else (
      lambda s: expert.action(env, explorer.unmapped(s)))

  @jax.jit
  def run(indices):
    def step(state, _):
      return jax.vmap(mapped.step)(state, jax.vmap(act)(state)), None
    state = jax.vmap(mapped.reset_to)(indices)
    return jax.lax.scan(step, state, None, length=env.max_steps)[0].metrics

  total, out = len(env.episodes), []
  for start in range(0, total, batch):
    out.append(jax.tree.map(np.asarray, run(jnp.arange(start, min(start + batch, total)))))
  return {k: np.concatenate([o[k] for o in out]) for k in out[0]}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  from vcbench.benchmarks import nav as nav_bench  # pylint: disable=g-import-not-at-top
  from vcbench.envs import nav  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  unknown = sorted(set(f.teachers) - {"expert", "explorer"})
  if unknown:
    raise app.UsageError(f"--teachers: unknown {unknown}; known: expert, explorer")
  env = nav.make(f.task, f.split, num_scenes=f.scenes, num_episodes=f.episodes,
                 height=f.size, width=f.size, sensors=("rgb",), auto_reset=False)
  print(f"{f.task}, {f.episodes} {f.split} episodes in {f.scenes} apartments, {f.size}² frames\n"
        "| teacher | SR | SPL | SR easy / medium / hard | steps | failed actions |\n"
        "|---|---:|---:|---|---:|---:|")
  for teacher in f.teachers:
    s = nav_bench.summarize(evaluate(env, teacher, f.batch), f.task)
    bins = " / ".join(f"{s.get(f'success_{b}', float('nan')):.1f}" for b in
                      ("easy", "medium", "hard"))
    print(f"| {teacher} | {s['success']:.1f} ± {s['success_ci95']:.1f} | {s['spl']:.1f} ± "
          f"{s['spl_ci95']:.1f} | {bins} | {s['episode_length']:.0f} | "
          f"{s['failed_actions']:.1f} |", flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
