"""The Colosseum job: expert solvability -> demos -> embeddings -> BC -> every test set -> store
-> report (configs/colosseum.py has the variants and the launch commands).

Store rows: `colosseum_expert` (pvr "expert", one per task and test set: the scripted expert's
success) and `colosseum` (one per task, PVR, seed and test set; an excluded cell has a NaN score
and `extra/excluded` = why). A re-run skips stored cells; demos and embeddings are cached. The
BC half is CortexBench's track (`jobs.cortexbench.Track`) on clean MetaWorld demos; evaluation
runs every test set of a task through one perturbed simulator (`benchmarks.colosseum`).
"""
from __future__ import annotations

import hashlib
import math
import os
import time

import ml_collections
import numpy as np

from vcbench import config as config_lib
from vcbench import provenance
from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import colosseum as col
from vcbench.benchmarks import cortexbench
from vcbench.envs.mujoco import scene
from vcbench.data import demos as demos_lib
from vcbench.data.demos import episode_seeds
from vcbench.jobs import cortexbench as cortexbench_job
from vcbench.jobs import grid as grid_lib
from vcbench.models import embedder as embedder_lib
from vcbench.reports import colosseum as report_lib
from vcbench.store import Cell

NOT_HASHED = cortexbench_job.NOT_HASHED + ("test_sets",)   # Which cells: not what they compute.
GRIDS = ("tasks", "pvrs", "seeds", "test_sets")
DIRS = cortexbench_job.DIRS
# The digest of `col.definitions()` when it entered the hash: at this value it is left out, so
# the cells stored before keep their hash; any changed definition changes every cell's hash.
DEFINITIONS_DIGEST = "d1fed064689d0651af52cbab81c08fe997f03edb5c113b590d5ded40e303ad62"


def default_config() -> ml_collections.ConfigDict:
  """The Colosseum protocol on ten MetaWorld tasks, with CortexBench's BC recipe."""
  c = cortexbench_job.default_config()
  c.job = "colosseum"
  del c.per_suite   # MetaWorld only.
  c.workdir = "runs/colosseum"
  c.tasks = col.TASKS
  c.camera = "top_cap2"
  c.test_sets = col.TEST_SETS
  c.pvrs = ("in1k_mobilenetv2",)
  c.seeds = (0,)
  c.num_demos = 100
  c.render_size, c.img_size = 128, 112
  c.epochs, c.eval_every = 100, 20
  c.val_episodes, c.test_episodes = 10, 25
  c.horizon = col.DEFAULT_HORIZON   # Steps per episode, but for the tasks below.
  # "task=steps,...": tasks whose clean expert needs longer (benchmarks/colosseum.py HORIZONS).
  c.task_horizons = ",".join(f"{t}={h}" for t, h in col.HORIZONS.items())
  c.eval_envs = 10
  c.num_workers = 2
  c.factor_seed = 0          # Base of every factor draw (episode seeds are the test split's).
  c.expert_episodes = 25
  c.expert_min_success = col.EXPERT_MIN_SUCCESS
  c.expert_rule = "relative"  # Exclude below 90% of the clean expert's rate ("absolute": 90%).
  return c


def validate(config) -> None:
  config_lib.require_choice(config, "tasks", col.TASKS)
  config_lib.require_choice(config, "test_sets", col.TEST_SETS)
  config_lib.require_choice(config, "pvrs", embedder_lib.names())
  bc_protocol.validate_config(config, config.pvrs)
  config_lib.require_ints(config, ("expert_episodes",))
  config_lib.require_ints(config, ("factor_seed",), minimum=0)
  config_lib.require(config, "expert_min_success", lambda v: 0 <= v <= 1, "a rate in [0, 1]")
  config_lib.require_choice(config, "expert_rule", col.EXPERT_RULES)
  config_lib.require_choice(config, "camera", ("top_cap2",) + tuple(scene.CAMERAS))
  for task, steps in config_lib.parse_mapping(config, "task_horizons", col.TASKS).items():
    if not steps.isdigit() or int(steps) < 1:
      raise config_lib.ConfigError(f"config.task_horizons gives {task} {steps!r} steps; "
                                   f"expected a positive integer")


def task_horizon(config, task: str) -> int:
  """`task`'s steps per episode: config.task_horizons', else config.horizon."""
  return int(config_lib.parse_mapping(config, "task_horizons", col.TASKS).get(
      task, config.horizon))


def definitions_digest() -> str:
  return hashlib.sha256(provenance.canonical_json(col.definitions()).encode()).hexdigest()


def config_hash(config) -> str:
  return grid_lib.config_hash(config, NOT_HASHED, {"definitions": DEFINITIONS_DIGEST},
                              definitions=definitions_digest())


def run(config) -> str:
  t0 = time.time()
  grid = grid_lib.Grid("colosseum", config.workdir, config_hash(config))
  track = cortexbench_job.Track(config, cortexbench.suite("metaworld"))
  todo = grid.groups(grid.todo(_units(config)), by=lambda u: u.key[0])
  try:
    for task in config.tasks:
      print(f"colosseum: {task}")
      excluded = expert_exclusions(config, grid, task)
      if task in todo:
        _run_task(track, grid, task, excluded, todo[task])
  finally:
    track.close()
  paths = report_lib.write_report(grid.rows(), os.path.join(config.workdir, "report"))
  text = paths["tables"].read_text(encoding="utf-8")
  print(text)
  print(f"report: {', '.join(str(p) for p in paths.values())}  ({time.time() - t0:.0f} s)")
  return text


def _units(config) -> list[grid_lib.Unit]:
  """Keyed (task, PVR, seed), each the cells of every test set."""
  return [grid_lib.Unit((task, pvr, int(seed)), tuple(
      Cell(benchmark=col.BENCHMARK, task=task, pvr=pvr, seed=int(seed), corruption=t)
      for t in config.test_sets)) for task in config.tasks for pvr in config.pvrs
          for seed in config.seeds]


def plan(config) -> list[grid_lib.Slice]:
  """The sweep's pieces: one per (task, PVR), every seed and test set in it. Each piece of a
  task measures the expert under the test sets unless the store already has it (the driver
  keeps the first record of each cell), and shares the task's demos through `data_dir`."""
  data_dir = config.data_dir or os.path.join(config.workdir, "data")
  h = config_hash(config)
  return [grid_lib.Slice((task, pvr), {"tasks": (task,), "pvrs": (pvr,), "data_dir": data_dir},
                         tuple(c for u in units for c in u.cells), h)
          for (task, pvr), units in grid_lib.Grid.groups(_units(config),
                                                         lambda u: u.key[:2]).items()]


def expert_exclusions(config, grid: grid_lib.Grid, task: str) -> dict[str, str]:
  """Test sets excluded on `task` -> why (`col.expert_exclusions`); the expert's success under
  each test set is measured once and stored (`colosseum_expert` rows), then reused."""
  done = {r["corruption"]: r["success_rate"]
          for r in grid.rows(benchmark=col.EXPERT_BENCHMARK, task=task)}

  def expert_rate(test_set: str, excluded: tuple[str, ...]) -> float:
    if test_set not in done:
      metrics = col.expert_success(task, test_set, config.expert_episodes,
                                   task_horizon(config, task), config.factor_seed,
                                   episode_seeds("test", 1)[0], excluded)
      grid.record(Cell(benchmark=col.EXPERT_BENCHMARK, task=task, pvr="expert", seed=0,
                       corruption=test_set), metrics)
      done[test_set] = metrics["success_rate"]
    return done[test_set]

  return col.expert_exclusions(task, config.test_sets, expert_rate, config.expert_min_success,
                               config.expert_episodes, rule=config.expert_rule)


def _run_task(track: cortexbench_job.Track, grid: grid_lib.Grid, task: str,
              excluded: dict[str, str], units: list[grid_lib.Unit]) -> None:
  config = track.config
  # 100 demos need more than CortexBench's 100 attempts where the expert fails at times
  # (bin-picking: 93 of 100); the same seeds are tried in the same order either way.
  horizon = task_horizon(config, task)
  demos = track.demos(task, demo_source(track, task, horizon), max_steps=horizon,
                      max_attempts=2 * config.num_demos)
  factors_excluded = {f: why for f, why in excluded.items() if f in col.FACTORS}
  for unit in grid.pending(units):
    _, pvr, seed = unit.key
    pixels = pvr != embedder_lib.STATE_ORACLE   # The oracle's simulator renders nothing.
    make_sim = col.make_sim(task, track.render if pixels else None, horizon,
                            config.factor_seed, factors_excluded)
    emb_fn = track.embedder(pvr, task)
    emb = track.embeddings(task, emb_fn, demos)
    evaluator = track.evaluator(task, pixels, make_sim, horizon)
    _run_cell(track, grid, evaluator, emb_fn, demos, emb, unit, excluded)


def demo_source(track: cortexbench_job.Track, task: str, horizon: int):
  """Where the clean demos come from: CortexBench's MetaWorld demos through top_cap2 (the
  front camera's frames are the same pixels), or the unperturbed Colosseum scene for its
  other cameras (None: the suite's own)."""
  if track.config.camera == "top_cap2":
    return None
  suite = track.suite
  return demos_lib.Source(make_sim=col.make_sim(task, track.render, horizon),
                          expert=suite.expert(task), success_only=suite.success_ends_episode,
                          version=f"{suite.version()}+colosseum-scene")


def _run_cell(track, grid, evaluator, emb_fn, demos, emb, unit: grid_lib.Unit,
              excluded: dict[str, str]) -> None:
  """Trains BC once for (task, PVR, seed) and evaluates every pending test set, batched."""
  config, protocol = track.config, track.protocol
  task, pvr, seed = unit.key
  t0 = time.time()
  for cell in [c for c in unit.cells if c.corruption in excluded]:
    grid.record(cell, {"score": math.nan, "success_rate": math.nan, "episodes": 0},
                extra={col.EXCLUDED: excluded[cell.corruption]}, allow_nonfinite=True)
  run = [c for c in unit.cells if c.corruption not in excluded]
  if not run:
    return
  print(f"{task} / {pvr} / seed {seed}: BC on {demos.num_episodes} clean demos")
  with cortexbench_job.curve_writer(config, task, pvr, seed) as writer:
    fitted = bc_protocol.fit(protocol, evaluator, emb_fn, demos, emb, int(seed), writer=writer)
  seeds = episode_seeds("test", protocol.test_episodes)
  codes = [col.encode(c.corruption, s) for c in run for s in seeds]
  t1 = time.time()
  out = evaluator.episodes(emb_fn, fitted.act, fitted.state, codes)
  seconds = time.time() - t1
  n = len(seeds)
  for i, cell in enumerate(run):
    success, length = out["success"][i * n:(i + 1) * n], out["length"][i * n:(i + 1) * n]
    metrics = {"score": 100.0 * float(np.mean(success)), "success_rate": float(np.mean(success)),
               "episodes": n, "mean_length": float(np.mean(length)),
               "val_score": fitted.val_score, "best_epoch": fitted.best_epoch}
    grid.record(cell, metrics, extra={
        "embedder": emb_fn.fingerprint, "render": config.render_size,
        "eval_seconds": round(seconds, 1), "eval_episodes": len(codes),
        "cell_seconds": round(time.time() - t0, 1)})
    print(f"  {cell.corruption:>20}: {metrics['score']:5.1f}%")
  print(f"  {len(codes)} episodes in {seconds:.0f} s ({60 * len(codes) / seconds:.1f}/min)")
