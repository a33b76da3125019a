"""What an MAE makes and where its encoder looks (VC-1 paper, Figure 8), as pure functions.

    columns = mae_columns(mae, variables, images, noise, preprocess)   # name -> uint8 images
    fig = figure(columns, row_labels, title)
    save_png(fig, "mae_look.png")

`images` are normalised [B, H, W, 3] (the zoo entry's preprocessing); the columns are the
original, the masked input (masked patches grey), the reconstruction, the reconstruction with
the visible patches pasted back, and the encoder's last-block CLS attention over the original
(`attention_maps`) as a heat map blended over the image. `encoder_columns` gives the original
and attention columns alone, for any zoo ViT.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
from typing import Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from PIL import Image

from vcbench import files
from vcbench.algos import mae
from vcbench.algos import runner
from vcbench.data import frames
from vcbench.models import mae as mae_model
from vcbench.models import zoo
from vcbench.models.preprocess import Preprocess
from vcbench.models.vit import Block, ViT

GREY = 128          # Masked patches are drawn in this grey, as in MAE's figures.
_DPI = 100
# Layout in pixels (the PNG's size is exact: see `figure_size`).
_MIN_PANEL, _GAP, _LABEL_W, _TITLE_H, _HEADER_H = 128, 6, 90, 30, 18


# ---------------------------------------------------------------------------------------------
# Attention.

def _last_block_input(encoder: ViT, variables, images) -> jax.Array:
  """The tokens [B, N, D] that enter the last block: `block_{depth-2}` for depth >= 2, the
  embedded tokens for depth 1. Read by intercepting the last block's call, so one path covers
  both (and CLIP's ln_pre) without changing the ViT."""
  last = f"blocks_{encoder.depth - 1}"
  captured = {}

  def interceptor(next_fun, args, kwargs, context):
    if (isinstance(context.module, Block) and context.module.name == last
        and context.method_name == "__call__"):
      captured["x"] = args[0]
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(interceptor):
    encoder.apply(variables, images)
  return captured["x"]


@functools.partial(jax.jit, static_argnums=(0,))
def attention_maps(encoder: ViT, variables, images) -> jax.Array:
  """The last block's CLS-to-patch attention, averaged over heads: [B, h, w].

  Recomputed from the last block's `norm1` and `attn/qkv` parameters applied to that block's
  input. Each head's CLS query is softmaxed over the patch keys only (the same as the full
  softmax row with its CLS entry dropped and renormalised), so every map sums to 1.

  Args:
    encoder: a zoo ViT (timm or CLIP layout).
    variables: its Flax variables ({'params': ...}).
    images: normalised images [B, H, W, 3] (the entry's preprocessing).
  """
  if not isinstance(encoder, ViT):
    raise ValueError(f"attention maps need a ViT encoder, got {type(encoder).__name__}")
  b, hh, ww, _ = images.shape
  grid = (hh // encoder.patch, ww // encoder.patch)
  x = _last_block_input(encoder, variables, images).astype(jnp.float32)
  p = variables["params"][f"blocks_{encoder.depth - 1}"]
  x = nn.LayerNorm(epsilon=encoder.ln_eps).apply({"params": p["norm1"]}, x)
  qkv = x @ p["attn"]["qkv"]["kernel"].astype(jnp.float32)
  if "bias" in p["attn"]["qkv"]:
    qkv = qkv + p["attn"]["qkv"]["bias"].astype(jnp.float32)
  heads, d = encoder.heads, x.shape[-1] // encoder.heads
  # [B, N, 3H, d] split into q, k, v along the head axis, as the ViT's own Attention does.
  q, k, _ = jnp.split(qkv.reshape(b, -1, 3 * heads, d), 3, axis=2)
  logits = jnp.einsum("bhd,bnhd->bhn", q[:, 0], k[:, 1:]) / np.sqrt(d)
  weights = jax.nn.softmax(logits, axis=-1).mean(axis=1)
  return weights.reshape(b, *grid)


# ---------------------------------------------------------------------------------------------
# Images.

@functools.partial(jax.jit, static_argnums=(2,))
def denormalise_patches(pred, images, patch: int) -> jax.Array:
  """A norm-pix-loss prediction back in image space: each predicted patch is rescaled by the
  mean and (unbiased) std of the same patch of `images`, the statistics the loss's targets were
  standardised with. pred, images: [B, H, W, 3] -> [B, H, W, 3]."""
  mean, std = mae_model.patch_stats(mae_model.patchify(jnp.asarray(images, jnp.float32), patch))
  out = mae_model.patchify(jnp.asarray(pred, jnp.float32), patch) * std + mean
  grid = (images.shape[1] // patch, images.shape[2] // patch)
  return mae_model.unpatchify(out, patch, grid)


def to_pixels(images, preprocess: Preprocess) -> np.ndarray:
  """Normalised images -> uint8 pixels: the inverse of the entry's normalisation, clipped."""
  mean = np.asarray(preprocess.mean, np.float32) / preprocess.scale
  std = np.asarray(preprocess.std, np.float32) / preprocess.scale
  pixels = np.asarray(images, np.float32) * std + mean
  return np.clip(np.round(pixels), 0, 255).astype(np.uint8)


def heat(attention, size: tuple[int, int]) -> np.ndarray:
  """Maps [B, h, w] -> [B, H, W] in [0, 1]: each min-max scaled (for display only: the
  weights' scale differs between images) and upsampled bilinearly."""
  a = np.asarray(attention, np.float32)
  lo = a.min(axis=(1, 2), keepdims=True)
  span = a.max(axis=(1, 2), keepdims=True) - lo
  a = (a - lo) / np.where(span > 0, span, 1.0)
  # PIL on the host: a few small maps are not worth compiling a JAX resize for.
  up = [np.asarray(Image.fromarray(m).resize(size[::-1], Image.Resampling.BILINEAR))
        for m in a]
  return np.clip(np.stack(up), 0.0, 1.0)


def overlay(pixels: np.ndarray, attention, alpha: float = 0.5, cmap: str = "jet") -> np.ndarray:
  """The attention maps as a colour-mapped heat map alpha-blended over uint8 `pixels`."""
  from matplotlib import colormaps  # pylint: disable=g-import-not-at-top
  h = heat(attention, pixels.shape[1:3])
  colours = colormaps[cmap](h)[..., :3] * 255.0
  return np.round((1 - alpha) * pixels + alpha * colours).astype(np.uint8)


def encoder_columns(encoder: ViT, variables, images, preprocess: Preprocess) -> dict:
  """{'original', 'attention'}: uint8 [B, H, W, 3] each, for any zoo ViT."""
  original = to_pixels(images, preprocess)
  return {"original": original,
          "attention": overlay(original, attention_maps(encoder, variables, images))}


def mae_columns(mae: mae_model.MAE, variables, images, noise, preprocess: Preprocess,
                norm_pix_loss: bool = True) -> dict:
  """The five columns of Figure 8, uint8 [B, H, W, 3] each.

  Args:
    mae: the MAE module; variables: its {'params': ...}.
    images: normalised [B, H, W, 3]; noise: [B, patches] uniform, which picks the mask.
    preprocess: the normalisation `images` went through (to show them as pixels).
    norm_pix_loss: whether the model was trained on per-patch normalised targets (then its
      prediction is de-normalised with each original patch's statistics).
  """
  pred, mask = mae_model.reconstruct(mae, variables, images, noise)
  if norm_pix_loss:
    pred = denormalise_patches(pred, images, mae.encoder.patch)
  masked = np.asarray(mask) > 0.5
  original = to_pixels(images, preprocess)
  recon = to_pixels(pred, preprocess)
  attention = attention_maps(mae.encoder, {"params": variables["params"]["encoder"]}, images)
  return {"original": original,
          "masked": np.where(masked, np.uint8(GREY), original),
          "reconstruction": recon,
          "reconstruction + visible": np.where(masked, recon, original),
          "attention": overlay(original, attention)}


# ---------------------------------------------------------------------------------------------
# The figure.

def panel_size(size: int) -> int:
  """A frame's side on the figure: small frames are enlarged by a whole factor (nearest), so
  patches stay crisp and labels fit."""
  return size * max(1, -(-_MIN_PANEL // size))


def figure_size(rows: int, columns: int, size: int) -> tuple[int, int]:
  """(width, height) in pixels of `figure`'s PNG for `rows` images of side `size`."""
  p = panel_size(size)
  return _LABEL_W + columns * (p + _GAP), _TITLE_H + _HEADER_H + rows * (p + _GAP)


def figure(columns: Mapping[str, np.ndarray], row_labels: Optional[Sequence[str]] = None,
           title: str = ""):
  """One row per image, one column per `columns` item (name -> uint8 [B, S, S, 3]).

  Returns a matplotlib Figure of exactly `figure_size(B, len(columns), S)` pixels."""
  from matplotlib import figure as figure_lib  # pylint: disable=g-import-not-at-top
  tiles = list(columns.values())
  rows, size = tiles[0].shape[0], tiles[0].shape[1]
  labels = list(row_labels) if row_labels is not None else [str(i) for i in range(rows)]
  width, height = figure_size(rows, len(tiles), size)
  fig = figure_lib.Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
  p = panel_size(size)
  top = _TITLE_H + _HEADER_H
  for r in range(rows):
    y = top + r * (p + _GAP)
    fig.text((_LABEL_W - 6) / width, 1 - (y + p / 2) / height, labels[r], ha="right",
             va="center", fontsize=8)
    for c, (name, images) in enumerate(columns.items()):
      ax = fig.add_axes(((_LABEL_W + c * (p + _GAP)) / width, 1 - (y + p) / height,
                        p / width, p / height))
      ax.imshow(images[r], interpolation="nearest")
      ax.set_axis_off()
      if r == 0:
        ax.set_title(name, fontsize=9)
  fig.suptitle(title, x=_LABEL_W / width, y=1 - 6 / height, ha="left", va="top", fontsize=10)
  return fig


def save_png(fig, path: str | os.PathLike[str]) -> None:
  """Written whole or not at all (a crash never leaves half a PNG), at the exact pixel size."""
  from matplotlib.backends import backend_agg  # pylint: disable=g-import-not-at-top
  backend_agg.FigureCanvasAgg(fig)
  files.atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=_DPI))


# ---------------------------------------------------------------------------------------------
# A trained run's figure (`python -m launch.mae_look`).

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
  """(step, MAE params) of the latest checkpoint of the run in `workdir`."""
  # The restore target needs only shapes; init='zoo' would read the zoo checkpoint to get them.
  shapes = ml_collections.ConfigDict(config.to_dict())
  shapes.init = "mae"
  try:
    step, state, _ = runner.restore(mae.make_train(shapes), workdir, strict=False)
  except FileNotFoundError as e:
    raise FileNotFoundError(f"mae_look: {e} (train with `python -m launch.main --config "
                            "configs/mae.py:VARIANT`).") from e
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
  columns = mae_columns(model, {"params": params}, images, noise, preprocess,
                                 config.norm_pix_loss)
  title = (f"MAE {config.encoder} at step {step} ({workdir}): mask ratio "
           f"{config.mask_ratio:g}, mask seed {seed}")
  save_png(figure(columns, labels, title), out)
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
  columns = encoder_columns(encoder.module, encoder.params, images,
                                     encoder.preprocess)
  title = f"{name}" + (f" ({checkpoint})" if checkpoint else "") + ": last-block CLS attention"
  save_png(figure(columns, labels, title), out)
  return pathlib.Path(out)
