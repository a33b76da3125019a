"""The vcbench-nav job: train (PPO or imitation; checkpointed, resumable, validated on val
apartments after every chunk) -> the best checkpoint evaluated on test apartments -> result
store -> summary (configs/nav.py has the variants and the launch commands).

Training resumes from the latest checkpoint after a kill (same learning curve); the
evaluation cell is skipped when the store already holds it for this config hash. A run can
start from another run's best params (`init_from`, e.g. a second imitation stage or PPO after
imitation; that run is trained to its end first) and export its agent (`export_to`, read by
`benchmarks.nav_agents` and `launch.nav_eval`).
"""
from __future__ import annotations

import contextlib
import functools
import pathlib
import time
from typing import Optional

import jax
import ml_collections

from vcbench import config as config_lib
from vcbench import files
from vcbench import metrics as metrics_lib
from vcbench.algos import nav_bc
from vcbench.algos import ppo
from vcbench.algos import recurrent
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import nav_agents
from vcbench.envs.nav import episodes as nav_episodes
from vcbench.envs.nav import render as nav_render
from vcbench.envs.nav import scenes as scene_gen
from vcbench.envs.nav import tasks
from vcbench.jobs import grid as grid_lib
from vcbench.store import Cell

# Where a run executes and what it logs, not what it computes.
NOT_HASHED = ("workdir", "chunk_updates", "eval_batch", "tensorboard", "export_to")


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
  c.odometry = False          # also observe the pose relative to the episode's start (habitat's
                              # GPS + compass for ObjectNav / ImageNav).
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
  # A nav config 'file:variant' (e.g. 'configs/nav.py:pointnav_rgbd_il') whose best-on-val
  # params start this run's training (e.g. PPO from an imitation agent), trained first under
  # this workdir if absent; '' starts from scratch. Its policy and sensors must be this one's.
  c.init_from = ""
  c.export_to = ""            # write the best params + config + test numbers here (an .npz
                              # that `benchmarks.nav_agents.load` reads) once the run is done.
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
  p = config.policy
  if (config.algo == "bc" and config.task != "objectnav"
      and (p.aux_goal_visible or p.aux_categories)):
    raise config_lib.ConfigError(
        "config.policy.aux_goal_visible / aux_categories are recognition heads trained on "
        f"ObjectNav's in-view labels, but config.task = {config.task!r} has none")
  if p.aux_depth and (config.height % p.aux_depth or config.width % p.aux_depth):
    raise config_lib.ConfigError(
        f"config.policy.aux_depth = {p.aux_depth}: the {config.height}x{config.width} frame "
        "must split into that many blocks per side")
  if config.init_from:
    validate(start_config(config))


def config_hash(config) -> str:
  # A run that starts from another's params depends on that run's whole config.
  extra = {"init_from": config_hash(start_config(config))} if config.init_from else {}
  if config.task == "objectnav":   # its episodes (goal distances, SPL) follow the viewpoints
    extra["viewpoints"] = nav_episodes.VIEWPOINTS
  return grid_lib.config_hash(config, NOT_HASHED, runner.ADDED_LATER, **extra)


# What must agree between a run and the run its params start from.
_SAME_FOR_INIT = ("policy", "sensors", "height", "width", "task")


def start_config(config) -> ml_collections.ConfigDict:
  """The config of the run whose params start `config`'s training (`init_from`), under the
  same workdir."""
  try:
    start = config_lib.load_file(config.init_from)
  except (ValueError, FileNotFoundError) as e:
    raise config_lib.ConfigError(f"config.init_from = {config.init_from!r}: {e}") from None
  start.workdir = config.workdir
  differ = [k for k in _SAME_FOR_INIT if _plain(start[k]) != _plain(config[k])]
  if differ:
    raise config_lib.ConfigError(
        f"config.init_from = {config.init_from!r} trains another network: "
        + "; ".join(f"{k}: {_plain(start[k])!r} there, {_plain(config[k])!r} here"
                    for k in differ))
  return start


def _plain(v):
  return v.to_dict() if isinstance(v, ml_collections.ConfigDict) else tuple(v) if isinstance(
      v, (list, tuple)) else v


def trained(config) -> None:
  """Trains the run of `config` to its end (resuming it; with its test evaluation) unless it
  is done: a run killed half way is not an agent yet."""
  done = runner.updates_done(pathlib.Path(config.workdir) / config.variant / "train")
  if (done < recurrent.num_updates(nav_bench.algo_config(config))
      or not (nav_bench.best_dir(config) / "validation.json").exists()):
    print(f"nav: {config.variant} under {config.workdir} is not trained to its end (update "
          f"{done}); training it", flush=True)
    with files.workdir_lock(config.workdir):
      run(config)


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
  init = None
  if config.init_from:
    start = start_config(config)
    trained(start)
  trainer = nav_bench.make_trainer(config)
  if config.init_from:
    # The same policy (start_config checks it): this trainer gives the params' shapes.
    params, best = nav_bench.best_params(start, trainer)
    init = lambda key: trainer.init_from(key, params)
    print(f"nav: {config.variant} starts from {start.variant} (update {best['update']}, val SR "
          f"{best['success']:.1f})", flush=True)
  print(f"nav: {config.variant}: {config.algo} on {config.task}, {trainer.num_updates} updates "
        f"x {trainer.steps_per_update} env steps, workdir {workdir}", flush=True)
  with curve_writers(config, workdir) as (curve, writer):
    select = selection(config, workdir / "best",
                       nav_bench.evaluator(config, trainer, "val", config.val_episodes), writer)
    state, _ = runner.run(trainer, workdir / "train", config.chunk_updates, init=init,
                          callbacks=[runner.WriteMetrics(curve, prefix=""),
                                     runner.WriteMetrics(writer), select])
  train_seconds = time.time() - t0
  # Read once, by the test evaluation or the export, whichever needs it first.
  best_params = functools.cache(lambda: select.best_state(jax.eval_shape(lambda: state.params)))
  for unit in grid.todo([grid_lib.Unit((config.task,), (cell(config),))]):
    t1 = time.time()
    summary = nav_bench.evaluator(config, trainer, "test", config.test_episodes)(best_params())
    grid.record(unit.cells[0], summary, extra={
        "split": "test", "selected_update": select.best["update"],
        "val_success": select.best["success"],
        "env_steps": int(trainer.num_updates * trainer.steps_per_update),
        "wall_seconds_this_process": round(train_seconds, 1),
        "train_wall_seconds": runner.wall_seconds(workdir / "train"),
        "eval_seconds": round(time.time() - t1, 1)}, allow_nonfinite=True)
  rows = grid.rows(benchmark=nav_bench.BENCHMARK)
  summary = {k: v for k, v in rows[-1].items() if isinstance(v, float)}
  print(_table(config, summary), flush=True)
  if config.export_to:
    nav_agents.export(config.export_to, config, best_params(), {
        "config_hash": config_hash(config), "test": summary,
        "selected_update": select.best["update"], "val_success": select.best["success"],
        "stages": stages(config)})
    print(f"nav: exported the agent to {config.export_to}", flush=True)
  return summary


def stages(config) -> list[dict]:
  """The training runs behind `config`'s params, first first (`init_from` chain): variant,
  learner, env steps, training wall seconds, selected update and the env steps up to it."""
  before = stages(start_config(config)) if config.init_from else []
  c = nav_bench.algo_config(config)
  per_update = c.num_envs * c.rollout_len
  best = runner.SelectBest(None, None, directory=nav_bench.best_dir(config)).best
  return before + [{"variant": config.variant, "algo": config.algo,
                    "env_steps": recurrent.num_updates(c) * per_update,
                    "wall_seconds": runner.wall_seconds(
                        pathlib.Path(config.workdir) / config.variant / "train"),
                    "selected_update": best["update"],
                    "selected_env_steps": best["update"] * per_update}]


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
