"""The vcbench-nav job: train (PPO or imitation; checkpointed, resumable, validated on val
apartments after every chunk) -> the best checkpoint evaluated on test apartments -> result
store -> summary (configs/nav.py has the variants and the launch commands).

Training resumes from the latest checkpoint after a kill (same learning curve); the
evaluation cell is skipped when the store already holds it for this config hash.
"""
from __future__ import annotations

import contextlib
import pathlib
import time
from typing import Optional

import jax
import ml_collections

from vcbench import config as config_lib
from vcbench import metrics as metrics_lib
from vcbench.algos import nav_bc
from vcbench.algos import ppo
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.envs.nav import render as nav_render
from vcbench.envs.nav import scenes as scene_gen
from vcbench.envs.nav import tasks
from vcbench.jobs import grid as grid_lib
from vcbench.store import Cell

# Where a run executes and what it logs, not what it computes.
NOT_HASHED = ("workdir", "chunk_updates", "eval_batch", "tensorboard")


def _learner_config(module) -> ml_collections.ConfigDict:
  """A learner's config without the parts the job sets (policy, seed)."""
  d = module.default_config().to_dict()
  del d["policy"], d["seed"]
  return ml_collections.ConfigDict(d)


def default_config() -> ml_collections.ConfigDict:
  """PointNav with depth + GPS/compass, SimpleCNN + LSTM, PPO (configs/nav.py's default)."""
  c = ml_collections.ConfigDict()
  c.job = "nav"
  c.variant = "pointnav_depth"   # The config file's variant: the run's folder under workdir.
  c.workdir = "runs/nav"
  c.task = "pointnav"
  c.sensors = ("depth",)
  c.height = c.width = 32
  c.hfov = 79.0
  c.objects = "sprites"       # 'sprites' (category cut-outs) or 'boxes' (the look before them).
  c.grid_size = 32            # apartments of up to 8 m x 8 m (RoboTHOR-sized).
  c.train_scenes = 400
  c.train_episodes = 8000
  c.val_scenes = 15           # RobustNav evaluates on RoboTHOR's 15 val scenes (and so many
                              # test scenes here).
  c.val_episodes = 150        # after every chunk, to choose the checkpoint; balanced bins.
  c.test_episodes = 300       # the reported numbers; balanced over the difficulty bins.
  c.eval_batch = 150
  c.eval_greedy = False
  c.algo = "ppo"              # a `benchmarks.nav.LEARNERS` name: 'ppo' or 'bc'.
  c.chunk_updates = 100       # updates per checkpoint and validation.
  c.tensorboard = False       # training and validation curves as TensorBoard event files in
                              # <workdir>/<variant>/tb (curve.json is always written).
  c.seed = 0
  c.policy = ppo.default_config().policy   # shared by both learners
  c.policy.hidden = 256
  c.policy.rnn_layers = 1
  c.ppo = _learner_config(ppo)
  c.ppo.num_envs = 64
  c.ppo.rollout_len = 64
  c.ppo.num_updates = 900     # 3.7M env steps
  c.bc = _learner_config(nav_bc)
  return c


def validate(config) -> None:
  config_lib.require_choice(config, "task", sorted(tasks.TASKS))
  config_lib.require_choice(config, "algo", nav_bench.LEARNERS.names())
  config_lib.require_choice(config, "sensors", nav_render.SENSORS)
  config_lib.require_choice(config, "objects", scene_gen.OBJECT_STYLES)
  config_lib.require_ints(config, ("height", "width", "grid_size", "train_scenes",
                                   "train_episodes", "val_scenes", "val_episodes",
                                   "test_episodes", "eval_batch", "chunk_updates"))
  nav_bench.LEARNERS.get(config.algo).check_config(nav_bench.algo_config(config),
                                                   jax.device_count())
  nav_render.Camera(height=config.height, width=config.width, hfov=config.hfov)


def config_hash(config) -> str:
  return grid_lib.config_hash(config, NOT_HASHED, runner.ADDED_LATER)


def cell(config) -> Cell:
  encoder = config.policy.encoder
  return Cell(benchmark=nav_bench.BENCHMARK, task=config.task,
              pvr="scratch_cnn" if encoder == "cnn" else encoder,
              adaptation=("scratch" if encoder == "cnn" else
                          "finetune" if config.policy.finetune_encoder else "frozen"),
              seed=int(config.seed))


def selection(config, directory, evaluate=None,
              writer: Optional[metrics_lib.MetricWriter] = None) -> runner.SelectBest:
  """The validation after every chunk that keeps the best params (by SR, then SPL) under
  `directory` (<workdir>/<variant>/best), so that a late collapse of PPO does not decide the
  result; resumable with the run. `evaluate` None: read an existing selection. Each
  validation's SR and SPL also go to `writer` (as `val/success`, `val/spl`)."""
  writer = metrics_lib.NoOpWriter() if writer is None else writer

  def log(entry, progress):
    writer.write_scalars(entry["update"], {"val/success": entry["success"],
                                           "val/spl": entry["spl"]})
    best = select.best
    print(f"validation at update {entry['update']}: SR {entry['success']:.1f} SPL "
          f"{entry['spl']:.1f} (best: update {best['update']}, SR {best['success']:.1f})",
          flush=True)
  select = runner.SelectBest(
      lambda state: {k: v for k, v in evaluate(state.params).items() if k in ("success", "spl")},
      lambda e: (e["success"], e["spl"]), directory=directory, log=log)
  return select


@contextlib.contextmanager
def curve_writers(config, workdir: pathlib.Path):
  """(curve.json's writer: the training metrics by name, rewritten after every chunk;
  TensorBoard's under <workdir>/tb, or a no-op one when config.tensorboard is off)."""
  curve = metrics_lib.JsonCurveWriter(workdir / "curve.json")
  with curve, metrics_lib.tensorboard_or_noop(config.tensorboard, workdir / "tb") as writer:
    yield curve, writer


def run(config) -> dict:
  workdir = pathlib.Path(config.workdir) / config.variant
  grid = grid_lib.Grid("vcbench-nav", config.workdir, config_hash(config))
  t0 = time.time()
  trainer = nav_bench.make_trainer(config)
  print(f"nav: {config.variant}: {config.algo} on {config.task}, {trainer.num_updates} updates "
        f"x {trainer.steps_per_update} env steps, workdir {workdir}", flush=True)
  with curve_writers(config, workdir) as (curve, writer):
    select = selection(config, workdir / "best",
                       nav_bench.evaluator(config, trainer, "val", config.val_episodes), writer)
    state, _ = runner.run(trainer, workdir / "train", config.chunk_updates,
                          callbacks=[runner.WriteMetrics(curve, prefix=""),
                                     runner.WriteMetrics(writer), select])
  train_seconds = time.time() - t0
  for unit in grid.todo([grid_lib.Unit((config.task,), (cell(config),))]):
    t1 = time.time()
    params = select.best_state(jax.eval_shape(lambda: state.params))
    summary = nav_bench.evaluator(config, trainer, "test", config.test_episodes)(params)
    grid.record(unit.cells[0], summary, extra={
        "split": "test", "selected_update": select.best["update"],
        "val_success": select.best["success"],
        "env_steps": int(trainer.num_updates * trainer.steps_per_update),
        "wall_seconds_this_process": round(train_seconds, 1),
        "eval_seconds": round(time.time() - t1, 1)}, allow_nonfinite=True)
  rows = grid.rows(benchmark=nav_bench.BENCHMARK)
  summary = {k: v for k, v in rows[-1].items() if isinstance(v, float)}
  print(_table(config, summary), flush=True)
  return summary


def _table(config, s: dict) -> str:
  bins = [b[0] for b in tasks.get(config.task).bins]
  head = ["SR", "SPL"] + [f"SR {b}" for b in bins] + ["failed actions", "min dist (m)"]
  vals = [s["success"], s["spl"]] + [s.get(f"success_{b}", float("nan")) for b in bins] + [
      s["failed_actions"], s["min_distance"]]
  return (f"\n{config.task} on {config.test_episodes} test episodes ({config.val_scenes} unseen "
          f"apartments; checkpoint chosen on val):\n| " + " | ".join(head) + " |\n|"
          + "---|" * len(head) + "\n| "
          + " | ".join(f"{v:.1f}" if i < len(head) - 1 else f"{v:.2f}" for i, v in enumerate(vals))
          + " |")
