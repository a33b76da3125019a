"""The MAE pre-training job: frames -> grain pipeline -> MAE -> encoder.npz (configs/mae.py has
the variants and the launch commands).

Frame shards are generated once under config.data.dir and reused (a re-run skips shards that
exist); training resumes from <workdir>/checkpoints after a kill, to the same loss curve. A
training job: it writes no result-store cells (the encoder it trains is scored by the
benchmark jobs as a PVR), but a summary.json next to the encoder.
"""
from __future__ import annotations

import json
import os
import shutil
import time

import ml_collections

from vcbench import config as config_lib
from vcbench import distributed
from vcbench import files
from vcbench.algos import mae
from vcbench.data import frames


DIRS = ("workdir", "data.dir")
MULTIPROCESS = True   # Each process reads its rows of every batch (launch.main --coordinator).
# A training job stores no cells, so no hash is taken of its config; listed for the day one is.
NOT_HASHED = ("workdir", "export_to", "tensorboard")


def default_config() -> ml_collections.ConfigDict:
  """facebookresearch/mae's ViT-B/16 pre-training on the frames of vcbench's simulators."""
  c = ml_collections.ConfigDict()
  c.job = "mae"
  c.variant = "full"
  c.workdir = "runs/mae_full"
  c.export_to = ""            # Also copy the trained encoder here (e.g. the zoo's weights).
  c.tensorboard = False       # The loss curve as TensorBoard event files in <workdir>/tb.
  d = c.data = ml_collections.ConfigDict()
  d.dir = "runs/frames"       # Frame shards, shared by runs (generated once, resumable);
                              # "" = <workdir>/frames.
  d.size = 128                # Frames are stored at this size; crops are resized to img_size.
  d.metaworld_tasks = "all"   # 'all' or a comma list of MetaWorld tasks.
  d.metaworld_episodes = 4    # Noisy-expert episodes per task (train-range seeds >= 50000).
  d.metaworld_stride = 2      # Keep every 2nd frame.
  d.nav_frames = 6000         # vcbench-nav renders at random poses in training apartments.
  d.folders = ""              # Comma list of image folders to mix in.
  d.weights = (0.75, 0.25)    # MetaWorld, nav, then one weight per folder.
  c.mae = m = mae.default_config()
  m.encoder = "random_vit_b"
  m.img_size = 224
  m.batch_size = 256
  m.warmup_steps = 2000
  m.total_steps = 50_000
  m.checkpoint_every = 1000
  return c


def _folders(spec: str) -> list[str]:
  return [f for f in spec.split(",") if f]


def validate(config) -> None:
  mae.validate(config.mae)
  d = config.data
  try:
    tasks = frames.metaworld_tasks(d.metaworld_tasks)
  except ValueError as e:
    raise config_lib.ConfigError(f"bad value in config.data.metaworld_tasks: {e}") from e
  if not tasks:
    raise config_lib.ConfigError("config.data.metaworld_tasks names no task; the MetaWorld "
                                 "frames are the mixture's first source")
  config_lib.require_ints(config, ("data.size", "data.metaworld_episodes",
                                   "data.metaworld_stride"))
  config_lib.require_ints(config, ("data.nav_frames",), minimum=0)
  sources = 1 + (d.nav_frames > 0) + len(_folders(d.folders))
  config_lib.require(config, "data.weights", lambda v: len(v) == sources and min(v) >= 0,
                     f"{sources} non-negative weights (MetaWorld, nav if nav_frames > 0, "
                     "then one per folder)")


def frames_dir(config) -> str:
  return config.data.dir or os.path.join(config.workdir, "frames")


def disk_estimate(config) -> dict:
  """At most the frame shards not on disk yet (raw uint8 `.npy`): every noisy MetaWorld episode
  run to its cap, plus the nav frames."""
  d, root = config.data, frames_dir(config)
  per_task = d.metaworld_episodes * -(-frames.METAWORLD_MAX_STEPS // d.metaworld_stride)
  count = per_task * sum(not os.path.exists(frames.metaworld_shard(root, t))
                         for t in frames.metaworld_tasks(d.metaworld_tasks))
  if d.nav_frames and not os.path.exists(frames.nav_shard(root)):
    count += d.nav_frames
  return {root: (count * d.size ** 2 * 3, f"{count} frames at {d.size} px")} if count else {}


def sources(config) -> list:
  """The frame sources of config.data, generating missing shards first."""
  d, root = config.data, frames_dir(config)
  t0 = time.time()
  out = [frames.ShardSource(frames.metaworld_frames(
      root, frames.metaworld_tasks(d.metaworld_tasks), d.metaworld_episodes, size=d.size,
      stride=d.metaworld_stride))]
  if d.nav_frames:
    out.append(frames.ShardSource(frames.nav_frames(root, d.nav_frames, size=d.size)))
  out += [frames.FolderSource(f, d.size) for f in _folders(d.folders)]
  print(f"mae: frames {' + '.join(str(len(s)) for s in out)} at {d.size}px "
        f"({time.time() - t0:.0f} s)")
  return out


def run(config) -> mae.Result:
  t0 = time.time()
  with distributed.main_first("mae frames") as mine:   # Generated once, by process 0.
    if mine:
      sources(config)
  ds = frames.dataset(sources(config), list(config.data.weights), config.mae.batch_size,
                      config.mae.seed, distributed.process_share(config.mae.batch_size,
                                                                 "config.mae.batch_size"))
  result = mae.train(config.mae, ds, config.workdir, tensorboard=config.tensorboard)
  if not distributed.is_main():
    return result
  summary = {"encoder": config.mae.encoder, "steps": len(result.losses),
             "first_loss": result.losses[0], "last_loss": result.losses[-1],
             "train_seconds": result.seconds, "images_per_second": result.images_per_second,
             "job_seconds": time.time() - t0, "encoder_path": result.encoder_path}
  text = json.dumps(summary, indent=1)
  files.atomic_write(os.path.join(config.workdir, "summary.json"),
                     lambda f: f.write(text.encode()))
  if config.export_to:
    os.makedirs(os.path.dirname(os.path.abspath(config.export_to)), exist_ok=True)
    shutil.copyfile(result.encoder_path, config.export_to)
  print(f"mae: {summary['steps']} steps, loss {summary['first_loss']:.4f} -> "
        f"{summary['last_loss']:.4f}, {summary['images_per_second']:.1f} img/s; encoder: "
        f"{result.encoder_path}" + (f" (copied to {config.export_to})" if config.export_to
                                    else ""))
  return result
