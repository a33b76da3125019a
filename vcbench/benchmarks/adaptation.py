"""How a PVR is adapted before the policy sees it (VC-1 paper §6), as one config key.

  frozen       the PVR as it is (CortexBench's protocol).
  mae          MAE adaptation: MAE continues from the PVR's weights on the task's demo frames
               (a fresh decoder: VC-1 ships none), then the adapted encoder is frozen for BC.
  mae_scratch  the in-domain baseline: the same architecture MAE-trained from scratch on the
               same frames with the same budget, then frozen.
  finetune     end-to-end fine-tuning in the BC loop (encoder lr 1e-5, policy lr 1e-3, as the
               paper's hardware runs; `algos/finetune.py`).

The adapted encoder is cached per (task, PVR, adaptation settings, demo file) under
<data_dir>/adapted/, and an interrupted adaptation resumes from its MAE checkpoint. The result
store's `adaptation` column records which one produced a cell; the state oracle has no image
encoder and is always "frozen".
"""
from __future__ import annotations

import os
from typing import Optional

import ml_collections
import numpy as np

from vcbench import config as config_lib
from vcbench.algos import mae
from vcbench.data import frames
from vcbench.models import zoo
from vcbench.models.vit import ViT
from vcbench.provenance import config_hash

ADAPTATIONS = ("frozen", "mae", "mae_scratch", "finetune")
MAE_ADAPTATIONS = ("mae", "mae_scratch")


def default_config() -> ml_collections.ConfigDict:
  """The `adapt` block of a benchmark config: budgets of the MAE and fine-tuning paths."""
  c = ml_collections.ConfigDict()
  c.mae_steps = 500
  c.mae_batch = 64
  c.mae_base_lr = 1.5e-4        # MAE's; lr = base x batch / 256.
  c.mae_warmup = 50
  c.decoder_width = 512
  c.decoder_depth = 8
  c.decoder_heads = 16
  c.encoder_lr = 1e-5           # finetune: the encoder's Adam lr (the policy keeps config.lr).
  return c


def cell_adaptation(adaptation: str, pvr: str) -> str:
  """The store's adaptation for a cell: the state oracle has nothing to adapt."""
  return "frozen" if pvr not in zoo.names() else adaptation


def validate(config) -> None:
  """config.adaptation is known, and MAE adaptations name ViT PVRs only."""
  config_lib.require_choice(config, "adaptation", ADAPTATIONS)
  config_lib.check_keys(config.adapt, default_config(), "config.adapt")
  if config.adaptation not in MAE_ADAPTATIONS:
    return
  for pvr in config.pvrs:
    if pvr in zoo.names() and not isinstance(
        zoo.entry(pvr).build(img_size=224, dtype=np.float32), ViT):
      raise config_lib.ConfigError(
          f"config.adaptation={config.adaptation!r} trains an MAE, which needs a ViT; "
          f"config.pvrs has {pvr!r} (use adaptation 'finetune' or 'frozen' for it)")


def mae_config(adapt, adaptation: str, pvr: str, img_size: int, checkpoint: Optional[str],
               seed: int = 0) -> ml_collections.ConfigDict:
  """The algos.mae config of one adaptation run."""
  if adaptation not in MAE_ADAPTATIONS:
    raise ValueError(f"{adaptation!r} is not an MAE adaptation ({MAE_ADAPTATIONS})")
  c = mae.default_config()
  c.encoder = pvr
  c.init = "zoo" if adaptation == "mae" else "mae"
  c.checkpoint = (checkpoint or "") if adaptation == "mae" else ""
  c.img_size = img_size
  c.batch_size = adapt.mae_batch
  c.base_lr = adapt.mae_base_lr
  c.warmup_steps = min(adapt.mae_warmup, adapt.mae_steps)
  c.total_steps = adapt.mae_steps
  c.decoder_width, c.decoder_depth = adapt.decoder_width, adapt.decoder_depth
  c.decoder_heads = adapt.decoder_heads
  c.chunk = min(10, adapt.mae_steps)
  c.checkpoint_every = max(100, c.chunk)
  c.log_every = 100
  c.seed = seed
  return c


def mae_adapted(data_dir: str, task: str, demo_frames: np.ndarray, demo_sha: str, config,
                log=print, tensorboard: bool = False) -> str:
  """The encoder checkpoint of an MAE adaptation on `demo_frames` (trained on first use; with
  `tensorboard`, its loss curve in TensorBoard under the adaptation's directory, `tb`)."""
  cfg = config
  workdir = os.path.join(data_dir, "adapted", task, f"{cfg.encoder}-{cfg.init}-" + config_hash(
      {"mae": cfg.to_dict(), "demos": demo_sha})[:16])
  path = os.path.join(workdir, "encoder.npz")
  if os.path.exists(path):
    return path
  log(f"{task}: MAE {'adaptation of' if cfg.init == 'zoo' else 'from scratch for'} "
      f"{cfg.encoder} on {len(demo_frames)} demo frames, {cfg.total_steps} steps")
  ds = frames.dataset([demo_frames], [1.0], cfg.batch_size, cfg.seed)
  result = mae.train(cfg, ds, workdir, log=log, tensorboard=tensorboard)
  log(f"  MAE loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f} "
      f"({result.seconds:.0f} s, {result.images_per_second:.1f} img/s)")
  return result.encoder_path
