"""Image preprocessing owned by each zoo entry: uint8 pixels -> model input.

Every PVR was trained with its own resize, crop and normalisation; applying the
wrong one costs accuracy silently, so callers never do it themselves. A
`Preprocess` is a frozen, hashable description that is also a pure, jittable
function on a batch of uint8 images [B, H, W, 3].
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.errors import UserError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ImageError(UserError, ValueError):
  """Images that are not a batch of RGB uint8 pixels."""


def check_images(images) -> None:
  """Refuses anything but [B, H, W, 3] pixels in [0, 255], naming the problem.

  Integer arrays of other dtypes are accepted when their values fit in
  [0, 255] (checked when the values are concrete); floats are refused because
  [0, 1] and [0, 255] floats are indistinguishable in general and confusing
  them is the classic silent bug of PVR evaluation (R3M expects [0, 255], most
  others [0, 1]).
  """
  shape = getattr(images, "shape", None)
  dtype = getattr(images, "dtype", None)
  if shape is None or dtype is None:
    raise ImageError(f"images must be an array, got {type(images).__name__}")
  if len(shape) != 4 or shape[-1] != 3:
    raise ImageError(f"images must be [B, H, W, 3] (batch, height, width, RGB), got shape "
                     f"{tuple(shape)}" + (" (add a batch axis)" if len(shape) == 3 else ""))
  if min(shape) == 0:
    raise ImageError(f"images must be non-empty, got shape {tuple(shape)}")
  if jnp.issubdtype(dtype, jnp.floating):
    raise ImageError(f"images must be uint8 pixels in [0, 255], got {dtype}; for floats in "
                     "[0, 1] pass (x * 255).round().astype(np.uint8)")
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ImageError(f"images must be uint8 pixels in [0, 255], got {dtype}")
  if dtype != jnp.uint8 and not isinstance(images, jax.core.Tracer):
    lo, hi = int(np.min(images)), int(np.max(images))
    if lo < 0 or hi > 255:
      raise ImageError(f"pixel values must lie in [0, 255], got [{lo}, {hi}] ({dtype})")


@dataclasses.dataclass(frozen=True)
class Preprocess:
  """Resize the shorter side to `resize`, centre-crop `size`, scale, normalise.

  Resizing antialiases like PIL / torchvision's antialiased tensor resize, so
  large frames are not aliased on the way down. `scale` divides the pixels
  before normalisation (1/255 for every zoo entry: R3M's "[0, 255] input"
  convention is its network dividing by 255 internally, which this folds in).
  """
  size: int = 224
  resize: int = 256
  interpolation: str = "bicubic"   # or "bilinear"
  mean: tuple[float, float, float] = IMAGENET_MEAN
  std: tuple[float, float, float] = IMAGENET_STD
  scale: float = 1.0 / 255.0

  def resized_shape(self, h: int, w: int) -> tuple[int, int]:
    short = min(h, w)
    return (max(self.size, round(h * self.resize / short)),
            max(self.size, round(w * self.resize / short)))

  def __call__(self, images, dtype=jnp.float32):
    check_images(images)
    if self.interpolation not in ("bicubic", "bilinear"):
      raise ValueError(f"interpolation must be 'bicubic' or 'bilinear', got "
                       f"{self.interpolation!r}")
    b, h, w, _ = images.shape
    x = jnp.asarray(images).astype(jnp.float32)
    rh, rw = self.resized_shape(h, w)
    if (rh, rw) != (h, w):
      x = jax.image.resize(x, (b, rh, rw, 3), method=self.interpolation, antialias=True)
    top, left = (rh - self.size) // 2, (rw - self.size) // 2
    x = x[:, top:top + self.size, left:left + self.size]
    mean = jnp.asarray(self.mean, jnp.float32) / self.scale
    std = jnp.asarray(self.std, jnp.float32) / self.scale
    return ((x - mean) / std).astype(dtype)
