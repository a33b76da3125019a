"""Look at a trained MAE: a PNG of reconstructions and attention maps (VC-1 paper, Figure 8).

  python -m launch.mae_look --workdir=runs/mae_vcbench_vit_ti \\
      --config=configs/mae.py:vcbench_vit_ti --frames=PATH.npy[,PATH2.npy] --n=6 \\
      --out=mae_look.png --seed=0
  python -m launch.mae_look --encoder_only=vc1_vitb:vc1_vitb.pth --frames=PATH.npy --n=6 \\
      --out=vc1_attention.png

Restores the MAE's parameters from the latest checkpoint in <workdir>/ckpt (the config gives
the architecture; --workdir defaults to the config's), picks --n frames spread over the given
frame shards (.npy from `vcbench.data.frames`, or image folders), centre-resizes them with the
encoder's zoo preprocessing at the config's img_size, masks them with noise drawn from --seed
at the config's mask ratio, and writes one row per frame: original | masked | reconstruction |
reconstruction with the visible patches pasted back | last-block CLS attention. With
--encoder_only=ZOO_NAME[:CHECKPOINT] it draws only originals and attention maps, for any zoo
ViT at its own input size. Prints the PNG's path.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Sequence

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
from ml_collections import config_flags
import numpy as np

from vcbench.algos import mae
from vcbench.checkpoint import Checkpointer
from vcbench.data import frames
from vcbench.models import zoo
from vcbench.models.preprocess import Preprocess
from vcbench.reports import mae_look


def spread(n: int, lengths: Sequence[int]) -> list[np.ndarray]:
  """Per source, the indices of its share of `n` frames: shares as equal as the count allows
  (earlier sources take the remainder), each evenly spaced through its source (centres of
  equal stretches, so neither end is favoured)."""
  k = len(lengths)
  counts = [n // k + (i < n % k) for i in range(k)]
  return [((np.arange(c) + 0.5) * length / c).astype(int) for c, length in zip(counts, lengths)]


def sized(preprocess: Preprocess, img_size: int) -> Preprocess:
  """The entry's preprocessing at another input size, keeping its resize-to-crop ratio (as
  `zoo.load(img_size=...)` does)."""
  return dataclasses.replace(preprocess, size=img_size,
                             resize=round(preprocess.resize * img_size / preprocess.size))


def _source(path: str, preprocess: Preprocess):
  if os.path.isdir(path):  # Folder images come at the resize side; the crop happens below.
    return frames.FolderSource(path, preprocess.resize)
  return frames.ShardSource([path])


def load_images(paths: Sequence[str], n: int, preprocess: Preprocess):
  """(normalised images [n, S, S, 3], row labels): `n` frames spread over `paths`, each source
  preprocessed on its own (sources may store different sizes)."""
  if n < 1:
    raise ValueError(f"mae_look: --n must be >= 1, got {n}.")
  if not paths:
    raise ValueError("mae_look: --frames names no frame shard.")
  sources = [_source(p, preprocess) for p in paths]
  preprocess_fn = jax.jit(preprocess)   # one compile per shard size, not one per resize op
  chunks, labels = [], []
  for path, source, idx in zip(paths, sources, spread(n, [len(s) for s in sources])):
    if len(idx):
      chunks.append(preprocess_fn(np.stack([source[int(i)] for i in idx])))
      labels += [f"{pathlib.Path(path).stem}\n#{i}" for i in idx]
  return jnp.concatenate(chunks), labels


def restore_params(config, workdir: str) -> tuple[int, dict]:
  """(step, MAE params) of the latest checkpoint in <workdir>/ckpt."""
  directory = os.path.join(workdir, "ckpt")
  if not os.path.isdir(directory):
    raise FileNotFoundError(f"mae_look: {directory}: no MAE checkpoints (train with "
                            "`python -m launch.main --config configs/mae.py:VARIANT`).")
  # The restore target needs only shapes; init='zoo' would read the zoo checkpoint to get them.
  shapes = ml_collections.ConfigDict(config.to_dict())
  shapes.init = "mae"
  trainer = mae.Trainer(shapes)
  target = jax.eval_shape(lambda: trainer.init(jax.random.key(0)))
  # max_to_keep=None: this reader must never delete a checkpoint of a run still training.
  with Checkpointer(directory, max_to_keep=None) as ckpt:
    step = ckpt.latest_step()
    if step is None:
      raise FileNotFoundError(f"mae_look: {directory} holds no complete checkpoint yet.")
    state = ckpt.restore(step, target=target)
  return step, state.params


def run(config, workdir: str, frame_paths: Sequence[str], n: int, out: str | os.PathLike[str],
        seed: int = 0) -> pathlib.Path:
  """Writes the MAE figure of the run in `workdir` (MAE config `config`) to `out`."""
  step, params = restore_params(config, workdir)
  model = mae.build_model(config)
  preprocess = sized(zoo.entry(config.encoder).preprocess, config.img_size)
  images, labels = load_images(frame_paths, n, preprocess)
  patches = (config.img_size // model.encoder.patch) ** 2
  noise = jax.random.uniform(jax.random.key(seed), (images.shape[0], patches))
  columns = mae_look.mae_columns(model, {"params": params}, images, noise, preprocess,
                                 config.norm_pix_loss)
  title = (f"MAE {config.encoder} at step {step} ({workdir}): mask ratio "
           f"{config.mask_ratio:g}, mask seed {seed}")
  mae_look.save_png(mae_look.figure(columns, labels, title), out)
  return pathlib.Path(out)


def run_encoder_only(spec: str, frame_paths: Sequence[str], n: int,
                     out: str | os.PathLike[str]) -> pathlib.Path:
  """Writes originals and attention maps of zoo ViT `spec` (ZOO_NAME[:CHECKPOINT]) to `out`."""
  name, _, checkpoint = spec.partition(":")
  if name not in zoo.names():
    raise ValueError(f"mae_look: --encoder_only: unknown zoo entry {name!r}; entries: "
                     f"{zoo.names()}")
  encoder = zoo.load(name, checkpoint or None)
  images, labels = load_images(frame_paths, n, encoder.preprocess)
  columns = mae_look.encoder_columns(encoder.module, encoder.params, images,
                                     encoder.preprocess)
  title = f"{name}" + (f" ({checkpoint})" if checkpoint else "") + ": last-block CLS attention"
  mae_look.save_png(mae_look.figure(columns, labels, title), out)
  return pathlib.Path(out)


def define_flags() -> None:
  """The command line's flags; defined only when run as a program, so that importing this
  module (tests, notebooks) never clashes with another launch module's flags."""
  config_flags.DEFINE_config_file("config", None, "the MAE config file (configs/mae.py:VARIANT)"
                                  "; gives the architecture", lock_config=True)
  flags.DEFINE_string("workdir", "", "the MAE run's workdir (default: the config's)")
  flags.DEFINE_list("frames", [], "comma-separated frame shards (.npy) or image folders")
  flags.DEFINE_integer("n", 6, "frames shown, spread over the shards")
  flags.DEFINE_string("out", "mae_look.png", "the PNG to write")
  flags.DEFINE_integer("seed", 0, "seed of the mask noise")
  flags.DEFINE_string("encoder_only", "", "ZOO_NAME[:CHECKPOINT]: only originals and "
                      "attention maps of this zoo ViT (no MAE, no --config)")


def _mae_config(config):
  """The MAE part of a configs/mae.py config (or an MAE config itself)."""
  return config.mae if "mae" in config else config


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  f = flags.FLAGS
  try:
    if f.encoder_only:
      path = run_encoder_only(f.encoder_only, f.frames, f.n, f.out)
    elif f.config is None:
      raise ValueError("mae_look: give --config=configs/mae.py:VARIANT (or --encoder_only)")
    else:
      workdir = f.workdir or f.config.get("workdir", "")
      if not workdir:
        raise ValueError("mae_look: give --workdir (the config names none)")
      path = run(_mae_config(f.config), workdir, f.frames, f.n, f.out, f.seed)
  except (ValueError, FileNotFoundError) as e:  # A bad flag value: say which, no traceback.
    raise app.UsageError(str(e)) from e
  print(path)


if __name__ == "__main__":
  define_flags()
  app.run(main)
