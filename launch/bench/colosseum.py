"""Speed of a Colosseum sweep: evaluation episodes per minute on this machine (README figures).

  MUJOCO_GL=egl python -m launch.bench.colosseum [--pvr=in1k_mobilenetv2] [--render=128]
      [--img=112] [--tasks=drawer-open,hammer] [--episodes=5] [--horizon=200] [--envs=10]
      [--workers=2]

Runs exactly the job's evaluation path (the perturbed simulator in --workers processes, --envs episodes
side by side, preprocessing + frozen PVR + BC policy on device in one scanned rollout) over
every test set of --tasks, --episodes episodes each, with an untrained BC head: its episodes
never succeed, so each runs the full --horizon, the sweep's worst case. Prints episodes/min,
env steps/s and the projected time of the protocol's 10 tasks x 14 factors x 25 episodes at
this rate (a trained policy that succeeds stops early and is faster). The first test set's
batch is a warm-up (compile, worker start) and is timed separately.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

import jax
from absl import flags
import numpy as np
from launch import cli

from launch.bench import timing
from vcbench.algos import bc
from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import colosseum as col
from vcbench.data.demos import episode_seeds
from vcbench.envs.mujoco import metaworld as mw
from vcbench.models import embedder as embedder_lib

_PVR = flags.DEFINE_string("pvr", "in1k_mobilenetv2", "zoo entry")
_RENDER = flags.DEFINE_integer("render", 128, "render size (px)")
_IMG = flags.DEFINE_integer("img", 112, "encoder input size (px)")
_TASKS = flags.DEFINE_list("tasks", ["drawer-open", "hammer"], "Colosseum tasks")
_EPISODES = flags.DEFINE_integer("episodes", 5, "episodes per test set")
_HORIZON = flags.DEFINE_integer("horizon", 200, "steps per episode")
_ENVS = flags.DEFINE_integer("envs", 10, "episodes simulated side by side")
_WORKERS = flags.DEFINE_integer("workers", 2, "simulator worker processes")


def main(argv) -> None:
  del argv
  embedder = embedder_lib.make(_PVR.value, state_dim=mw.STATE_DIM, img_size=_IMG.value)
  protocol = bc_protocol.Protocol(horizon=_HORIZON.value, eval_envs=_ENVS.value,
                                  num_workers=_WORKERS.value)
  feat = embedder.dim * protocol.history + mw.PROPRIO_DIM
  untrained = bc.make_train(bc.default_config(), np.zeros((2, feat), np.float32),
                            np.zeros((2, 4), np.float32))
  act, state = untrained.act, untrained.init(jax.random.key(0)).variables()
  render = mw.RenderConfig(size=_RENDER.value)
  seeds = episode_seeds("test", _EPISODES.value)
  evaluator, episodes, seconds, warmup = None, 0, 0.0, None
  for task in _TASKS.value:
    make_sim = col.make_sim(task, render, _HORIZON.value)
    if evaluator is None:
      evaluator = bc_protocol.Evaluator(make_sim, protocol)
      warmup = timing.seconds(lambda: evaluator.episodes(
          embedder, act, state, [col.encode(col.NONE, s) for s in seeds]))
    else:
      evaluator.switch(make_sim)
    codes = [col.encode(t, s) for t in col.TEST_SETS
             if t in (col.NONE, col.ALL) or not col.inapplicable(task, t) for s in seeds]
    dt = timing.seconds(lambda: evaluator.episodes(embedder, act, state, codes))
    print(f"{task}: {len(codes)} episodes in {dt:.1f} s ({60 * len(codes) / dt:.1f}/min)")
    episodes, seconds = episodes + len(codes), seconds + dt
  evaluator.close()
  rate = 60 * episodes / seconds
  full = 10 * 14 * 25
  print(f"{_PVR.value} render {_RENDER.value} -> {_IMG.value} px, {_ENVS.value} envs, "
        f"{_WORKERS.value} workers, horizon {_HORIZON.value}: {rate:.1f} episodes/min, "
        f"{rate * _HORIZON.value / 60:.0f} env steps/s (warm-up batch {warmup:.1f} s); "
        f"10 tasks x 14 factors x 25 episodes at this rate: {full / rate:.0f} min")


if __name__ == "__main__":
  cli.run(main)
