"""The CortexBench BC job (configs/cortexbench.py): demos -> embeddings -> BC -> store -> report.

Cells already in the result store under the same config hash are skipped, so an interrupted
run resumes where it stopped; demos and embeddings are cached on disk by config hash.
"""
from __future__ import annotations

import dataclasses
import os
import time

from configs import cortexbench as cortexbench_config
from launch import jobs
from vcbench import config as config_lib
from vcbench.algos import finetune
from vcbench.benchmarks import adaptation as adaptation_lib
from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import cortexbench
from vcbench.data import demos as demos_lib
from vcbench.data import embeddings
from vcbench.envs.mujoco import metaworld as mw
from vcbench.models import embedder as embedder_lib
from vcbench.models import zoo
from vcbench.reports import store as store_lib
from vcbench.reports import report as report_lib

# Keys that do not change what any one cell computes: where and how fast a run executes, and
# which cells it contains (a cell names its own task, PVR and seed). Changing them keeps the
# cells already in the store, so a sweep can grow by a seed, task or PVR.
_NOT_HASHED = ("workdir", "data_dir", "num_workers", "tasks", "pvrs", "seeds")
_POSITIVE = ("num_demos", "render_size", "embed_batch", "epochs", "val_episodes",
             "test_episodes", "horizon", "history", "batch_size", "eval_envs")


def validate(config) -> None:
  config_lib.require_choice(config, "suite", [n for n, s in cortexbench.SUITES.items()
                                              if s.available])
  config_lib.require_choice(config, "tasks", mw.task_names())
  config_lib.require_choice(config, "pvrs", embedder_lib.names())
  checkpoint_paths(config)
  for key in _POSITIVE:
    config_lib.require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")
  for key in ("img_size", "eval_every", "num_workers"):
    config_lib.require(config, key, lambda v: isinstance(v, int) and v >= 0, "an int >= 0")
  config_lib.require(config, "seeds", lambda v: len(v) > 0, "at least one seed")
  config_lib.require(config, "camera", lambda v: isinstance(v, str) and v, "a camera name")
  adaptation_lib.validate(config)


def config_hash(config) -> str:
  """The hash cells are stored under: the config minus `_NOT_HASHED` (and minus the
  adaptation settings for frozen runs, so their hashes predate adaptations)."""
  skip = _NOT_HASHED + (("adaptation", "adapt") if config.adaptation == "frozen" else ())
  return store_lib.config_hash({k: v for k, v in config.items() if k not in skip})


def checkpoint_paths(config) -> dict[str, str]:
  """config.checkpoints ("pvr=path[,pvr=path...]") as a dict; refuses malformed entries and
  PVRs the run does not evaluate."""
  out = {}
  for item in filter(None, config.checkpoints.split(",")):
    name, sep, path = str(item).partition("=")
    if not sep or not name or not path:
      raise config_lib.ConfigError(f"bad value {item!r} in config.checkpoints; expected "
                                   f"'pvr=path', e.g. 'vc1_vitb=/data/vc1_vitb.pth'")
    if name not in config.pvrs:
      raise config_lib.ConfigError(f"config.checkpoints names {name!r}, which is not in "
                                   f"config.pvrs {tuple(config.pvrs)}")
    out[name] = path
  return out


def bc_protocol_of(config) -> bc_protocol.Protocol:
  return bc_protocol.Protocol(
      epochs=config.epochs, eval_every=config.eval_every, val_episodes=config.val_episodes,
      test_episodes=config.test_episodes, horizon=config.horizon, history=config.history,
      use_proprio=config.use_proprio, batch_size=config.batch_size, lr=config.lr,
      hidden=tuple(config.hidden), eval_envs=config.eval_envs, num_workers=config.num_workers)


def _announce(config) -> None:
  if config.protocol != "full":
    print(f"NOTE: the {config.protocol!r} variant reduces the CortexBench protocol to fit this "
          f"machine: {config.num_demos} demos/task, {config.epochs} epochs (validation every "
          f"{config.eval_every} on {config.val_episodes} episodes), {config.test_episodes} test "
          f"episodes, horizon {config.horizon}, {len(config.seeds)} seed(s), render "
          f"{config.render_size}px -> encoder {config.img_size or 'default'}px. Its numbers "
          f"are not comparable with the paper's; run configs/cortexbench.py for the protocol.")


@jobs.register("cortexbench", schema=cortexbench_config.get_config, validate=validate)
def run(config) -> str:
  t0 = time.time()
  _announce(config)
  store = store_lib.ResultStore(os.path.join(config.workdir, "results.jsonl"))
  data_dir = config.data_dir or os.path.join(config.workdir, "data")
  chash = config_hash(config)
  protocol = bc_protocol_of(config)
  render = mw.RenderConfig(size=config.render_size, camera=config.camera)
  suite = config.suite
  cells = {(task, pvr, seed): store_lib.Cell(
      benchmark=cortexbench.BENCHMARK, task=cortexbench.task_key(suite, task), pvr=pvr,
      adaptation=adaptation_lib.cell_adaptation(config.adaptation, pvr),
      seed=int(seed)) for task in config.tasks for pvr in config.pvrs for seed in config.seeds}
  pending = set(store.pending(list(cells.values()), chash))
  print(f"cortexbench: {len(cells)} cells ({len(cells) - len(pending)} already in {store.path})")
  embedders, evaluators = {}, {}
  try:
    for task in config.tasks:
      todo = [k for k in cells if k[0] == task and cells[k] in pending]
      if todo:
        _run_task(config, store, chash, protocol, render, data_dir, task, todo, cells,
                  embedders, evaluators)
  finally:
    for evaluator in evaluators.values():
      evaluator.close()
  rows = store.to_rows(benchmark=cortexbench.BENCHMARK, config_hash=chash, latest_only=True)
  paths = report_lib.write_report(rows, os.path.join(config.workdir, "report"), by="task")
  text = paths["markdown"].read_text(encoding="utf-8") + "\n\n" + paths["tasks"].read_text(
      encoding="utf-8")
  print(text)
  print(f"report: {', '.join(str(p) for p in paths.values())}  ({time.time() - t0:.0f} s)")
  _announce(config)
  return text


def embedder_of(config, pvr, embedders):
  if pvr not in embedders:  # Loaded once, shared by every task.
    embedders[pvr] = embedder_lib.make(pvr, state_dim=mw.STATE_DIM,
                                       img_size=config.img_size or None,
                                       checkpoint=checkpoint_paths(config).get(pvr))
  return embedders[pvr]


def adapted_embedder(config, pvr, task, demos, data_dir, embedders):
  """The frozen embedder of `pvr` for `task`: as loaded, or after an MAE adaptation on the
  task's demo frames (config.adaptation)."""
  adaptation = adaptation_lib.cell_adaptation(config.adaptation, pvr)
  if adaptation not in adaptation_lib.MAE_ADAPTATIONS:
    return embedder_of(config, pvr, embedders)
  img_size = config.img_size or zoo.entry(pvr).preprocess.size
  cfg = adaptation_lib.mae_config(config.adapt, adaptation, pvr, img_size,
                                  checkpoint_paths(config).get(pvr))
  path = adaptation_lib.mae_adapted(data_dir, task, demos.frames, demos.sha256, cfg)
  return embedder_lib.make(pvr, state_dim=mw.STATE_DIM, img_size=img_size, checkpoint=path)


def _evaluator(config, protocol, task, sim_render, evaluators):
  """The evaluator for this kind of observation, moved to `task` (compiled rollouts are kept
  across tasks)."""
  make_sim = mw.make_sim(task, sim_render, config.horizon)
  if sim_render in evaluators:
    evaluators[sim_render].switch(make_sim)
  else:
    # Without pixels a step is under 1 ms of physics (STACK.md: 1.4-2.2k steps/s): worker
    # processes would only add IPC.
    p = protocol if sim_render else dataclasses.replace(protocol, num_workers=0)
    evaluators[sim_render] = bc_protocol.Evaluator(make_sim, p)
  return evaluators[sim_render]


def _run_task(config, store, chash, protocol, render, data_dir, task, todo, cells, embedders,
              evaluators):
  """Every pending cell of one task."""
  demos = demos_lib.load_or_generate(data_dir, demos_lib.DemoConfig(
      task=task, num_demos=config.num_demos, render=render))
  print(f"{task}: {demos.num_episodes} demos ({len(demos.actions)} steps, expert success "
        f"{100 * demos.meta['expert_success_rate']:.0f}% over {demos.meta['attempts']} episodes)")
  switched = set()
  for pvr in dict.fromkeys(k[1] for k in todo):
    run_seed, sim_render, fingerprint = _cell_runner(config, protocol, render, data_dir, task,
                                                     pvr, demos, embedders)
    if sim_render not in switched:
      _evaluator(config, protocol, task, sim_render, evaluators)
      switched.add(sim_render)
    for seed in [k[2] for k in todo if k[1] == pvr]:
      print(f"{task} / {pvr} / seed {seed}")
      metrics = run_seed(evaluators[sim_render], int(seed))
      store.append(cells[(task, pvr, seed)], chash, metrics,
                   extra={"protocol": config.protocol, "render": render.to_dict(),
                          "embedder": fingerprint})
      print(f"  -> test success {metrics['score']:.1f}% (best val epoch "
            f"{metrics['best_epoch']}, {metrics['seconds']:.0f} s)")


def _cell_runner(config, protocol, render, data_dir, task, pvr, demos, embedders):
  """(run(evaluator, seed) -> metrics, the observation kind it renders, the PVR's fingerprint)
  for one (task, PVR): BC on frozen cached embeddings, or BC fine-tuning the encoder."""
  if adaptation_lib.cell_adaptation(config.adaptation, pvr) == "finetune":
    encoder = zoo.load(pvr, checkpoint_paths(config).get(pvr), img_size=config.img_size or None)
    run = lambda evaluator, seed: finetune.run_cell(
        protocol, evaluator, encoder, pvr, demos, seed, config.adapt.encoder_lr)
    return run, render, finetune.embedder_of(encoder, pvr, encoder.params).fingerprint
  emb_fn = adapted_embedder(config, pvr, task, demos, data_dir, embedders)
  emb = embeddings.load_or_compute(data_dir, task, emb_fn, demos, config.embed_batch)
  run = lambda evaluator, seed: bc_protocol.run_cell(protocol, evaluator, emb_fn, demos, emb,
                                                     seed)
  return run, None if emb_fn.obs_key == "state" else render, emb_fn.fingerprint
