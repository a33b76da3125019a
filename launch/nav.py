"""The vcbench-nav job (configs/nav.py): train (PPO or imitation; checkpointed, resumable,
validated on val apartments after every chunk) -> the best checkpoint evaluated on test
apartments -> result store -> summary.

Training resumes from the latest checkpoint after a kill (same learning curve); the
evaluation cell is skipped when the store already holds it for this config hash.
"""
from __future__ import annotations

import json
import pathlib
import time

import jax
import ml_collections

from configs import nav as nav_config
from launch import jobs
from vcbench import config as config_lib
from vcbench.checkpoint import Checkpointer
from vcbench.algos import nav_bc
from vcbench.algos import ppo
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.data import files
from vcbench.envs import nav
from vcbench.envs.nav import render as nav_render
from vcbench.envs.nav import tasks
from vcbench.reports import store as store_lib

BENCHMARK = "vcbench-nav"
ALGOS = {"ppo": ppo, "bc": nav_bc}
# Where a run executes, not what it computes.
_NOT_HASHED = ("workdir", "chunk_updates", "eval_batch")


def algo_config(config) -> ml_collections.ConfigDict:
  """The chosen algorithm's config with the job's policy and seed filled in."""
  c = ml_collections.ConfigDict(config[config.algo].to_dict())
  c.policy = ml_collections.ConfigDict(config.policy.to_dict())
  c.seed = config.seed
  return c


def validate(config) -> None:
  config_lib.require_choice(config, "task", sorted(tasks.TASKS))
  config_lib.require_choice(config, "algo", sorted(ALGOS))
  config_lib.require_choice(config, "sensors", nav_render.SENSORS)
  for key in ("height", "width", "grid_size", "train_scenes", "train_episodes", "val_scenes",
              "val_episodes", "test_episodes", "eval_batch", "chunk_updates"):
    config_lib.require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")
  ALGOS[config.algo].check_config(algo_config(config), jax.device_count())
  nav_render.Camera(height=config.height, width=config.width, hfov=config.hfov)


def config_hash(config) -> str:
  kept = {k: v for k, v in config.to_dict().items() if k not in _NOT_HASHED}
  return store_lib.config_hash(runner.without_added_defaults(kept))


def _cell(config) -> store_lib.Cell:
  encoder = config.policy.encoder
  return store_lib.Cell(benchmark=BENCHMARK, task=config.task,
                        pvr="scratch_cnn" if encoder == "cnn" else encoder,
                        adaptation=("scratch" if encoder == "cnn" else
                                    "finetune" if config.policy.finetune_encoder else "frozen"),
                        seed=int(config.seed))


def make_env(config, split: str, episodes: int = 0):
  train = split == "train"
  return nav.make(config.task, split,
                  num_scenes=config.train_scenes if train else config.val_scenes,
                  num_episodes=episodes or config.train_episodes,
                  grid_size=config.grid_size, height=config.height, width=config.width,
                  hfov=config.hfov, sensors=tuple(config.sensors), auto_reset=train)


class BestCheckpoint:
  """Validation after every chunk of training; keeps the params of the best one (by SR, then
  SPL) under `<dir>`, so that a late collapse of PPO does not decide the result. The test
  split, never seen in selection, gives the reported numbers. Idempotent per update count and
  resumable: its record and params are on disk."""

  def __init__(self, directory: pathlib.Path, evaluate):
    self.directory, self.evaluate = directory, evaluate
    self.ckpt = Checkpointer(directory / "params", max_to_keep=1)
    self.record_path = directory / "validation.json"
    self.record = (json.loads(self.record_path.read_text()) if self.record_path.exists()
                   else {"history": [], "best": None})

  def __call__(self, update: int, state) -> None:
    if any(h["update"] == update for h in self.record["history"]):
      return
    s = self.evaluate(state.params)
    entry = {"update": update, "success": s["success"], "spl": s["spl"]}
    best = self.record["best"]
    if best is None or (s["success"], s["spl"]) > (best["success"], best["spl"]):
      self.ckpt.save(update, state.params)
      self.record["best"] = entry
    self.record["history"].append(entry)
    print(f"validation at update {update}: SR {s['success']:.1f} SPL {s['spl']:.1f} (best: "
          f"update {self.record['best']['update']}, SR {self.record['best']['success']:.1f})",
          flush=True)
    text = json.dumps(self.record, indent=1)
    files.atomic_write(self.record_path, lambda f: f.write(text.encode()))

  def best_params(self, target):
    return self.ckpt.restore(self.record["best"]["update"], target=target)


def _evaluator(config, trainer, split: str, episodes: int):
  env = make_env(config, split, episodes)
  def evaluate(params):
    results = nav_bench.evaluate(
        trainer.policy_step, trainer.policy.initial_carry, params, env, frozen=trainer.frozen,
        batch=config.eval_batch, key=jax.random.key(config.seed), greedy=config.eval_greedy)
    return nav_bench.summarize(results, config.task)
  return evaluate


@jobs.register("nav", schema=nav_config.get_config, validate=validate)
def run(config) -> dict:
  workdir = pathlib.Path(config.workdir) / config.variant
  store = store_lib.ResultStore(pathlib.Path(config.workdir) / "results.jsonl")
  chash, cell = config_hash(config), _cell(config)
  algo = algo_config(config)
  t0 = time.time()
  trainer = ALGOS[config.algo].make_train(algo, make_env(config, "train"))
  print(f"nav: {config.variant}: {config.algo} on {config.task}, {trainer.num_updates} updates "
        f"x {trainer.steps_per_update} env steps, workdir {workdir}", flush=True)
  select = BestCheckpoint(workdir / "best", _evaluator(config, trainer, "val", config.val_episodes))
  state, curve = runner.run(trainer, algo, workdir / "train", config.chunk_updates,
                            after_chunk=select)
  train_seconds = time.time() - t0
  text = json.dumps({k: [None if v != v else float(v) for v in vals]    # NaN -> null
                     for k, vals in curve.items()})
  files.atomic_write(workdir / "curve.json", lambda f: f.write(text.encode()))
  if store.pending([cell], chash):
    t1 = time.time()
    params = select.best_params(jax.eval_shape(lambda: state.params))
    summary = _evaluator(config, trainer, "test", config.test_episodes)(params)
    store.append(cell, chash, summary, extra={
        "split": "test", "selected_update": select.record["best"]["update"],
        "val_success": select.record["best"]["success"],
        "env_steps": int(trainer.num_updates * trainer.steps_per_update),
        "wall_seconds_this_process": round(train_seconds, 1),
        "eval_seconds": round(time.time() - t1, 1)}, allow_nonfinite=True)
  rows = store.to_rows(benchmark=BENCHMARK, config_hash=chash, latest_only=True)
  summary = {k: v for k, v in rows[-1].items() if isinstance(v, float)}
  print(_table(config, summary), flush=True)
  return summary


def _table(config, s: dict) -> str:
  bins = [b[0] for b in tasks.get(config.task).bins]
  head = ["SR", "SPL"] + [f"SR {b}" for b in bins] + ["failed actions", "min dist (m)"]
  vals = [s["success"], s["spl"]] + [s.get(f"success_{b}", float("nan")) for b in bins] + [
      s["failed_actions"], s["min_distance"]]
  return (f"\n{config.task} on {config.test_episodes} test episodes ({config.val_scenes} unseen "
          f"apartments; checkpoint chosen on val):\n| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n| " +
          " | ".join(f"{v:.1f}" if i < len(head) - 1 else f"{v:.2f}" for i, v in enumerate(vals))
          + " |")
