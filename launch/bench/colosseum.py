"""Speed of Colosseum evaluation: the episode stream (refilled slots, host overlapped with the
device) against fixed batches, on the same episodes, timed in one run (README figures).

  MUJOCO_GL=egl python -m launch.bench.colosseum [--pvr=in1k_mobilenetv2] [--render=128]
      [--img=112] [--tasks=drawer-open,hammer] [--episodes=5] [--horizon=200] [--envs=10]
      [--workers=2] [--demos=0] [--epochs=30] [--data_dir=runs/bench_colosseum]

Runs the job's evaluation path (the perturbed simulator in --workers processes, preprocessing +
frozen PVR + BC policy on device) over every applicable test set of --tasks, --episodes
episodes each, once per evaluator and task, the two alternating. The policy: with --demos=0 an
untrained BC head, whose episodes never succeed and all run the full --horizon (the worst case,
where only the overlap helps); with --demos=N a BC head trained for --epochs on N clean expert
demos of each task (cached under --data_dir), whose episodes end at different steps as a real
sweep's do (where refilling slots helps too). Prints env steps/s and episodes/min of each, their
ratio, whether all gave the same episodes, and the projected evaluation time of the protocol's
10 tasks x 15 factors x 25 episodes at the faster stream's rate. The first batch of each
evaluator is a warm-up (compile, worker start), timed separately.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

import dataclasses

import jax
from absl import flags
import numpy as np
from launch import cli

from launch.bench import timing
from vcbench.algos import bc
from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import colosseum as col
from vcbench.benchmarks import cortexbench
from vcbench.data.demos import episode_seeds
from vcbench.jobs import colosseum as colosseum_job
from vcbench.jobs import cortexbench as cortexbench_job
from vcbench.envs.mujoco import metaworld as mw

_PVR = flags.DEFINE_string("pvr", "in1k_mobilenetv2", "zoo entry")
_RENDER = flags.DEFINE_integer("render", 128, "render size (px)")
_IMG = flags.DEFINE_integer("img", 112, "encoder input size (px)")
_TASKS = flags.DEFINE_list("tasks", ["drawer-open", "hammer"], "Colosseum tasks")
_EPISODES = flags.DEFINE_integer("episodes", 5, "episodes per test set")
_HORIZON = flags.DEFINE_integer("horizon", 200, "steps per episode")
_ENVS = flags.DEFINE_integer("envs", 10, "episodes per policy batch (eval_envs)")
_WORKERS = flags.DEFINE_integer("workers", 2, "simulator worker processes")
_DEMOS = flags.DEFINE_integer("demos", 0, "clean demos to train the BC head on (0: untrained)")
_EPOCHS = flags.DEFINE_integer("epochs", 30, "BC epochs with --demos")
_DATA_DIR = flags.DEFINE_string("data_dir", "runs/bench_colosseum", "demo/embedding cache")
MODES = ("batches", "stream", "overlap")   # stream: refill only; overlap: and two halves.


def _policy(track, task: str, embedder, demos_n: int):
  """(act, variables): untrained, or BC trained on `demos_n` clean demos of `task`."""
  feat = embedder.dim * track.protocol.history + mw.PROPRIO_DIM
  if demos_n == 0:
    train = bc.make_train(bc.default_config(), np.zeros((2, feat), np.float32),
                          np.zeros((2, 4), np.float32))
    return train.act, train.init(jax.random.key(0)).variables()
  demos = track.demos(task, max_steps=_HORIZON.value, max_attempts=2 * demos_n)
  emb = track.embeddings(task, embedder, demos)
  x = bc.features(emb, demos.episode, demos.proprio, track.protocol.history)
  cfg = track.protocol.bc_config(0)
  train = bc.make_train(cfg, x.astype(np.float32), demos.actions.astype(np.float32))
  state, _ = train.train_chunk(train.init(jax.random.key(0)), cfg.epochs)
  return train.act, state.variables()


def main(argv) -> None:
  del argv
  config = colosseum_job.default_config()
  config.update(dict(render_size=_RENDER.value, img_size=_IMG.value, horizon=_HORIZON.value,
                     eval_envs=_ENVS.value, num_workers=_WORKERS.value, epochs=_EPOCHS.value,
                     num_demos=max(_DEMOS.value, 1), data_dir=_DATA_DIR.value))
  track = cortexbench_job.Track(config, cortexbench.suite("metaworld"))
  embedder = track.embedder(_PVR.value, _TASKS.value[0])
  seeds = episode_seeds("test", _EPISODES.value)
  evaluators, totals = {}, {m: [0, 0, 0.0] for m in MODES}   # episodes, env steps, seconds
  same = True
  try:
    for task in _TASKS.value:
      act, variables = _policy(track, task, embedder, _DEMOS.value)
      make_sim = col.make_sim(task, track.render, _HORIZON.value)
      codes = [col.encode(t, s) for t in col.TEST_SETS
               if t in (col.NONE, col.ALL) or not col.inapplicable(task, t) for s in seeds]
      got = {}
      for mode in MODES:
        if mode not in evaluators:
          protocol = dataclasses.replace(track.protocol, stream=mode != "batches",
                                         overlap=mode == "overlap")
          evaluators[mode] = bc_protocol.Evaluator(make_sim, protocol)
          warm = timing.seconds(lambda: evaluators[mode].episodes(
              embedder, act, variables, codes[:_ENVS.value]))
          print(f"{mode}: warm-up batch {warm:.1f} s")
        else:
          evaluators[mode].switch(make_sim)
        out = {}
        dt = timing.seconds(lambda: out.update(evaluators[mode].episodes(
            embedder, act, variables, codes)))
        steps = int(out["length"].sum())
        got[mode] = out
        print(f"{task} / {mode}: {len(codes)} episodes, {steps} env steps in {dt:.1f} s "
              f"({steps / dt:.0f} env steps/s, {60 * len(codes) / dt:.1f} episodes/min, "
              f"success {100 * out['success'].mean():.0f}%)")
        for i, v in enumerate((len(codes), steps, dt)):
          totals[mode][i] += v
      same &= all(np.array_equal(got["batches"][k], got[m][k])
                  for k in ("success", "length") for m in MODES[1:])
  finally:
    for ev in evaluators.values():
      ev.close()
  rate = {m: totals[m][1] / totals[m][2] for m in MODES}
  for m in MODES:
    print(f"{m}: {totals[m][0]} episodes, {totals[m][1]} env steps in {totals[m][2]:.0f} s: "
          f"{rate[m]:.0f} env steps/s, {60 * totals[m][0] / totals[m][2]:.1f} episodes/min")
  full = len(col.TASKS) * len(col.FACTORS) * 25
  best = max(MODES[1:], key=rate.get)
  per_min = 60 * totals[best][0] / totals[best][2]
  print(f"{_PVR.value} render {_RENDER.value} -> {_IMG.value} px, {_ENVS.value} envs per batch, "
        f"{_WORKERS.value} workers, horizon {_HORIZON.value}, "
        f"{'untrained head' if _DEMOS.value == 0 else f'BC on {_DEMOS.value} demos'}: "
        f"env steps/s vs batches: stream {rate['stream'] / rate['batches']:.2f}x, overlap "
        f"{rate['overlap'] / rate['batches']:.2f}x; same episodes: {same}; {len(col.TASKS)} "
        f"tasks x {len(col.FACTORS)} factors x 25 episodes at {best}'s rate: "
        f"{full / per_min:.0f} min")


if __name__ == "__main__":
  cli.run(main)
