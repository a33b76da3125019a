"""The MAE pre-training job (configs/mae.py): frames -> grain pipeline -> MAE -> encoder.npz.

Frame shards are generated once under config.data.dir and reused (a re-run skips shards that
exist); training resumes from <workdir>/ckpt after a kill, to the same loss curve.
"""
from __future__ import annotations

import json
import os
import shutil
import time

from configs import mae as mae_config
from launch import jobs
from vcbench import config as config_lib
from vcbench.algos import mae
from vcbench.data import frames


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
  for key in ("size", "metaworld_episodes", "metaworld_stride"):
    config_lib.require(config, f"data.{key}", lambda v: isinstance(v, int) and v > 0,
                       "a positive int")
  config_lib.require(config, "data.nav_frames", lambda v: isinstance(v, int) and v >= 0,
                     "an int >= 0")
  sources = 1 + (d.nav_frames > 0) + len(_folders(d.folders))
  config_lib.require(config, "data.weights", lambda v: len(v) == sources and min(v) >= 0,
                     f"{sources} non-negative weights (MetaWorld, nav if nav_frames > 0, "
                     "then one per folder)")


def sources(config) -> list:
  """The frame sources of config.data, generating missing shards first."""
  d = config.data
  t0 = time.time()
  out = [frames.ShardSource(frames.metaworld_frames(
      d.dir, frames.metaworld_tasks(d.metaworld_tasks), d.metaworld_episodes, size=d.size,
      stride=d.metaworld_stride))]
  if d.nav_frames:
    out.append(frames.ShardSource(frames.nav_frames(d.dir, d.nav_frames, size=d.size)))
  out += [frames.FolderSource(f, d.size) for f in _folders(d.folders)]
  print(f"mae: frames {' + '.join(str(len(s)) for s in out)} at {d.size}px "
        f"({time.time() - t0:.0f} s)")
  return out


@jobs.register("mae", schema=mae_config.get_config, validate=validate)
def run(config) -> mae.Result:
  t0 = time.time()
  ds = frames.dataset(sources(config), list(config.data.weights), config.mae.batch_size,
                      config.mae.seed)
  result = mae.train(config.mae, ds, config.workdir)
  summary = {"encoder": config.mae.encoder, "steps": len(result.losses),
             "first_loss": result.losses[0], "last_loss": result.losses[-1],
             "train_seconds": result.seconds, "images_per_second": result.images_per_second,
             "job_seconds": time.time() - t0, "encoder_path": result.encoder_path}
  with open(os.path.join(config.workdir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)
  if config.export_to:
    os.makedirs(os.path.dirname(os.path.abspath(config.export_to)), exist_ok=True)
    shutil.copyfile(result.encoder_path, config.export_to)
  print(f"mae: {summary['steps']} steps, loss {summary['first_loss']:.4f} -> "
        f"{summary['last_loss']:.4f}, {summary['images_per_second']:.1f} img/s; encoder: "
        f"{result.encoder_path}" + (f" (copied to {config.export_to})" if config.export_to
                                    else ""))
  return result
