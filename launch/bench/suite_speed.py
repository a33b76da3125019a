"""Env steps/s of every CortexBench MuJoCo-track suite, PVR frames/s, and what they make of the
full protocol's wall time.

  python -m launch.bench.suite_speed [--suites metaworld,dmc,adroit,trifinger] [--steps 100]
      [--repeats 3] [--size 256] [--pvrs in1k_mobilenetv2,vcbench_vit_ti] [--img_size 224]

Columns:
- physics: one simulator of the suite (`Suite.make_sim`) without pixels, stepped from Python
  with uniform random actions (one thread); episodes that end are reset inside the timing.
- + render: the same with a `--size` frame per step (the protocol renders 256 px; EGL, the CPU
  render profile), as demos and evaluations take them.
- PVR frames/s: a jitted batch of 64 `--img_size` frames through the frozen encoder.
- full-protocol cell (estimate): the frames one (task, PVR, seed) cell renders and embeds under
  the suite's protocol numbers (demos once per task; validation every 5 of 100 epochs on 10
  episodes; the suite's test episodes; every episode at the suite's horizon, an upper bound
  where episodes end early) divided by the measured rates. BC's gradient steps (seconds per
  cell) are left out. It is an estimate from measured rates, not a timed run.
"""
from __future__ import annotations

import shlex
import sys

import numpy as np
from absl import flags, logging

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.
from launch import cli
from launch.bench import timing

SUITES = ("metaworld", "dmc", "adroit", "trifinger")


def env_rate(make_sim, steps: int, repeats: int) -> float:
  """Env steps/s of the simulator `make_sim()` builds, under uniform random actions."""
  sim = make_sim()
  try:
    action_dim = int(sim.action_dim)
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, action_dim))

    def run():
      sim.reset(0)
      for a in actions:
        if sim.step(a)[2]:
          sim.reset(0)
    return steps / timing.median(run, repeats)
  finally:
    sim.close()


def suite_rates(name: str, size: int, steps: int,
                repeats: int) -> dict[str, tuple[float, float]]:
  """{task: (physics steps/s, physics + render steps/s)} for every task of the suite."""
  from vcbench.benchmarks import cortexbench  # pylint: disable=g-import-not-at-top
  from vcbench.envs.core import RenderConfig  # pylint: disable=g-import-not-at-top
  suite = cortexbench.suite(name)
  render = RenderConfig(size, suite.camera)
  return {task: (env_rate(suite.make_sim(task, None, suite.horizon), steps, repeats),
                 env_rate(suite.make_sim(task, render, suite.horizon), max(steps // 4, 10),
                          repeats))
          for task in suite.tasks}


def pvr_rate(pvr: str, img_size: int, repeats: int) -> float:
  """Frames/s of a jitted batch of 64 frames through the PVR."""
  from vcbench.models import embedder as embedder_lib  # pylint: disable=g-import-not-at-top
  emb = embedder_lib.make(pvr, state_dim=1, img_size=img_size)
  frames = np.random.default_rng(0).integers(0, 255, (64, img_size, img_size, 3), np.uint8)
  return 64 / timing.median(lambda: emb.batch_fn(emb.params, frames), repeats)


def protocol_frames(name: str) -> tuple[int, int]:
  """(frames rendered and embedded once per task: demos, frames per cell: validation + test)
  under the suite's full protocol (`jobs.cortexbench.default_config` with its numbers)."""
  from vcbench.jobs import cortexbench as job  # pylint: disable=g-import-not-at-top
  c = job.for_suite(job.default_config(), name)
  rollouts = (c.epochs // c.eval_every) * c.val_episodes + c.test_episodes
  return c.num_demos * c.horizon, rollouts * c.horizon


def define_flags() -> None:
  flags.DEFINE_list("suites", list(SUITES), "suites to time")
  flags.DEFINE_integer("steps", 100, "physics env steps per timed call (a quarter rendering)")
  flags.DEFINE_integer("repeats", 3, "timed calls per figure (median)")
  flags.DEFINE_integer("size", 256, "render size (the protocol's)")
  flags.DEFINE_list("pvrs", ["in1k_mobilenetv2", "vcbench_vit_ti"], "PVRs to time")
  flags.DEFINE_integer("img_size", 224, "PVR input size (the protocol's)")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  f = flags.FLAGS
  pvrs = {p: pvr_rate(p, f.img_size, f.repeats) for p in f.pvrs}
  print(f"PVR frames/s at {f.img_size}px (batch 64): "
        + ", ".join(f"{p} {r:,.0f}" for p, r in pvrs.items()) + "\n")
  head = ["suite/task", "physics steps/s", f"+ render {f.size}px"]
  head += [f"full cell, {p} (h)" for p in pvrs]
  print("| " + " | ".join(head) + " |")
  print("|:--|" + "--:|" * (len(head) - 1))
  for name in f.suites:
    demo_frames, cell_frames = protocol_frames(name)
    for task, (physics, render) in suite_rates(name, f.size, f.steps, f.repeats).items():
      # A cell's share of its task's demos is counted whole: the upper end for one PVR.
      hours = [(demo_frames + cell_frames) * (1 / render + 1 / rate) / 3600
               for rate in pvrs.values()]
      print(f"| {name}/{task} | {physics:,.0f} | {render:,.0f} | "
            + " | ".join(f"{h:.1f}" for h in hours) + " |", flush=True)
  print("\n    python -m " + " ".join(["launch.bench.suite_speed"]
                                      + [shlex.quote(a) for a in sys.argv[1:]]))


if __name__ == "__main__":
  define_flags()
  cli.run(main)
