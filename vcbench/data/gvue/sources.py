"""Where each G-VUE task's data comes from, and the on-disk cache of made splits.

A source is `make(task, split, num, seed, size, **options) -> Split`. The defaults run on any
machine (the datasets G-VUE uses are manual downloads):

  task                    default source   what it is
  depth_estimation        nav              vcbench-nav RGB + metric depth (`nav_tasks`)
  camera_pose             nav              per-apartment trajectories, 6-DoF camera poses
  reconstruction_3d       shapes3d         packaged meshes rendered from 24 views, voxelised
  image_text_retrieval    nav              templated captions of scene content
  phrase_grounding        nav              referring expressions -> instance boxes
  semantic_segmentation   nav              the renderer's semantic labels
  vqa                     easy_vqa         the easy-VQA dataset's images and questions;
                                           `nav` for scene-graph questions
  commonsense_reasoning   nav              VCR-format multiple choice built from scenes
  abstract_reasoning      bongard          Bongard problems from MetaWorld contact labels
  manipulation            tabletop         the oracle's demos on the MuJoCo tabletop (seen
                                           split; `num` episodes per task, not steps)

`real` reads the dataset G-VUE uses from the files a user has (`formats.LOADERS`; its paths come
from the config's `real_paths.<task>`). Made splits are cached under
`<root>/gvue_data/<task>/<source>-<split>-<key>` (key = hash of everything that made them), so
every PVR and seed reads the very same examples.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from vcbench import files
from vcbench.data.gvue import split as split_lib
from vcbench.errors import UserError
from vcbench.provenance import config_hash
from vcbench.registry import Registry

SOURCES = Registry("G-VUE data source")
DEFAULT_SOURCE = {
    "depth_estimation": "nav", "camera_pose": "nav", "reconstruction_3d": "shapes3d",
    "image_text_retrieval": "nav", "phrase_grounding": "nav", "semantic_segmentation": "nav",
    "vqa": "easy_vqa", "commonsense_reasoning": "nav", "abstract_reasoning": "bongard",
    "manipulation": "tabletop"}
# Part of every cache key: bump it when a generator's output changes, so that caches made by
# older code are not read as the new data.
GENERATORS_VERSION = 2


@SOURCES.register("nav")
def _nav(task, split, num, seed, size, **_):
  from vcbench.data.gvue import nav_tasks
  return nav_tasks.make_split(task, split, num, seed, size)


@SOURCES.register("easy_vqa")
def _easy_vqa(task, split, num, seed, size, **_):
  _only(task, "vqa", "easy_vqa")
  from vcbench.data.gvue import easy_vqa
  return easy_vqa.make_split(split, size, limit=num, seed=seed)


@SOURCES.register("shapes3d")
def _shapes3d(task, split, num, seed, size, resolution: int = 32, **_):
  _only(task, "reconstruction_3d", "shapes3d")
  from vcbench.data.gvue import shapes3d
  return shapes3d.make_split(split, num, seed, size, resolution=resolution)


@SOURCES.register("bongard")
def _bongard(task, split, num, seed, size, **_):
  _only(task, "abstract_reasoning", "bongard")
  from vcbench.data.gvue import bongard
  return bongard.make_split(split, num, seed, size)


@SOURCES.register("tabletop")
def _tabletop(task, split, num, seed, size, tasks=(), n_rotations=36, **_):
  _only(task, "manipulation", "tabletop")
  from vcbench.data.gvue import tabletop_demos as demos_lib
  frame = _demo_frame("the tabletop's oracle demos", split, size)
  demos = demos_lib.collect_demos(tasks, num, frame, n_rotations, split="seen", first_seed=seed)
  return demos_lib.as_split(demos, tasks, f"tabletop oracle, seen split, {num} episodes per "
                                          f"task from seed {seed}")


@SOURCES.register("real")
def _real(task, split, num, seed, size, real_paths: Any = None, **options):
  paths = dict(real_paths or {}).get(task)
  if not paths:
    raise UserError(f"G-VUE {task}: source 'real' needs config.real_paths.{task} (the dataset's "
                    f"files; see vcbench/data/gvue/formats.py).")
  if task == "manipulation":
    return _cliport(split, num, size, options.get("n_rotations", 36), **dict(paths))
  from vcbench.data.gvue import formats
  return formats.LOADERS.get(task)(**dict(paths), split=split, size=size, limit=num or None)


def _cliport(split: str, num: int, size: int, n_rotations: int, root: str = "",
             tasks: Any = None, mode: str = "train"):
  """CLIPort's recorded demos (`real_paths.manipulation.root`, optionally `.tasks`: CLIPort
  task names, and `.mode`) as the manipulation train split."""
  from vcbench.data.gvue import cliport
  from vcbench.data.gvue import tabletop_demos as demos_lib
  frame = _demo_frame("CLIPort's demos", split, size)
  tasks = list(tasks) if tasks else cliport.task_names(root, mode)
  demos = cliport.load_demos(root, frame, n_rotations, tasks, limit=num or None, mode=mode)
  return demos_lib.as_split(demos, tasks, f"CLIPort demos in {root} ({mode})")


def _demo_frame(what: str, split: str, size: int):
  """The manipulation demos' geometry; refuses any split but train (demos are the only data
  the task has: its test is closed-loop episodes)."""
  from vcbench.data.gvue import tabletop_demos as demos_lib
  if split != "train":
    raise UserError(f"G-VUE manipulation: {what} make a train split only, not {split!r}; its "
                    f"test is closed-loop episodes.")
  return demos_lib.Frame.make(size, size // 4)


def _only(task: str, expected: str, source: str) -> None:
  if task != expected:
    raise UserError(f"G-VUE data source {source!r} makes {expected} data, not {task}.")


def load_or_make(root: str, task: str, source: str, split: str, num: int, seed: int, size: int,
                 **options) -> split_lib.Split:
  """The split, from the cache when it was made before under the same arguments."""
  make: Callable = SOURCES.get(source)
  args = {"task": task, "source": source, "split": split, "num": num, "seed": seed,
          "size": size, "generators": GENERATORS_VERSION,
          **{k: options[k] for k in sorted(options)}}
  key = config_hash(args)
  base = f"{root}/gvue_data/{task}/{source}-{split}-{key}"
  if files.exists(base):
    try:
      arrays, record = files.load(base, key)
      return _from_arrays(task, arrays, record["meta"])
    except files.CorruptFileError as e:
      files.rebuild_or_refuse(str(e), "Remaking the split.")
      files.remove(base)
  made = split_lib.check(make(task, split, num, seed, size, **options))
  arrays = {"images": made.images, **{f"target.{k}": np.asarray(v)
                                      for k, v in made.targets.items()}}
  meta = {"texts": [list(t) for t in made.texts], "scene": list(made.scene),
          "meta": _jsonable(made.meta), "source": made.source}
  files.save(base, arrays, meta, key, compress=False)
  return made


def _from_arrays(task: str, arrays: dict, meta: dict) -> split_lib.Split:
  return split_lib.Split(
      task=task, images=arrays["images"],
      targets={k[len("target."):]: v for k, v in arrays.items() if k.startswith("target.")},
      texts=tuple(tuple(t) for t in meta["texts"]), scene=tuple(meta["scene"]),
      meta=meta["meta"], source=meta["source"])


# Per-example records too bulky for the cache's JSON (Bongard's 13 MuJoCo states per problem,
# kept by the generator so tests can re-check labels); a cached split goes without them.
UNCACHED_META = ("problems",)


def _jsonable(meta) -> dict:
  """Split metadata as JSON can hold it (tuples become lists; NumPy scalars become numbers)."""
  kept = {k: v for k, v in dict(meta).items() if k not in UNCACHED_META}
  return json.loads(json.dumps(kept, default=lambda o: o.tolist()
                               if hasattr(o, "tolist") else str(o)))
