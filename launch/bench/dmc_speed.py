"""Env steps/s of CortexBench's DeepMind Control tasks: C MuJoCo (dm_control) and MJX.

  python -m launch.bench.dmc_speed [--tasks walker-walk,...] [--mjx_envs 64,512] [--steps 20]
      [--c_steps 200] [--repeats 3] [--size 224]

An env step is one decision: `action_repeat` (2) control steps of dm_control, each its task's
physics substeps (walker 10, cheetah 1, finger 2, reacher 1), with uniform random actions.
Columns:
- C physics: one `dmc.DMCSim` without rendering stepped from Python (one thread).
- C + render: the same with `RenderConfig(size, "camera0")` (EGL, the CPU render profile), a
  frame per env step as the BC demos and evaluations take them.
- MJX at each batch size: a jitted `lax.scan` of --steps `dmc_mjx.MJXEnv.step` calls;
  steps/s = num_envs * steps / the median of --repeats timed calls, from copies of one seeded
  initial state; the compile time of that scan (XLA, once per task and batch size) is reported
  in its own column.
MJX is for accelerators: on a CPU it is slower than C MuJoCo (its dense constraint and
collision code is written for wide parallel hardware); this table is the CPU baseline.
"""
from __future__ import annotations

import functools
import shlex
import sys
import time

import numpy as np
from absl import flags, logging

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.
from launch import cli
from launch.bench import suite_speed
from launch.bench import timing


def c_rate(task: str, steps: int, repeats: int, size: int | None) -> float:
  """Env steps/s of one C MuJoCo env, with a `size`-pixel frame per step when `size`."""
  from vcbench.envs.core import RenderConfig  # pylint: disable=g-import-not-at-top
  from vcbench.envs.mujoco import dmc  # pylint: disable=g-import-not-at-top
  render = RenderConfig(size, "camera0") if size else None
  return suite_speed.env_rate(functools.partial(dmc.DMCSim, task, render), steps, repeats)


@functools.cache
def _first_state(task: str):
  """One env's initial state (seed 0), copied to every env of a batch: the reset, compiled once
  per task, is not part of the timed loop."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from vcbench.envs.mujoco import dmc_mjx  # pylint: disable=g-import-not-at-top
  env = dmc_mjx.make_env(task, 1)
  return jax.block_until_ready(jax.jit(env.reset)(jnp.zeros(1, jnp.int32)))


def mjx_rate(task: str, num_envs: int, steps: int, repeats: int) -> tuple[float, float]:
  """(env steps/s, compile seconds) of a jitted scan of `steps` batched MJX steps."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from vcbench.envs.mujoco import dmc_mjx  # pylint: disable=g-import-not-at-top
  env = dmc_mjx.make_env(task, num_envs)
  actions = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (steps, num_envs,
                                                                  env.action_dim)), jnp.float32)

  def rollout(state, actions):
    return jax.lax.scan(lambda s, a: (env.step(s, a), None), state, actions)[0]

  state = jax.tree.map(lambda x: jnp.repeat(x, num_envs, axis=0), _first_state(task))
  start = time.perf_counter()
  compiled = jax.jit(rollout).lower(state, actions).compile()
  compile_s = time.perf_counter() - start
  seconds = timing.median(lambda: compiled(state, actions), repeats)
  return num_envs * steps / seconds, compile_s


def define_flags() -> None:
  flags.DEFINE_list("tasks", ["walker-walk", "cheetah-run", "finger-spin", "reacher-easy"],
                    "DMC tasks (walker-stand and reacher-hard share walker's and reacher's "
                    "physics)")
  flags.DEFINE_list("mjx_envs", ["64", "512"], "MJX batch sizes")
  flags.DEFINE_integer("steps", 20, "MJX env steps per timed call")
  flags.DEFINE_integer("c_steps", 200, "C MuJoCo env steps per timed call")
  flags.DEFINE_integer("repeats", 3, "timed calls per figure (median)")
  flags.DEFINE_integer("size", 224, "render size of the C + render column")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  import jax  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  batches = [int(n) for n in f.mjx_envs]
  print(f"DMC env steps/s (action repeat 2; JAX on {jax.devices()[0].platform}; median of "
        f"{f.repeats} calls)\n")
  head = ["task", "C physics", f"C + render {f.size}px"]
  for n in batches:
    head += [f"MJX x{n}", f"MJX x{n} compile s"]
  print("| " + " | ".join(head) + " |")
  print("|:--|" + "--:|" * (len(head) - 1))
  for task in f.tasks:
    row = [f"{c_rate(task, f.c_steps, f.repeats, None):,.0f}",
           f"{c_rate(task, f.c_steps // 4, f.repeats, f.size):,.0f}"]
    for n in batches:
      rate, compile_s = mjx_rate(task, n, f.steps, f.repeats)
      row += [f"{rate:,.0f}", f"{compile_s:.0f}"]
    print(f"| {task} | " + " | ".join(row) + " |", flush=True)
  print("\n    python -m " + " ".join(["launch.bench.dmc_speed"]
                                      + [shlex.quote(a) for a in sys.argv[1:]]))


if __name__ == "__main__":
  define_flags()
  cli.run(main)
