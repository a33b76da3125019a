"""The Colosseum job (configs/colosseum.py): expert solvability -> demos -> embeddings -> BC ->
every test set -> store -> report.

Store rows: `colosseum_expert` (pvr "expert", one per task and test set: the scripted expert's
success) and `colosseum` (one per task, PVR, seed and test set; an excluded cell has a NaN score
and `extra/excluded` = why). A re-run skips stored cells; demos and embeddings are cached.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from configs import colosseum as colosseum_config
from launch import cortexbench as cortexbench_job
from launch import jobs
from vcbench import config as config_lib
from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import colosseum as col
from vcbench.data import demos as demos_lib
from vcbench.data import embeddings
from vcbench.data.demos import episode_seeds
from vcbench.envs.mujoco import metaworld as mw
from vcbench.models import embedder as embedder_lib
from vcbench.reports import colosseum as report_lib
from vcbench.reports import store as store_lib
from vcbench.robustness import perturbed

_NOT_HASHED = cortexbench_job._NOT_HASHED + ("test_sets",)  # noqa: SLF001 - same rule.


def validate(config) -> None:
  config_lib.require_choice(config, "tasks", list(col.TASKS))
  config_lib.require_choice(config, "test_sets", col.TEST_SETS)
  config_lib.require_choice(config, "pvrs", embedder_lib.names())
  config_lib.require(config, "pvrs", lambda v: "state_oracle" not in v,
                     "PVRs that see pixels (the Colosseum perturbs what the camera sees; the "
                     "state oracle would score every factor but friction and mass as clean)")
  cortexbench_job.checkpoint_paths(config)
  for key in cortexbench_job._POSITIVE + ("expert_episodes",):  # noqa: SLF001
    config_lib.require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")
  for key in ("img_size", "eval_every", "num_workers", "factor_seed"):
    config_lib.require(config, key, lambda v: isinstance(v, int) and v >= 0, "an int >= 0")
  config_lib.require(config, "seeds", lambda v: len(v) > 0, "at least one seed")
  config_lib.require(config, "expert_min_success", lambda v: 0 <= v <= 1, "a rate in [0, 1]")


def config_hash(config) -> str:
  return store_lib.config_hash({k: v for k, v in config.items() if k not in _NOT_HASHED})


def expert_exclusions(config, store, chash, task: str) -> dict[str, str]:
  """Test sets excluded on `task` -> reason: inapplicable by construction, or the scripted
  expert's success below `expert_min_success` (measured here, stored, and reused)."""
  out = {}
  done = {r["corruption"]: r["success_rate"] for r in store.to_rows(
      benchmark=col.EXPERT_BENCHMARK, task=task, config_hash=chash, latest_only=True)}
  # "all" leaves out the factors excluded here, so it is measured last; it is reported, never
  # excluded (the paper's "All Perturbations" column is defined for every task).
  order = [t for t in config.test_sets if t != col.ALL] + (
      [col.ALL] if col.ALL in config.test_sets else [])
  for test_set in order:
    reason = col.inapplicable(task, test_set) if test_set not in (col.NONE, col.ALL) else ""
    if reason:
      out[test_set] = reason
      continue
    if test_set not in done:
      metrics = perturbed.expert_success(
          task, test_set, config.expert_episodes, config.horizon, config.factor_seed,
          episode_seeds("test", 1)[0], excluded=tuple(f for f in out if f in col.FACTORS))
      cell = store_lib.Cell(benchmark=col.EXPERT_BENCHMARK, task=task, pvr="expert", seed=0,
                            corruption=test_set)
      store.append(cell, chash, metrics)
      done[test_set] = metrics["success_rate"]
    rate = float(done[test_set])
    print(f"  expert {task} / {test_set}: {100 * rate:.0f}%")
    if rate < config.expert_min_success and test_set in col.FACTORS:  # Factors, not baselines.
      out[test_set] = (f"the scripted expert succeeds in {100 * rate:.0f}% of "
                       f"{config.expert_episodes} episodes (< "
                       f"{100 * config.expert_min_success:.0f}%)")
  return out


@jobs.register("colosseum", schema=colosseum_config.get_config, validate=validate)
def run(config) -> str:
  t0 = time.time()
  store = store_lib.ResultStore(os.path.join(config.workdir, "results.jsonl"))
  data_dir = config.data_dir or os.path.join(config.workdir, "data")
  chash = config_hash(config)
  protocol = cortexbench_job.bc_protocol_of(config)
  render = mw.RenderConfig(size=config.render_size, camera=config.camera)
  embedders = {}
  for task in config.tasks:
    print(f"colosseum: {task}")
    excluded = expert_exclusions(config, store, chash, task)
    _run_task(config, store, chash, protocol, render, data_dir, task, excluded, embedders)
  rows = store.to_rows(config_hash=chash, latest_only=True)
  paths = report_lib.write_report(rows, os.path.join(config.workdir, "report"))
  text = paths["tables"].read_text(encoding="utf-8")
  print(text)
  print(f"report: {', '.join(str(p) for p in paths.values())}  ({time.time() - t0:.0f} s)")
  return text


def _cells(config, task, pvr, seed) -> dict[str, store_lib.Cell]:
  return {ts: store_lib.Cell(benchmark=col.BENCHMARK, task=task, pvr=pvr, seed=int(seed),
                             corruption=ts) for ts in config.test_sets}


def _run_task(config, store, chash, protocol, render, data_dir, task, excluded, embedders):
  todo = {(pvr, seed): store.pending(list(_cells(config, task, pvr, seed).values()), chash)
          for pvr in config.pvrs for seed in config.seeds}
  todo = {k: v for k, v in todo.items() if v}
  if not todo:
    return
  # 100 demos need more than CortexBench's 100 attempts where the expert fails at times
  # (bin-picking: 93 of 100); the same seeds are tried in the same order either way.
  demos = demos_lib.load_or_generate(data_dir, demos_lib.DemoConfig(
      task=task, num_demos=config.num_demos, render=render, max_steps=config.horizon,
      max_attempts=2 * config.num_demos))
  print(f"{task}: {demos.num_episodes} demos ({len(demos.actions)} steps, expert success "
        f"{100 * demos.meta['expert_success_rate']:.0f}%)")
  factors_excluded = tuple(f for f in excluded if f in col.FACTORS)
  make_sim = perturbed.make_sim(task, render, config.horizon, config.factor_seed,
                                factors_excluded)
  evaluator = None
  try:
    for (pvr, seed), pending in todo.items():
      emb_fn = cortexbench_job.embedder_of(config, pvr, embedders)
      emb = embeddings.load_or_compute(data_dir, task, emb_fn, demos, config.embed_batch)
      evaluator = evaluator or bc_protocol.Evaluator(make_sim, protocol)
      _run_cell(config, store, chash, protocol, evaluator, emb_fn, demos, emb, task, pvr, seed,
                pending, excluded)
  finally:
    if evaluator is not None:
      evaluator.close()


def _run_cell(config, store, chash, protocol, evaluator, emb_fn, demos, emb, task, pvr, seed,
              pending, excluded):
  """Trains BC once for (task, PVR, seed) and evaluates every pending test set, batched."""
  t0 = time.time()
  for cell in [c for c in pending if c.corruption in excluded]:
    store.append(cell, chash, {"score": math.nan, "success_rate": math.nan, "episodes": 0},
                 extra={col.EXCLUDED: excluded[cell.corruption]}, allow_nonfinite=True)
  run = [c for c in pending if c.corruption not in excluded]
  if not run:
    return
  print(f"{task} / {pvr} / seed {seed}: BC on {demos.num_episodes} clean demos")
  fitted = bc_protocol.fit(protocol, evaluator, emb_fn, demos, emb, int(seed))
  seeds = episode_seeds("test", protocol.test_episodes)
  codes = [perturbed.encode(c.corruption, s) for c in run for s in seeds]
  t1 = time.time()
  out = evaluator.episodes(emb_fn, fitted.act, fitted.state, codes)
  seconds = time.time() - t1
  n = len(seeds)
  for i, cell in enumerate(run):
    success, length = out["success"][i * n:(i + 1) * n], out["length"][i * n:(i + 1) * n]
    metrics = {"score": 100.0 * float(np.mean(success)), "success_rate": float(np.mean(success)),
               "episodes": n, "mean_length": float(np.mean(length)),
               "val_score": fitted.val_score, "best_epoch": fitted.best_epoch}
    store.append(cell, chash, metrics, extra={
        "embedder": emb_fn.fingerprint, "render": config.render_size,
        "eval_seconds": round(seconds, 1), "eval_episodes": len(codes),
        "cell_seconds": round(time.time() - t0, 1)})
    print(f"  {cell.corruption:>20}: {metrics['score']:5.1f}%")
  print(f"  {len(codes)} episodes in {seconds:.0f} s ({60 * len(codes) / seconds:.1f}/min)")
