"""Steps/s of vcbench-nav through its Gymnasium vector face (`gymnasium.make_vec`).

  python -m launch.bench.gym_nav [--num_envs 1,16,64] [--size 64] [--steps 100] [--repeats 3]

One timed call is --steps calls of `envs.step` from Python with numpy actions, as a
CleanRL-style loop makes them (the obs come back as numpy arrays each step); steps/s =
num_envs * steps / the median of --repeats timed calls, after a warm-up call that compiles.
Two action streams: uniform over all four actions (a random agent: END a quarter of the time,
so nearly every step some env restarts and the reset frames are rendered too), and moves and
turns only (episodes run to the step limit: the cost of a step alone).
"""
from __future__ import annotations

import shlex
import sys

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import flags
from absl import logging
import numpy as np

from launch import cli
from launch.bench import timing

STREAMS = {"random (END 1/4)": 4, "no END": 3}   # actions drawn from range(n)


def measure(num_envs: int, size: int, steps: int, repeats: int, num_actions: int,
            sensors: tuple[str, ...]) -> float:
  """Median steps/s of `steps` vector steps with actions uniform over range(num_actions)."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  import vcbench.envs.gym  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  envs = gymnasium.make_vec("vcbench/PointNav-v0", num_envs=num_envs, height=size, width=size,
                            sensors=sensors)
  rng = np.random.default_rng(0)
  envs.reset(seed=0)

  def run():
    for _ in range(steps):
      obs, *_ = envs.step(rng.integers(0, num_actions, num_envs))
    return obs
  seconds = timing.median(run, repeats)
  envs.close()
  return num_envs * steps / seconds


def define_flags() -> None:
  flags.DEFINE_list("num_envs", ["1", "16", "64"], "envs per vector env")
  flags.DEFINE_integer("size", 64, "square image size in pixels")
  flags.DEFINE_list("sensors", ["rgb", "depth"], "nav sensors")
  flags.DEFINE_integer("steps", 100, "vector steps per timed call")
  flags.DEFINE_integer("repeats", 3, "timed calls per figure (median)")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  f = flags.FLAGS
  print(f"vcbench/PointNav-v0, {'+'.join(f.sensors)} {f.size}x{f.size}, steps/s (env steps, "
        f"median of {f.repeats} x {f.steps} vector steps)\n")
  print("| num_envs | " + " | ".join(STREAMS) + " |")
  print("|--:|" + "--:|" * len(STREAMS))
  for n in map(int, f.num_envs):
    rates = [measure(n, f.size, f.steps, f.repeats, a, tuple(f.sensors))
             for a in STREAMS.values()]
    print(f"| {n} | " + " | ".join(f"{r:,.0f}" for r in rates) + " |", flush=True)
  print("\n    python -m " + " ".join(["launch.bench.gym_nav"]
                                      + [shlex.quote(a) for a in sys.argv[1:]]))


if __name__ == "__main__":
  define_flags()
  cli.run(main)
