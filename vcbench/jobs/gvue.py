"""The G-VUE job: splits -> frozen PVR and text features -> task decoders -> metrics -> store.

For each task: its train and test splits are made (or read from the user's files) once and
cached; for each PVR its features are computed once per split and cached; for each seed a
decoder is trained on the train features and scored on the test split. One store record per
(task, PVR, seed) holds the task's metrics (keyed as `benchmarks.gvue.TASKS` declares them) and
its task score; the report is a table like the paper's Table 3 with the summary score over the
tasks run. Manipulation's "split" is the oracle's (or CLIPort's) demos and its test is
closed-loop episodes with the PVR in the loop (`benchmarks/gvue_manipulation.py`); navigation's
are R2R-style episodes on viewpoint graphs, its features one vector per panorama view
(`data/gvue/vln_features.py`) and its test the agent's greedy walks in unseen apartments
(`benchmarks/gvue_navigation.py`), with its own image size and instruction length
(`config.navigation`).
configs/gvue.py has the variants and launch commands.
"""
from __future__ import annotations

import time

import jax
import ml_collections
import numpy as np

from vcbench import config as config_lib
from vcbench import files
from vcbench.algos import decoder as decoder_lib
from vcbench.algos import runner
from vcbench.benchmarks import gvue
from vcbench.benchmarks import gvue_heads as heads
from vcbench.benchmarks import gvue_manipulation as manipulation
from vcbench.benchmarks import gvue_navigation as navigation
from vcbench.data.gvue import features as features_lib
from vcbench.data.gvue import sources
from vcbench.data.gvue import split as split_lib
from vcbench.data.gvue import tabletop_demos
from vcbench.data.gvue import vln_features
from vcbench.envs.mujoco import tabletop_tasks
from vcbench.jobs import grid as grid_lib
from vcbench.models import text as text_lib
from vcbench.models import zoo
from vcbench.reports import gvue as report_lib
from vcbench.reports import plots
from vcbench.viz import gvue_gallery as gallery
from vcbench.store import Cell

NON_ACT = tuple(t for t in gvue.TASKS.names() if gvue.TASKS.get(t).category != "act")
ACT = ("navigation", "manipulation")
RUNNABLE = NON_ACT + ACT
NOT_HASHED = ("workdir", "data_dir", "tasks", "pvrs", "seeds", "feature_batch")
# Config parts only one Act task reads, and only the others read (`task_hash`): the Act
# tasks' sections came after the other tasks' results were stored, which keep their hashes.
ACT_SECTIONS = {"manipulation": ("manipulation", "data.sources.manipulation"),
                "navigation": ("navigation",)}
PERCEPTION_ONLY = ("decoder", "optim", "data.num_train", "data.num_test", "data.resolution")
NAVIGATION_READS = ("job", "protocol", "navigation", "text_encoder", "checkpoints")
ADDED_LATER = {"checkpoints": ""}
GRIDS = ("tasks", "pvrs", "seeds")
DIRS = ("workdir", "data_dir")


def default_config() -> ml_collections.ConfigDict:
  """G-VUE's protocol (the paper's Section 5 and Table 5) on vcbench's generated data."""
  c = ml_collections.ConfigDict()
  c.job = "gvue"
  c.protocol = "full"
  c.workdir = "runs/gvue"
  c.data_dir = ""                 # Splits and feature caches; "" = <workdir>/data.
  c.tasks = RUNNABLE
  c.pvrs = ("in1k_mobilenetv2", "vcbench_vit_ti", "random_vit_ti")
  c.checkpoints = ""              # "pvr=path[,pvr=path]": checkpoints other than the zoo's own.
  c.seeds = (0,)
  c.image_size = 224              # G-VUE resizes every input to 224.
  c.text_encoder = "hashed_words"
  c.text_max_len = 40
  c.feature_batch = 32
  c.data = ml_collections.ConfigDict({
      "sources": dict(sources.DEFAULT_SOURCE), "num_train": 2000, "num_test": 500,
      "seed": 0, "resolution": 32})
  c.real_paths = ml_collections.ConfigDict()   # real_paths.<task>.<arg>: a loader's files.
  s = heads.DecoderSize()
  c.decoder = ml_collections.ConfigDict({"width": s.width, "depth": s.depth,
                                         "num_heads": s.num_heads, "mlp_dim": s.mlp_dim,
                                         "dropout": s.dropout})
  c.optim = decoder_lib.default_config()
  c.optim.epochs = 0              # 0 = the task's Table 5 epochs; likewise batch_size.
  c.optim.batch_size = 0
  c.manipulation = manipulation_config()
  c.navigation = navigation_config("full")
  return c


def navigation_config(budget: str) -> ml_collections.ConfigDict:
  """The navigation task's section (`benchmarks/gvue_navigation.default_config`): its own image
  size, instruction length and agent; budget "full" (R2R's scale), "quick" or "tiny"."""
  return navigation.default_config(budget)


def manipulation_config() -> ml_collections.ConfigDict:
  """The manipulation task (`benchmarks/gvue_manipulation.py`) at CLIPort's scale: 1000 demos
  per task, 100 test episodes per task, 36 rotations."""
  m = ml_collections.ConfigDict()
  m.tasks = tuple(tabletop_tasks.TASKS.names())
  m.demos = 1000                  # Oracle episodes per task (seen split); only successes kept.
  m.episodes = 100                # Unseen test episodes per task.
  m.seen_episodes = 0             # Seen test episodes per task (reported, not scored).
  m.n_rotations = 36
  m.crop = 9                      # Transport kernel, in grid cells (stride 4).
  m.width = 64
  m.transport_dim = 16
  m.optim = decoder_lib.default_config()
  m.optim.update(lr=1e-3, epochs=20, batch_size=8)
  return m


def validate(config) -> None:
  config_lib.require_choice(config, "tasks", RUNNABLE)
  config_lib.require_choice(config, "pvrs", zoo.names())
  for pvr, path in checkpoints(config).items():
    zoo.check_inputs(pvr, path, config.image_size)
  config_lib.require_ints(config, ("image_size", "text_max_len", "feature_batch"))
  config_lib.require_ints(config, ("data.num_train", "data.num_test"))
  config_lib.require(config, "image_size", lambda v: v % 32 == 0,
                     "a multiple of 32 (the pyramid's coarsest stride)")
  for task, source in config.data.sources.items():
    if task not in RUNNABLE:
      raise config_lib.ConfigError(f"config.data.sources.{task}: not a G-VUE task with data; "
                                   f"known: {list(RUNNABLE)}")
    sources.SOURCES.get(source)
  text_lib.check_spec(config.text_encoder)
  if "manipulation" in config.tasks:
    m = "manipulation"
    config_lib.require_choice(config, f"{m}.tasks", tabletop_tasks.TASKS.names())
    config_lib.require_ints(config, tuple(f"{m}.{k}" for k in (
        "demos", "episodes", "n_rotations", "crop", "width", "transport_dim")))
    config_lib.require_ints(config, (f"{m}.seen_episodes",), minimum=0)
  if "navigation" in config.tasks:
    n = "navigation"
    config_lib.require_choice(config, f"{n}.source", vln_features.SOURCES)
    config_lib.require_ints(config, tuple(f"{n}.{k}" for k in (
        "image_size", "headings", "max_len", "max_steps", "eval_batch")))
    if config.navigation.source == "r2r":
      for k in ("data_dir", "connectivity_dir", "features"):
        if not config.navigation.r2r[k]:
          raise config_lib.ConfigError(f"config.{n}.r2r.{k}: required with source 'r2r' "
                                       "(gvue_navigation.default_config lists the files).")


def checkpoints(config) -> dict[str, str]:
  return config_lib.parse_mapping(config, "checkpoints", config.pvrs)


def _encoder(config, pvr: str, img_size: int) -> zoo.Encoder:
  return zoo.load(pvr, checkpoints(config).get(pvr), img_size=img_size)


def _cached_as(config, pvr: str) -> str:
  """The PVR's name in the feature caches: with a checkpoint of the user's, that checkpoint's
  tag too (features of two checkpoints never share a cache file)."""
  return zoo.checkpoint_tag(pvr, checkpoints(config).get(pvr))


def data_root(config) -> str:
  return config.data_dir or f"{config.workdir}/data"


def run(config) -> str:
  text_encoder, rows = None, []
  for task in config.tasks:
    grid = grid_lib.Grid("gvue", config.workdir, task_hash(config, task))
    todo = grid.todo(_units(config, task))
    if todo and task in (*split_lib.TEXT_TASKS, "navigation") and text_encoder is None:
      text_encoder = text_lib.load(config.text_encoder)
    if todo:
      run_task = {"manipulation": _run_manipulation, "navigation": _run_navigation}.get(
          task, _run_task)
      run_task(config, grid, task, todo, text_encoder)
    rows += grid.rows(benchmark="gvue", task=task)
  text = write_report(config, rows)
  print(text)
  return text


def _units(config, task: str) -> list[grid_lib.Unit]:
  return [grid_lib.Unit((task, p, s), (Cell(benchmark="gvue", task=task, pvr=p, seed=s),))
          for p in config.pvrs for s in config.seeds]


def plan(config) -> list[grid_lib.Slice]:
  """The sweep's pieces: one per (task, PVR), every seed in it (the PVR's feature cache of
  the task is its own; splits are shared through `data_dir`)."""
  return [grid_lib.Slice((task, pvr), {"tasks": (task,), "pvrs": (pvr,),
                                       "data_dir": data_root(config)},
                         tuple(u.cells[0] for u in _units(config, task) if u.key[1] == pvr),
                         task_hash(config, task))
          for task in config.tasks for pvr in config.pvrs]


def task_hash(config, task: str) -> str:
  """The hash a task's cells are stored under: the config less what the task never reads (the
  Act tasks' sections for the others, the label decoder's settings for manipulation, all but
  its own section and the text encoder for navigation)."""
  unread = tuple(k for t, keys in ACT_SECTIONS.items() if t != task for k in keys)
  if task == "navigation":
    unread = tuple(k for k in config.keys() if k not in NAVIGATION_READS)
  elif task in ACT:
    unread += PERCEPTION_ONLY
  return grid_lib.config_hash(config, NOT_HASHED + unread, ADDED_LATER)


def _run_task(config, grid, task: str, units, text_encoder) -> None:
  train, test = (_split(config, task, name) for name in ("train", "test"))
  for pvr, pvr_units in grid.groups(units, by=lambda u: u.key[1]).items():
    feats = {name: _features(config, task, pvr, name, split, text_encoder)
             for name, split in (("train", train), ("test", test))}
    for unit in grid.pending(pvr_units):
      start = time.perf_counter()
      values, predictions = fit_and_score(config, task, feats, train, test, seed=unit.key[2])
      _save_preview(config, task, pvr, unit.key[2], predictions)
      _record(grid, unit, values, start, train_examples=len(train), test_examples=len(test))


def _run_manipulation(config, grid, task: str, units, text_encoder) -> None:
  """Demos (cached) -> each PVR's features of them (cached) -> per seed a decoder trained and
  run closed loop with the PVR on unseen episodes."""
  demos = _split(config, task, "train")
  for pvr, pvr_units in grid.groups(units, by=lambda u: u.key[1]).items():
    feats = _features(config, task, pvr, "train", demos, text_encoder)
    frame = tabletop_demos.Frame.make(config.image_size, feats["p0"].shape[1])
    encoder = _encoder(config, pvr, config.image_size)
    for unit in grid.pending(pvr_units):
      start = time.perf_counter()
      values = manipulation.fit_and_score(config.manipulation, frame, feats,
                                          tabletop_demos.from_split(demos), encoder,
                                          text_encoder, seed=unit.key[2])
      _record(grid, unit, values, start, train_examples=len(demos),
              test_episodes=config.manipulation.episodes * len(config.manipulation.tasks))


def _run_navigation(config, grid, task: str, units, text_encoder) -> None:
  """Episodes (cached) -> each PVR's panorama features (cached) -> per seed an agent trained
  on train and run greedily on val_unseen (scored) and val_seen."""
  n, root = config.navigation, data_root(config)
  splits = vln_features.load_or_make_splits(root, n)
  for pvr, pvr_units in grid.groups(units, by=lambda u: u.key[1]).items():
    feats = vln_features.load_or_compute_features(
        root, n, _cached_as(config, pvr), splits,
        lambda: features_lib.jitted_encoder(_encoder(config, pvr, n.image_size)))
    for unit in grid.pending(pvr_units):
      start = time.perf_counter()
      values = navigation.fit_and_score(n, feats, splits, text_encoder, seed=unit.key[2])
      _record(grid, unit, values, start, train_paths=len(splits["train"]),
              test_episodes=len(splits["val_unseen"]))


def _record(grid, unit, values: dict, start: float, **sizes) -> None:
  task = unit.key[0]
  record = {**values, "task_score": gvue.task_score(task, gvue.declared(task, values)),
            **sizes, "seconds": time.perf_counter() - start}
  grid.record(unit.cells[0], record)
  print(f"gvue {task} {unit.key[1]} seed {unit.key[2]}: "
        + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))


def write_report(config, rows) -> str:
  """<workdir>/gvue.md (the table), gvue_radar.png and gallery/<task>.png; returns the table."""
  text = report_lib.markdown(rows)
  plots.write_text(f"{config.workdir}/gvue.md", text)
  if rows:
    plots.save_figure(report_lib.radar_figure(rows), f"{config.workdir}/gvue_radar.png")
  for task in config.tasks:
    previews = {}
    for pvr in config.pvrs:
      base = preview_path(config.workdir, task, pvr, config.seeds[0])
      if files.exists(base):
        previews[pvr] = files.load(base, "preview")[0]["predictions"]
    if previews:
      fig = gallery.figure(task, _split(config, task, "test"), previews)
      plots.save_figure(fig, f"{config.workdir}/gallery/{task}.png")
  return text


def _split(config, task: str, name: str):
  num = config.data.num_train if name == "train" else config.data.num_test
  if task == "manipulation":
    num = config.manipulation.demos
  return sources.load_or_make(
      data_root(config), task, config.data.sources.get(task, sources.DEFAULT_SOURCE[task]),
      name, num, config.data.seed, config.image_size, **_options(config, task))


def _options(config, task: str) -> dict:
  if task == "reconstruction_3d":
    return {"resolution": config.data.resolution}
  if task == "manipulation":
    m = config.manipulation
    return {"tasks": tuple(m.tasks), "n_rotations": m.n_rotations, **_real_paths(config, task)}
  return _real_paths(config, task)


def _real_paths(config, task: str) -> dict:
  paths = config.real_paths.to_dict() if config.real_paths else {}
  return {"real_paths": paths} if paths.get(task) else {}


def _features(config, task, pvr, name, split, text_encoder) -> dict:
  inputs = MANIPULATION_INPUTS if task == "manipulation" else heads.HEADS[task].inputs
  encoder = _encoder(config, pvr, config.image_size)
  fingerprint = {"pvr": _cached_as(config, pvr), "size": config.image_size, "inputs": inputs,
                 "text": config.text_encoder, "max_len": config.text_max_len}

  def compute():
    apply = features_lib.jitted_encoder(encoder)
    if task == "abstract_reasoning":
      out = {"map": features_lib.problem_features(apply, split.images, config.feature_batch)}
    else:
      out = features_lib.image_features(apply, split.images,
                                        [k for k in inputs if k != "text"],
                                        config.feature_batch)
    if "text" in inputs:
      out.update(features_lib.text_features(text_encoder.encode, task, split,
                                            config.text_max_len))
    return out

  return features_lib.load_or_compute(data_root(config), task, _cached_as(config, pvr), name,
                                      split, fingerprint,
                                      compute)


MANIPULATION_INPUTS = (*manipulation.PYRAMID, "text")


def fit_and_score(config, task: str, feats: dict, train, test, seed: int):
  """Trains the task's decoder on `feats['train']` and scores it on `test`: (metrics, the test
  predictions)."""
  head, spec = heads.HEADS[task], gvue.TASKS.get(task)
  optim = ml_collections.ConfigDict(config.optim.to_dict())
  optim.epochs = optim.epochs or spec.epochs
  optim.batch_size = optim.batch_size or spec.batch_size
  model = head.model(heads.DecoderSize(**config.decoder.to_dict()), train)
  data = head.train_data(feats["train"], train)
  trainer = decoder_lib.make_train(optim, model, head.init_batch(data), head.loss, data)
  state, _ = runner.run(trainer, None, trainer.num_updates, key=jax.random.key(seed))
  return head.evaluate(model, state.variables(), feats["test"], test)


PREVIEW = 8   # Test examples whose predictions are kept for the gallery.


def preview_path(workdir: str, task: str, pvr: str, seed: int) -> str:
  return f"{workdir}/gallery/{task}-{pvr}-seed{seed}"


def _save_preview(config, task: str, pvr: str, seed: int, predictions) -> None:
  """The first test predictions, for `launch/gvue_gallery.py` (retrieval: the images' rows of
  the similarity matrix)."""
  files.save(preview_path(config.workdir, task, pvr, seed),
             {"predictions": np.asarray(predictions)[:PREVIEW]},
             {"task": task, "pvr": pvr, "seed": seed}, key="preview")
