"""Navigation's inputs for the frozen-PVR agent, and their caches: the episodes of each split
and one float16 vector per view of every node, {"views": [A, V, H, C], "num_nodes": [A]}.

vcbench-nav apartments: each node's 12 level views rendered (`viewpoints.panoramas`) and
encoded by the frozen PVR, its last-layer tokens mean-pooled (`split_features`). R2R's scans:
the user's per-view features (`r2r_features`), one file per PVR.

Caches (under the job's data root, as the other G-VUE tasks'): the episodes as one pickle per
(source, sizes, seed) and each PVR's features per split, keyed by the split's apartments
(`episodes_digest`), so val_seen, whose paths run in train's apartments, reuses train's.
"""
from __future__ import annotations

import hashlib
import pickle
from typing import Callable

import jax.numpy as jnp
import numpy as np

from vcbench import files
from vcbench.data.gvue import features as features_lib
from vcbench.data.gvue import nav_views, r2r, vln
from vcbench.envs.nav import render as rd
from vcbench.envs.nav import scenes, textures
from vcbench.envs.nav import viewpoints as vp
from vcbench.provenance import config_hash

MAX_DEPTH = 10.0            # metres, as the G-VUE nav generators' camera.
SPLITS = ("train", "val_seen", "val_unseen")
SOURCES = ("generated", "r2r")


def episodes_digest(episodes: vln.Episodes) -> str:
  """A hash of what a split's features depend on (its apartments and their graphs), to key
  their cache."""
  h = hashlib.sha256(repr((episodes.scans, episodes.seeds, episodes.grid_size)).encode())
  for g in episodes.graphs:
    h.update(np.ascontiguousarray(g.pos).tobytes())
    h.update(np.ascontiguousarray(g.adj).tobytes())
  return h.hexdigest()[:16]


def pooled_tokens(apply: Callable, images: np.ndarray, batch_size: int = 64) -> np.ndarray:
  """uint8 [N, h, w, 3] -> float16 [N, C]: the last layer's tokens averaged (one compiled batch
  shape: the last batch is padded by repeats)."""
  out = []
  for idx, keep in features_lib.padded_batches(len(images), batch_size):
    tokens = apply(jnp.asarray(images[idx]))["tokens"].astype(jnp.float32).mean(1)
    out.append(np.asarray(tokens[:keep]).astype(np.float16))
  return np.concatenate(out)


def _stack_views(per_apartment: list[np.ndarray]) -> dict[str, np.ndarray]:
  v = max(len(x) for x in per_apartment)
  pad = lambda x: np.pad(x, [(0, v - len(x))] + [(0, 0)] * (x.ndim - 1))
  return {"views": np.stack([pad(x) for x in per_apartment]),
          "num_nodes": np.array([len(x) for x in per_apartment], np.int32)}


def split_features(episodes: vln.Episodes, apply: Callable, image_size: int, headings: int = 12,
                   batch_size: int = 64) -> dict[str, np.ndarray]:
  """Each apartment's panoramas rendered at `image_size` px and encoded by `apply` (the frozen
  PVR, e.g. `data.gvue.features.jitted_encoder(encoder)`). vcbench-nav splits only: R2R's
  scans come with the user's features (`r2r_features`)."""
  camera = rd.Camera(height=image_size, width=image_size, max_depth=MAX_DEPTH)
  atlas = textures.atlas(64 if image_size <= 128 else 128)   # as nav_views' texel density.
  out = []
  for seed, graph in zip(episodes.seeds, episodes.graphs):
    pano = vp.panoramas(scenes.generate(seed, episodes.grid_size, nav_views.OBJECTS), atlas, graph, camera, headings)
    out.append(pooled_tokens(apply, pano.reshape(-1, *pano.shape[2:]), batch_size).reshape(
        len(graph), headings, -1))
  return _stack_views(out)


def r2r_features(view_features: r2r.ViewFeatures, episodes: vln.Episodes) -> dict:
  """R2R's user-provided view features, their level row (the 12 views the agent sees)."""
  return _stack_views([view_features.graph_features(s, g)[:, r2r.LEVEL_ROW:r2r.LEVEL_ROW + 12]
                       .astype(np.float16) for s, g in zip(episodes.scans, episodes.graphs)])


# ---------------------------------------------------------------------------------------------
# Caches.

def make_splits(config) -> dict[str, vln.Episodes]:
  """The three splits of `config` (`benchmarks.gvue_navigation.default_config`): generated on
  vcbench-nav, or read from R2R's files (config.r2r.data_dir, config.r2r.connectivity_dir)."""
  if config.source == "r2r":
    graphs: dict = {}
    out = {s: r2r.load_split(config.r2r.data_dir, s, config.r2r.connectivity_dir, graphs)
           for s in SPLITS}
    return out
  return {s: vln.make_split(s, config.apartments[s], config.episodes[s], config.split_seed,
                           config.grid_size) for s in SPLITS}


def load_or_make_splits(root: str, config) -> dict[str, vln.Episodes]:
  """`make_splits`, cached at <root>/gvue_data/navigation/<source>-<key>.pkl."""
  check_source(config.source)
  args = {"source": config.source, "generator": vln.GENERATOR_VERSION}
  if config.source == "r2r":
    args["r2r"] = {k: str(v) for k, v in config.r2r.items() if k != "features"}
  else:
    args.update(apartments=config.apartments.to_dict(), episodes=config.episodes.to_dict(),
                seed=config.split_seed, grid_size=config.grid_size)
  path = f"{root}/gvue_data/navigation/{config.source}-{config_hash(args)}.pkl"
  if files.as_path(path).exists():
    try:
      with open(path, "rb") as f:
        return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as e:
      files.rebuild_or_refuse(f"{path}: unreadable ({e}).", "Remaking the splits.")
  splits = make_splits(config)
  files.atomic_write(path, lambda f: pickle.dump(splits, f))
  return splits


def load_or_compute_features(root: str, config, pvr: str, splits: dict[str, vln.Episodes],
                             encoder_of: Callable[[], Callable]) -> dict[str, dict]:
  """Each split's view features for `pvr`, cached per set of apartments. encoder_of() returns
  the jitted encoder (`features.jitted_encoder`), called only when something is computed."""
  apply = None
  out = {}
  for name, episodes in splits.items():
    fingerprint = {"pvr": pvr, "source": config.source, "apartments": episodes_digest(episodes),
                   "size": config.image_size, "headings": config.headings}
    if config.source == "r2r":
      fingerprint["file"] = feature_file(config, pvr)
    key = config_hash(fingerprint)
    base = f"{root}/gvue_features/navigation/{pvr}-{key}"
    if files.exists(base):
      try:
        out[name] = files.load(base, key)[0]
        continue
      except files.CorruptFileError as e:
        files.rebuild_or_refuse(str(e), "Recomputing.")
        files.remove(base)
    if config.source == "r2r":
      out[name] = r2r_features(r2r.ViewFeatures(feature_file(config, pvr)), episodes)
    else:
      apply = apply or encoder_of()
      out[name] = split_features(episodes, apply, config.image_size, config.headings)
    files.save(base, out[name], {"pvr": pvr, "task": "navigation", "split": name}, key,
               compress=False)
  return out


def feature_file(config, pvr: str) -> str:
  """R2R's view features of `pvr`: config.r2r.features with "{pvr}" replaced."""
  return str(config.r2r.features).replace("{pvr}", pvr)


def check_source(source: str) -> None:
  if source not in SOURCES:
    raise ValueError(f"navigation: source {source!r} unknown; one of {list(SOURCES)}.")
