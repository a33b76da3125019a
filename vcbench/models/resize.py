"""Resizing that matches `torch.nn.functional.interpolate` exactly.

Position-embedding resampling (timm's `resample_abs_pos_embed`, bicubic) and the
G-VUE feature pyramid (bilinear) must agree with the PyTorch references to float
precision, and `jax.image.resize` does not: its cubic kernel uses a=-0.5 where
PyTorch uses a=-0.75, and it antialiases when downsampling. Resizing here is a
pair of small interpolation matrices built in NumPy from static shapes, applied
with two matmuls, so the same code serves NumPy (conversion time) and jitted JAX
(run time) and costs next to nothing against an encoder.
"""
from __future__ import annotations

import functools

import numpy as np

_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) bicubic coefficient.


def _cubic_weights(t: np.ndarray) -> np.ndarray:
  """Weights of the 4 taps at offsets -1, 0, 1, 2 for fractional position t."""
  a = _CUBIC_A

  def near(x):  # |x| <= 1
    return ((a + 2) * x - (a + 3)) * x * x + 1

  def far(x):  # 1 < |x| < 2
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

  return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)


@functools.lru_cache(maxsize=256)
def interp_matrix(in_size: int, out_size: int, mode: str) -> np.ndarray:
  """[out_size, in_size] matrix M with `out = M @ in` along one axis.

  Follows PyTorch's `align_corners=False`, no antialias: source coordinate
  `(dst + 0.5) * in/out - 0.5`, clamped at 0 for bilinear, border taps clamped
  to the edge for bicubic.
  """
  if in_size < 1 or out_size < 1:
    raise ValueError(f"sizes must be positive, got {in_size} -> {out_size}")
  scale = in_size / out_size
  dst = np.arange(out_size, dtype=np.float64)
  src = (dst + 0.5) * scale - 0.5
  m = np.zeros((out_size, in_size), dtype=np.float64)
  rows = np.arange(out_size)
  if mode == "bilinear":
    src = np.maximum(src, 0.0)
    lo = np.floor(src).astype(np.int64)
    lo = np.minimum(lo, in_size - 1)
    hi = np.minimum(lo + 1, in_size - 1)
    frac = src - lo
    np.add.at(m, (rows, lo), 1.0 - frac)
    np.add.at(m, (rows, hi), frac)
  elif mode == "bicubic":
    base = np.floor(src).astype(np.int64)
    weights = _cubic_weights(src - base)
    for tap in range(4):
      idx = np.clip(base - 1 + tap, 0, in_size - 1)
      np.add.at(m, (rows, idx), weights[:, tap])
  else:
    raise ValueError(f"mode must be 'bilinear' or 'bicubic', got {mode!r}")
  return m.astype(np.float32)


def resize_hw(x, out_hw: tuple[int, int], mode: str = "bilinear"):
  """Resizes the two axes before the last of `x` ([..., H, W, C]) to `out_hw`.

  Works on NumPy and JAX arrays alike (the matrices are constants under jit).
  """
  h, w = x.shape[-3], x.shape[-2]
  oh, ow = out_hw
  if (h, w) == (oh, ow):
    return x
  mh = interp_matrix(h, oh, mode)
  mw = interp_matrix(w, ow, mode)
  if isinstance(x, np.ndarray):
    return np.einsum("oh,...hwc,pw->...opc", mh, x, mw).astype(x.dtype)
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  mh, mw = jnp.asarray(mh, x.dtype), jnp.asarray(mw, x.dtype)
  x = jnp.einsum("oh,...hwc->...owc", mh, x)
  return jnp.einsum("pw,...owc->...opc", mw, x)


def resample_pos_embed(pos_embed, new_grid: tuple[int, int],
                       num_prefix_tokens: int = 1, old_grid=None):
  """Resamples a ViT position embedding [1, P + h*w, D] to a new patch grid.

  Bicubic, as timm's `resample_abs_pos_embed` (antialias off) and eai-vc's
  `interpolate_pos_embed`; prefix (CLS) tokens are kept as they are.
  """
  n = pos_embed.shape[1] - num_prefix_tokens
  if old_grid is None:
    side = int(round(n ** 0.5))
    if side * side != n:
      raise ValueError(f"position embedding has {n} patch tokens, not a square "
                       "grid; pass old_grid explicitly")
    old_grid = (side, side)
  if old_grid[0] * old_grid[1] != n:
    raise ValueError(f"old_grid {old_grid} does not hold {n} patch tokens")
  if tuple(old_grid) == tuple(new_grid):
    return pos_embed
  prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
  d = pos_embed.shape[-1]
  grid = grid.reshape(1, old_grid[0], old_grid[1], d)
  grid = resize_hw(grid, new_grid, "bicubic").reshape(1, -1, d)
  cat = np.concatenate if isinstance(pos_embed, np.ndarray) else _jnp_concat
  return cat([prefix, grid], axis=1)


def _jnp_concat(xs, axis):
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  return jnp.concatenate(xs, axis=axis)
