"""MAE's image augmentation on device: RandomResizedCrop + horizontal flip, pure JAX.

Used inside the jitted MAE step (`algos/mae.py`), so a batch of uint8 frames goes to the
accelerator once and every image draws its own crop from the step's key.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

CROP_TRIES = 10   # torchvision's RandomResizedCrop attempts before the centre-crop fallback.

def augment(key: jax.Array, images: jax.Array, out_size: int,
            scale: tuple[float, float] = (0.2, 1.0),
            ratio: tuple[float, float] = (3 / 4, 4 / 3), flip: bool = True) -> jax.Array:
  """MAE's augmentation: RandomResizedCrop(out_size, scale, ratio) then RandomHorizontalFlip.

  Pure and jittable (`out_size`, `scale`, `ratio`, `flip` static); every image draws its own
  crop and flip from `jax.random.split(key, B)`.

  Args:
    key: a PRNG key.
    images: uint8 (or float) [B, H, W, 3], values in [0, 255].
    out_size: side of the output crops.
    scale: range of the crop's area as a fraction of the image's.
    ratio: range of the crop's aspect ratio (width / height), drawn log-uniformly.
    flip: flip each image horizontally with probability 1/2.

  Returns:
    float32 [B, out_size, out_size, 3] in [0, 255] (not rounded to integers).

  Crop parameters follow torchvision's `RandomResizedCrop.get_params` (10 tries, rounded
  sizes, the first crop that fits, else the centre crop of the image clamped to `ratio`).
  Differences from torchvision + PIL: the random stream is JAX's; the resize is
  `jax.image.scale_and_translate` with the Keys cubic kernel (a = -0.5, PIL's bicubic; torch
  tensors use a = -0.75) and antialiasing when shrinking, sampling the whole image, so pixels
  just outside the crop weigh in at its border where PIL (crop, then resize) replicates the
  crop's edge; the result is float, clipped to [0, 255] but not quantised.
  """
  images = jnp.asarray(images)
  if images.ndim != 4 or images.shape[-1] != 3:
    raise ValueError(f"augment: images must be [B, H, W, 3], got {images.shape}.")
  one = functools.partial(_augment_one, out_size=int(out_size), scale=tuple(scale),
                          ratio=tuple(ratio), flip=flip)
  return jax.vmap(one)(jax.random.split(key, images.shape[0]), images)


def _augment_one(key, image, out_size, scale, ratio, flip):
  crop_key, flip_key = jax.random.split(key)
  height, width = image.shape[:2]
  top, left, h, w = _crop_box(crop_key, height, width, scale, ratio)
  sy, sx = out_size / h, out_size / w
  out = jax.image.scale_and_translate(
      image.astype(jnp.float32), (out_size, out_size, 3), (0, 1), jnp.stack([sy, sx]),
      jnp.stack([-top * sy, -left * sx]), method="cubic", antialias=True)
  out = jnp.clip(out, 0.0, 255.0)  # the cubic kernel overshoots next to sharp edges.
  if flip:
    out = jnp.where(jax.random.bernoulli(flip_key), out[:, ::-1], out)
  return out


def _crop_box(key, height: int, width: int, scale, ratio):
  """(top, left, h, w) as float32 scalars, torchvision's RandomResizedCrop.get_params."""
  k_area, k_ratio, k_top, k_left = jax.random.split(key, 4)
  area = height * width
  target = area * jax.random.uniform(k_area, (CROP_TRIES,), minval=scale[0], maxval=scale[1])
  log_ratio = jax.random.uniform(k_ratio, (CROP_TRIES,), minval=math.log(ratio[0]),
                                 maxval=math.log(ratio[1]))
  aspect = jnp.exp(log_ratio)
  ws, hs = jnp.round(jnp.sqrt(target * aspect)), jnp.round(jnp.sqrt(target / aspect))
  fits = (ws > 0) & (ws <= width) & (hs > 0) & (hs <= height)
  first = jnp.argmax(fits)
  fallback_h, fallback_w = _centre_crop_size(height, width, ratio)
  found = jnp.any(fits)
  h = jnp.where(found, hs[first], fallback_h)
  w = jnp.where(found, ws[first], fallback_w)
  # randint(0, height - h + 1) as floor(u * (height - h + 1)); min() guards u's rounding to 1.
  top = jnp.minimum(jnp.floor(jax.random.uniform(k_top) * (height - h + 1)), height - h)
  left = jnp.minimum(jnp.floor(jax.random.uniform(k_left) * (width - w + 1)), width - w)
  top = jnp.where(found, top, (height - fallback_h) // 2)
  left = jnp.where(found, left, (width - fallback_w) // 2)
  return top, left, h, w


def _centre_crop_size(height: int, width: int, ratio) -> tuple[int, int]:
  """torchvision's fallback: the whole image, clamped to the aspect-ratio range."""
  in_ratio = width / height
  if in_ratio < min(ratio):
    return int(round(width / min(ratio))), width
  if in_ratio > max(ratio):
    return height, int(round(height * max(ratio)))
  return height, width
