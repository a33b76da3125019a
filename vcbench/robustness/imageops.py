"""Image-processing primitives for the visual corruptions, in pure JAX (jittable, vmappable).

Each reproduces the library routine the reference corruptions call, so that `visual.py` can
match imagecorruptions / RobustNav output: scipy/skimage's gaussian filter, OpenCV's
filter2D / blur (BORDER_REFLECT_101), Canny, distanceTransform and equalizeHist, and
skimage's RGB <-> HSV. Kernels that depend only on static parameters (gaussian weights, the
defocus disk) are built on the host with numpy and enter the computation as constants.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

_DIRECT_TAPS = 64  # `correlate` applies larger kernels by FFT.
_TG22 = int(0.4142135623730950488 * (1 << 15) + 0.5)  # tan(22.5 deg) in Canny's fixed point.


# ---------------------------------------------------------------------------------------------
# Host-side kernels.

def gaussian_kernel1d(sigma: float, truncate: float = 4.0) -> np.ndarray:
  """scipy.ndimage's gaussian weights: radius int(truncate * sigma + 0.5), summing to 1."""
  radius = int(truncate * sigma + 0.5)
  x = np.arange(-radius, radius + 1, dtype=np.float64)
  w = np.exp(-0.5 * (x / max(sigma, 1e-12)) ** 2)
  return w / w.sum()


def noise_gain(sigma: float) -> float:
  """The factor by which `gaussian_filter(., sigma)` scales the std of white noise (2-D)."""
  return float(np.sum(gaussian_kernel1d(sigma) ** 2))


def _cv_gaussian_blur(kernel: np.ndarray, ksize: int, sigma: float) -> np.ndarray:
  """cv2.GaussianBlur of a small 2-D array (separable, BORDER_REFLECT_101)."""
  x = np.arange(ksize) - (ksize - 1) / 2
  g = np.exp(-x ** 2 / (2 * sigma ** 2))
  g /= g.sum()
  r = ksize // 2
  out = np.pad(kernel.astype(np.float64), r, mode="reflect")  # numpy 'reflect' = REFLECT_101.
  out = sum(g[i] * out[i:i + kernel.shape[0], :] for i in range(ksize))
  return sum(g[i] * out[:, i:i + kernel.shape[1]] for i in range(ksize))


def resample_kernel(kernel: np.ndarray, scale: float) -> np.ndarray:
  """A centred odd kernel defined on a grid `1 / scale` times finer, integrated over the
  coarser grid's pixels (area-weighted), renormalised to sum 1.

  The point-spread function then covers the same fraction of the field of view at any
  resolution; at scale 1 the kernel is returned unchanged.
  """
  n = kernel.shape[0] // 2
  m = max(0, math.ceil((n + 0.5) * scale - 0.5))
  i = np.arange(-n, n + 1)[None, :]
  j = np.arange(-m, m + 1)[:, None]
  overlap = (np.minimum(i + 0.5, (j + 0.5) / scale) - np.maximum(i - 0.5, (j - 0.5) / scale))
  a = np.clip(overlap, 0.0, None)
  out = a @ kernel.astype(np.float64) @ a.T
  return out / out.sum()


def disk_kernel(radius: float, alias_blur: float, scale: float = 1.0) -> np.ndarray:
  """ImageNet-C's defocus disk, resampled to `scale` (see `resample_kernel`).

  As in imagecorruptions' `disk`, radii up to 8 are drawn on a fixed 17x17 grid and
  antialiased with a 3x3 gaussian; larger radii on a (2r+1)^2 grid with a 5x5 one.
  """
  half, ksize = (8, 3) if radius <= 8 else (int(radius), 5)
  x = np.arange(-half, half + 1)
  aliased = (x[None, :] ** 2 + x[:, None] ** 2 <= radius ** 2).astype(np.float64)
  aliased /= aliased.sum()
  kernel = _cv_gaussian_blur(aliased.astype(np.float32), ksize, alias_blur)
  return resample_kernel(kernel, scale) if scale != 1.0 else kernel


# ---------------------------------------------------------------------------------------------
# Filtering.

def correlate(x: jax.Array, kernel, pad_mode: str = "reflect") -> jax.Array:
  """2-D cross-correlation (cv2.filter2D's convention, anchor at the centre) of every channel
  of `x` ([H, W] or [H, W, C], float) with an odd-sized host `kernel` [kh, kw].

  pad_mode: jnp.pad's mode for the border; 'reflect' is OpenCV's BORDER_REFLECT_101 (the
  default of filter2D and blur), 'edge' is BORDER_REPLICATE / scipy's 'nearest'.
  Small kernels are a fused sum of shifted copies (exact for integer data), larger ones go
  through an FFT: XLA:CPU's convolutions of one to three channels are 10-20x slower than
  either.
  """
  kernel = np.asarray(kernel, np.float64)
  kh, kw = kernel.shape
  h, w = x.shape[:2]
  pad = ((kh // 2, kh // 2), (kw // 2, kw // 2)) + ((0, 0),) * (x.ndim - 2)
  xp = jnp.pad(x, pad, mode=pad_mode)
  if kernel.size > _DIRECT_TAPS:
    return _correlate_fft(xp, kernel, (h, w))
  out = jnp.zeros_like(x)
  for (a, b), weight in np.ndenumerate(kernel):
    if weight:
      out = out + float(weight) * xp[a:a + h, b:b + w]
  return out


def _correlate_fft(padded: jax.Array, kernel: np.ndarray, shape: tuple[int, int]) -> jax.Array:
  """The valid part of the correlation of a padded image with `kernel`, by FFT of the padded
  size: the circular wrap-around only reaches the border rows and columns it drops."""
  kh, kw = kernel.shape
  size = padded.shape[:2]
  spectrum = np.fft.rfft2(kernel[::-1, ::-1], s=size).astype(np.complex64)  # On the host.
  spectrum = spectrum.reshape(spectrum.shape + (1,) * (padded.ndim - 2))
  full = jnp.fft.irfft2(jnp.fft.rfft2(padded, axes=(0, 1)) * spectrum, s=size, axes=(0, 1))
  return full[kh - 1:kh - 1 + shape[0], kw - 1:kw - 1 + shape[1]].astype(padded.dtype)


def gaussian_filter(x: jax.Array, sigma: float, truncate: float = 4.0) -> jax.Array:
  """skimage.filters.gaussian(x, sigma, mode='nearest', truncate=truncate) of a 2-D array."""
  w = gaussian_kernel1d(sigma, truncate)
  if len(w) == 1:
    return x
  return correlate(correlate(x, w[:, None], "edge"), w[None, :], "edge")


def box_blur3(x: jax.Array) -> jax.Array:
  """cv2.blur(x, (3, 3)) in float (BORDER_REFLECT_101): the exact sum, divided once."""
  ones = np.ones(3)
  return correlate(correlate(x, ones[:, None]), ones[None, :]) / 9.0


def _shifted(padded: jax.Array, dy: int, dx: int, pad: int) -> jax.Array:
  """The view of an array padded by `pad` on every side that is offset by (dy, dx)."""
  h, w = padded.shape[0] - 2 * pad, padded.shape[1] - 2 * pad
  return padded[pad + dy:pad + dy + h, pad + dx:pad + dx + w]


# ---------------------------------------------------------------------------------------------
# OpenCV's Canny, distance transform and histogram equalisation.

def _sobel(img: jax.Array) -> tuple[jax.Array, jax.Array]:
  """3x3 Sobel derivatives (x, y) of an int32 image, BORDER_REPLICATE (as Canny uses)."""
  p = jnp.pad(img, 1, mode="edge")

  def s(dy, dx):
    return _shifted(p, dy, dx, 1)

  gx = (s(-1, 1) + 2 * s(0, 1) + s(1, 1)) - (s(-1, -1) + 2 * s(0, -1) + s(1, -1))
  gy = (s(1, -1) + 2 * s(1, 0) + s(1, 1)) - (s(-1, -1) + 2 * s(-1, 0) + s(-1, 1))
  return gx, gy


def _non_max_suppressed(gx: jax.Array, gy: jax.Array, low: int) -> tuple[jax.Array, jax.Array]:
  """Canny's edge candidates: L1 magnitude above `low` and a local maximum across the
  gradient, by OpenCV's 4-sector rule in fixed point (ties broken as it does: strictly
  greater than the left / upper neighbour, at least the right / lower one, strictly greater
  than both diagonal ones). Returns (candidates, magnitude)."""
  mag = jnp.abs(gx) + jnp.abs(gy)
  p = jnp.pad(mag, 1)  # Outside the image the magnitude is 0, as in OpenCV's ring buffer.

  def nb(dy, dx):
    return _shifted(p, dy, dx, 1)

  ax, ay = jnp.abs(gx), jnp.abs(gy) << 15
  tg22x = ax * _TG22
  horizontal = ay < tg22x
  vertical = ay > tg22x + (ax << 16)
  anti = (gx ^ gy) < 0  # Gradient signs differ: the maximum runs along the anti-diagonal.
  keep_h = (mag > nb(0, -1)) & (mag >= nb(0, 1))
  keep_v = (mag > nb(-1, 0)) & (mag >= nb(1, 0))
  keep_d = jnp.where(anti, (mag > nb(-1, 1)) & (mag > nb(1, -1)),
                     (mag > nb(-1, -1)) & (mag > nb(1, 1)))
  keep = jnp.where(horizontal, keep_h, jnp.where(vertical, keep_v, keep_d))
  return keep & (mag > low), mag


def _dilate3(mask: jax.Array) -> jax.Array:
  p = jnp.pad(mask, 1)
  out = mask
  for dy in (-1, 0, 1):
    for dx in (-1, 0, 1):
      out = out | _shifted(p, dy, dx, 1)
  return out


def canny(img: jax.Array, low: int, high: int, steps_per_check: int = 8) -> jax.Array:
  """cv2.Canny(img, low, high) (aperture 3, L1 gradient) of a uint8 image [H, W]; bool edges.

  Hysteresis grows the strong edges inside the candidates by 8-connected dilation in a
  while_loop, `steps_per_check` dilations between convergence checks.
  """
  gx, gy = _sobel(img.astype(jnp.int32))
  cand, mag = _non_max_suppressed(gx, gy, low)
  strong = cand & (mag > high)

  def grow(state):
    edges, _ = state
    new = edges
    for _ in range(steps_per_check):
      new = _dilate3(new) & cand
    return new, jnp.any(new != edges)

  edges, _ = jax.lax.while_loop(lambda s: s[1], grow, (strong, jnp.array(True)))
  return edges


def truncated_distance(feature: jax.Array, max_dist: float) -> jax.Array:
  """Euclidean distance from every pixel to the nearest True pixel of `feature` [H, W],
  capped at `max_dist`. Exact: the minimum separates into a column pass and a row pass, and
  both stay within the cap's window. Stands in for cv2.distanceTransform(DIST_L2, 5), whose
  5x5 chamfer approximation it differs from by at most ~2%.

  Both passes are scans: as chains of fused minima, XLA fused them into the consumer's taps
  (a 3x3 blur) and ran 10x slower.
  """
  r = max(1, math.ceil(max_dist))
  h, w = feature.shape
  big = jnp.float32(4.0 * (r + 1) ** 2)
  offsets = jnp.arange(-r, r + 1)
  rows = jnp.pad(feature, ((r, r), (0, 0)))

  def column_pass(best, dy):
    hit = jax.lax.dynamic_slice(rows, (r + dy, 0), (h, w))
    return jnp.minimum(best, jnp.where(hit, (dy * dy).astype(jnp.float32), big)), None

  col, _ = jax.lax.scan(column_pass, jnp.full((h, w), big), offsets)
  cols = jnp.pad(col, ((0, 0), (r, r)), constant_values=big)

  def row_pass(best, dx):
    return jnp.minimum(best, jax.lax.dynamic_slice(cols, (0, r + dx), (h, w))
                       + (dx * dx).astype(jnp.float32)), None

  d2, _ = jax.lax.scan(row_pass, jnp.full((h, w), big), offsets)
  return jnp.minimum(jnp.sqrt(d2), max_dist)


def equalize_hist(img: jax.Array) -> jax.Array:
  """cv2.equalizeHist of a uint8 image (any shape); returns uint8.

  The lowest occupied level maps to 0 and the cumulative count above it is scaled to 255 in
  float32 and rounded half to even, as OpenCV does; a constant image is returned unchanged.
  """
  x = img.astype(jnp.int32)
  hist = jnp.bincount(x.ravel(), length=256)
  first = jnp.argmax(hist > 0)
  total = x.size
  cum = jnp.cumsum(hist)
  above = cum - cum[first]
  scale = jnp.float32(255.0) / (total - hist[first]).astype(jnp.float32)
  lut = jnp.clip(jnp.round(above.astype(jnp.float32) * scale), 0, 255)
  lut = jnp.where(hist[first] == total, jnp.arange(256, dtype=jnp.float32), lut)
  return lut[x].astype(jnp.uint8)


# ---------------------------------------------------------------------------------------------
# Colour.

def rgb_to_hsv(rgb: jax.Array) -> jax.Array:
  """skimage.color.rgb2hsv of floats in [0, 1] [..., 3] (same tie-breaking: blue over green
  over red when several channels are the maximum; hue and saturation 0 for greys)."""
  r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
  v = jnp.max(rgb, axis=-1)
  delta = v - jnp.min(rgb, axis=-1)
  grey = delta == 0
  safe = jnp.where(grey, 1.0, delta)
  h = jnp.where(b == v, 4.0 + (r - g) / safe,
                jnp.where(g == v, 2.0 + (b - r) / safe, (g - b) / safe))
  h = jnp.where(grey, 0.0, jnp.mod(h / 6.0, 1.0))
  s = jnp.where(grey, 0.0, delta / jnp.where(v == 0, 1.0, v))
  return jnp.stack([h, s, v], axis=-1)


def hsv_to_rgb(hsv: jax.Array) -> jax.Array:
  """skimage.color.hsv2rgb of floats in [0, 1] [..., 3]."""
  h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
  hi = jnp.floor(h * 6)
  f = h * 6 - hi
  p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
  sector = jnp.mod(hi, 6)[..., None]
  sectors = ((v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q))
  out = jnp.zeros_like(hsv)
  for k, channels in enumerate(sectors):
    out = jnp.where(sector == k, jnp.stack(channels, axis=-1), out)
  return out
