"""RobustNav's visual corruptions as pure JAX functions, and their registry.

Every corruption is `fn(key, image, severity, *, scale=None) -> image`:

* `image` is uint8 [H, W, 3] (RGB) and so is the result. As in RobustNav, which applies
  `np.uint8(corrupt(image))` to a float result in [0, 255], the float result is clipped and
  truncated (floored), not rounded. The two corruptions with no reference implementation
  (`camera_crack`, `lower_fov`) round to nearest instead, so that pixels they leave alone
  come back unchanged.
* `severity` is a static Python int in 1..5 (kernel sizes depend on it); anything else, or
  an image of another dtype or shape, raises ValueError.
* Pure and jittable (`jax.jit(functools.partial(fn, severity=s))`), vmappable over
  (key, image). Random corruptions draw everything from `key`; deterministic ones ignore it.
* `scale`: spatial parameters (blur radii and sigmas, the spatter blob sigma and its
  distance-transform truncation, crack widths and lengths) are defined at 224x224, RobustNav's
  camera, and are multiplied by `scale`; `None` means min(H, W) / 224, so a severity covers
  the same fraction of the field of view at any resolution and the parameters at 224^2 are
  exactly the reference's. Non-spatial parameters (noise scale, lighting) never scale.

Rounding at other scales, kept so that severity 5 still visibly corrupts a 32x32 image:
* defocus: the 224-pixel disk kernel is integrated over the coarser pixels (area-weighted,
  `imageops.resample_kernel`), so severities stay distinct and ordered; at 32^2 severity 1's
  disk fits inside one pixel and is the identity, severity 5's spreads ~85% of the weight
  to the 8 neighbours.
* motion blur: the radius is rounded to whole pixels but kept >= 1 (at least 3 shifted
  copies), the sigma scales continuously, so severities 2-4 (same radius) still differ.
* spatter: below scale 2/3 the liquid layer and the spatter mask are drawn k = round(1 /
  scale) times finer (at 32^2: exactly at 224^2, the reference's parameters) and averaged
  over k x k blocks, as a camera integrates its pixels; a sub-pixel blob sigma cannot be drawn
  directly (mud would cover 4x the reference's share of the image at 32^2). Otherwise the blob
  sigma and the distance truncation scale, and the white noise's std is rescaled so that the
  smoothed liquid layer keeps the reference's marginal distribution (hence its wet fraction);
  the 3x3 box and emboss filters stay 3x3 (the smallest non-trivial ones).
* camera crack: line half-widths are at least 0.5 pixel.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.registry import Registry
from vcbench.robustness import crack
from vcbench.robustness import imageops

SEVERITIES = (1, 2, 3, 4, 5)
REFERENCE_SIZE = 224  # RobustNav's camera: spatial parameters are defined at this size.


@dataclasses.dataclass(frozen=True)
class Corruption:
  """A registered corruption: `fn(key, image, severity, *, scale=None)` (see the module
  docstring), its valid severities, whether it ignores its key, one line about it, and whether
  an env draws it once per scene (a cracked lens stays cracked) rather than per frame."""
  name: str
  fn: Callable[..., jax.Array]
  severities: tuple[int, ...]
  deterministic: bool
  description: str
  per_scene: bool = False


CORRUPTIONS = Registry("visual corruption")


def _check_severity(name: str, severity, severities=SEVERITIES) -> None:
  if (isinstance(severity, bool) or not isinstance(severity, (int, np.integer))
      or int(severity) not in severities):
    raise ValueError(f"{name}: severity must be a static Python int in {severities[0]}.."
                     f"{severities[-1]}, got {severity!r}.")


def _check(name: str, image, severity, severities=SEVERITIES) -> None:
  _check_severity(name, severity, severities)
  shape, dtype = getattr(image, "shape", None), getattr(image, "dtype", None)
  if shape is None or len(shape) != 3 or shape[-1] != 3 or dtype != jnp.uint8:
    raise ValueError(f"{name}: expected a uint8 image of shape [H, W, 3], got dtype {dtype} "
                     f"and shape {shape}.")


def _resolve_scale(name: str, image, scale) -> float:
  if scale is None:
    return min(image.shape[:2]) / REFERENCE_SIZE
  if not scale > 0:
    raise ValueError(f"{name}: scale must be positive, got {scale!r}.")
  return float(scale)


def corruption(name: str, fn: Callable[..., jax.Array], *, deterministic: bool,
               description: str, severities: tuple[int, ...] = SEVERITIES,
               per_scene: bool = False) -> Corruption:
  """`fn(key, image, severity, *, scale, **kw)` (scale already resolved to a float) as a
  checked `Corruption` (see the module docstring); `register` adds one to CORRUPTIONS."""
  @functools.wraps(fn)
  def checked(key, image, severity, *, scale=None, **kwargs):
    _check(name, image, severity, severities)
    return fn(key, image, int(severity), scale=_resolve_scale(name, image, scale), **kwargs)
  return Corruption(name, checked, tuple(severities), deterministic, description, per_scene)


def register(name: str, *, deterministic: bool, description: str,
             severities: tuple[int, ...] = SEVERITIES, per_scene: bool = False):
  """Decorates `fn` into a `corruption` registered in CORRUPTIONS under `name`; returns the
  checked function."""
  def decorate(fn):
    c = corruption(name, fn, deterministic=deterministic, description=description,
                   severities=severities, per_scene=per_scene)
    CORRUPTIONS.register(name)(c)
    return c.fn
  return decorate


def get(name: str) -> Corruption:
  """The registered corruption `name`; an error listing the valid names otherwise."""
  return CORRUPTIONS.get(name)


@dataclasses.dataclass(frozen=True)
class VisualHook:
  """The `NavEnv.visual` hook applying one registered corruption (hashable: jit-static).

  Its randomness comes from (seed, episode, step), so every agent meets the same corruption on
  the same frame; a `per_scene` corruption from (seed, scene) instead."""
  name: str
  severity: int
  seed: int = 0

  def __call__(self, scene, episode, step, rgb):
    fold = jax.random.fold_in
    key = jax.random.key(self.seed)
    corruption = get(self.name)
    key = (fold(fold(key, 0), scene) if corruption.per_scene
           else fold(fold(fold(key, 1), episode), step))
    return corruption.fn(key, rgb, self.severity)


def corrupt(env, name: str, severity: int, seed: int = 0):
  """`env` (a NavEnv) whose RGB frames are corrupted by `name` at `severity` (as
  `dynamics.corrupt` corrupts its actions)."""
  _check_severity(name, severity, get(name).severities)
  if "rgb" not in env.sensors:
    raise ValueError(f"{name} corrupts RGB but the env renders {env.sensors}")
  return env.replace(visual=VisualHook(name, int(severity), seed))


@functools.lru_cache(maxsize=None)
def _batched(name: str, severity: int, scale: float | None):
  fn = functools.partial(get(name).fn, severity=severity, scale=scale)
  return jax.jit(jax.vmap(fn))


def apply(name: str, key: jax.Array, images: jax.Array, severity: int, *,
          scale: float | None = None) -> jax.Array:
  """Corrupts a batch of images [B, H, W, 3] with per-image keys split from `key` (jitted
  once per name, severity and scale)."""
  if getattr(images, "ndim", None) != 4:
    raise ValueError(f"apply({name!r}): expected images [B, H, W, 3], got shape "
                     f"{getattr(images, 'shape', None)}.")
  get(name)
  return _batched(name, severity, scale)(jax.random.split(key, images.shape[0]), images)


def _to_uint8(x: jax.Array) -> jax.Array:
  """Floats on the [0, 255] scale -> uint8 by clipping and truncation, as np.uint8 does."""
  return jnp.floor(jnp.clip(x, 0.0, 255.0)).astype(jnp.uint8)


def _round_uint8(x: jax.Array) -> jax.Array:
  return jnp.round(jnp.clip(x, 0.0, 255.0)).astype(jnp.uint8)


def _unit(image: jax.Array) -> jax.Array:
  return image.astype(jnp.float32) / 255.0


# ---------------------------------------------------------------------------------------------
# ImageNet-C corruptions RobustNav uses (imagecorruptions 1.1.2's parameters).

_DEFOCUS = ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5))  # (disk radius, alias blur)
_MOTION = ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15))       # (radius, sigma)
_SPECKLE = (0.15, 0.2, 0.35, 0.45, 0.6)
# (liquid mean, liquid std, blob sigma, wet threshold, intensity / mud sigma, mud?)
_SPATTER = ((0.65, 0.3, 4, 0.69, 0.6, False), (0.65, 0.3, 3, 0.68, 0.6, False),
            (0.65, 0.3, 2, 0.68, 0.5, False), (0.65, 0.3, 1, 0.65, 1.5, True),
            (0.67, 0.4, 1, 0.65, 1.5, True))
# imagecorruptions names these BGR, but it adds them to the array's channels in order, so on
# an RGB image water is (175, 238, 238), pale turquoise, and mud (63, 42, 20), brown.
_WATER = np.array([175, 238, 238], np.float32) / 255.0
_MUD = np.array([63, 42, 20], np.float32) / 255.0
_EMBOSS = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], np.float32)
_LIGHTING = (0.1, 0.2, 0.3, 0.4, 0.5)


@register("defocus_blur", deterministic=True,
          description="ImageNet-C defocus: an antialiased disk kernel (radius 3-10 px at 224)")
def defocus_blur(key, image, severity, *, scale):
  """The disk kernel filtered over every channel with BORDER_REFLECT_101 (cv2.filter2D)."""
  del key
  kernel = imageops.disk_kernel(*_DEFOCUS[severity - 1], scale=scale)
  blurred = imageops.correlate(_unit(image), kernel)
  return _to_uint8(jnp.clip(blurred, 0.0, 1.0) * 255.0)


def _motion_blur(image: jax.Array, severity: int, angle, scale: float) -> jax.Array:
  """imagecorruptions' `_motion_blur`: gaussian-weighted copies of the image shifted by whole
  pixels along `angle` (degrees), edges replicated; it stops at the first shift that leaves
  the image."""
  radius, sigma = _MOTION[severity - 1]
  radius, sigma = max(1, round(radius * scale)), sigma * scale
  width = 2 * radius + 1
  weights = np.exp(-np.arange(width) ** 2 / (2 * sigma ** 2))
  weights /= weights.sum()
  a = jnp.deg2rad(jnp.asarray(angle, jnp.float32))
  py, px = width * jnp.sin(a), width * jnp.cos(a)
  hypot = jnp.hypot(py, px)
  i = jnp.arange(width, dtype=jnp.float32)
  dy = -jnp.ceil(i * py / hypot - 0.5).astype(jnp.int32)
  dx = -jnp.ceil(i * px / hypot - 0.5).astype(jnp.int32)
  h, w = image.shape[:2]
  inside = jnp.cumprod((jnp.abs(dy) < h) & (jnp.abs(dx) < w)).astype(jnp.float32)
  padded = jnp.pad(image.astype(jnp.float32), ((width, width), (width, width), (0, 0)),
                   mode="edge")
  blurred = jnp.zeros(image.shape, jnp.float32)
  # Unrolled, the copies fuse into one pass over the image; a scan would read and write the
  # whole accumulator once per copy (2x slower at batch 64).
  for j in range(width):
    copy = jax.lax.dynamic_slice(padded, (width - dy[j], width - dx[j], 0), image.shape)
    blurred = blurred + float(weights[j]) * inside[j] * copy
  return _to_uint8(blurred)


@register("motion_blur", deterministic=False,
          description="ImageNet-C motion blur along a random angle in [-45, 45] degrees")
def motion_blur(key, image, severity, *, scale):
  angle = jax.random.uniform(key, (), minval=-45.0, maxval=45.0)
  return _motion_blur(image, severity, angle, scale)


def motion_blur_at_angle(image: jax.Array, severity: int, angle,
                         scale: float | None = None) -> jax.Array:
  """`motion_blur` at a given angle (degrees) instead of a random one."""
  _check("motion_blur_at_angle", image, severity)
  return _motion_blur(image, int(severity), angle,
                      _resolve_scale("motion_blur_at_angle", image, scale))


@register("speckle_noise", deterministic=False,
          description="ImageNet-C speckle: x + x * N(0, c), c = 0.15-0.6")
def speckle_noise(key, image, severity, *, scale):
  del scale
  x = _unit(image)
  noisy = x + x * jax.random.normal(key, x.shape) * _SPECKLE[severity - 1]
  return _to_uint8(jnp.clip(noisy, 0.0, 1.0) * 255.0)


def _water(liquid: jax.Array, intensity: float, scale: float) -> jax.Array:
  """ImageNet-C's water droplet strength [H, W] in [0, intensity]: the distance to the
  droplets' Canny edges, equalised and embossed, times the liquid layer."""
  layer = jnp.floor(jnp.clip(liquid * 255.0, 0.0, 255.0))
  edges = imageops.canny(layer.astype(jnp.uint8), 50, 150)
  dist = jnp.floor(imageops.box_blur3(imageops.truncated_distance(edges, 20.0 * scale)))
  dist = imageops.equalize_hist(dist.astype(jnp.uint8)).astype(jnp.float32)
  dist = jnp.clip(jnp.round(imageops.correlate(dist, _EMBOSS)), 0.0, 255.0)  # CV_8U saturates.
  dist = jnp.round(imageops.box_blur3(dist))  # cv2.blur of a uint8 image rounds.
  m = layer * dist
  return m / jnp.maximum(jnp.max(m), 1e-6) * intensity  # No liquid at all: no spatter.


def _mud(wet: jax.Array, sigma: float) -> jax.Array:
  """ImageNet-C's mud opacity [H, W]: the wet mask smoothed, faint parts dropped."""
  m = imageops.gaussian_filter(wet.astype(jnp.float32), sigma)
  return jnp.where(m < 0.8, 0.0, m)


@register("spatter", deterministic=False,
          description="ImageNet-C spatter: water droplets (severity 1-3), mud (4-5)")
def spatter(key, image, severity, *, scale):
  """The liquid layer comes from `key`; see `_water` and `_mud` for the two looks.

  Below scale 2/3 the layer and the mask are drawn k = round(1 / scale) times finer (at 32^2
  exactly the reference's 224^2) and averaged over k x k blocks: a blob sigma of a fraction of
  a pixel cannot be drawn directly (at 32^2 mud would cover 4x the reference's area).
  """
  mean, std, sigma, threshold, intensity, mud = _SPATTER[severity - 1]
  k = max(1, round(1.0 / scale))
  h, w = image.shape[:2]
  scale *= k
  std *= imageops.noise_gain(sigma) / imageops.noise_gain(sigma * scale)
  liquid = mean + std * jax.random.normal(key, (h * k, w * k))
  liquid = imageops.gaussian_filter(liquid, sigma * scale)
  liquid = jnp.where(liquid < threshold, 0.0, liquid)
  m = _mud(liquid > threshold, intensity * scale) if mud else _water(liquid, intensity, scale)
  m = m.reshape(h, k, w, k).mean(axis=(1, 3))[..., None]
  x = _unit(image)
  out = x * (1.0 - m) + m * _MUD if mud else x + m * _WATER
  return _to_uint8(jnp.clip(out, 0.0, 1.0) * 255.0)


# ---------------------------------------------------------------------------------------------
# RobustNav's own corruptions.

@register("low_lighting", deterministic=True,
          description="RobustNav lighting: HSV value lowered by 0.1-0.5")
def low_lighting(key, image, severity, *, scale):
  del key, scale
  hsv = imageops.rgb_to_hsv(_unit(image))
  v = jnp.clip(hsv[..., 2] - _LIGHTING[severity - 1], 0.0, 1.0)
  rgb = imageops.hsv_to_rgb(hsv.at[..., 2].set(v))
  return _to_uint8(jnp.clip(rgb, 0.0, 1.0) * 255.0)


@register("lower_fov", deterministic=True,
          description="narrower field of view (79 -> 39.5 degrees) by centre crop and resize")
def lower_fov(key, image, severity, *, scale, hfov: float = 79.0, target_hfov: float = 39.5):
  """The view a camera of `target_hfov` degrees would see, cropped from the centre of this
  `hfov` one (a fraction tan(target_hfov / 2) / tan(hfov / 2) of its width and height, sub-pixel
  exact) and resized back bilinearly without antialiasing. RobustNav has one level, so
  `severity` does not change the output, nor does `scale`. vcbench-nav renders at the narrower
  field of view instead (an env setting); this stands in for envs without a camera model."""
  del key, severity, scale
  if not 0.0 < target_hfov < hfov < 180.0:
    raise ValueError(f"lower_fov: need 0 < target_hfov < hfov < 180 degrees, got "
                     f"hfov={hfov}, target_hfov={target_hfov}.")
  zoom = math.tan(math.radians(hfov) / 2) / math.tan(math.radians(target_hfov) / 2)
  h, w = image.shape[:2]
  out = jax.image.scale_and_translate(
      image.astype(jnp.float32), image.shape, (0, 1), jnp.array([zoom, zoom]),
      jnp.array([h / 2 * (1 - zoom), w / 2 * (1 - zoom)]), method="linear", antialias=False)
  return _round_uint8(out)


def crack_layers(key: jax.Array, shape: tuple[int, int], severity: int,
                 scale: float | None = None) -> dict[str, jax.Array]:
  """`camera_crack`'s crack for an image of `shape` (H, W), independent of the image: dark
  core and light rim opacities [H, W] and the refraction's sampling offset [2, H, W] (pixels).

  A key draws the same crack every time, so an env can draw it once per episode and apply it
  to every frame with `apply_crack` (`camera_crack` does both).
  """
  _check_severity("crack_layers", severity)
  scale = min(shape) / REFERENCE_SIZE if scale is None else scale
  keys = jax.vmap(jax.random.fold_in, (None, 0))(key, jnp.arange(int(severity)))
  impacts = jax.vmap(lambda k: crack.impact(k, shape, scale))(keys)
  u = crack.distance(*(a.reshape(-1, *a.shape[2:]) for a in impacts), shape)
  core = jnp.clip(1.5 - u, 0.0, 1.0)  # Antialiased: opaque within 0.5 half-widths, none past 1.5.
  rim = jnp.exp(-(u - 2.5) ** 2) * (1.0 - core)
  ridge = jnp.stack(jnp.gradient(jnp.exp(-(u / 3.0) ** 2)))  # The glass bulges along a crack.
  return {"core": core, "rim": rim, "shift": crack.REFRACTION * scale * ridge}


def apply_crack(image: jax.Array, layers: dict[str, jax.Array]) -> jax.Array:
  """Draws `crack_layers` onto a uint8 image [H, W, 3] of their shape."""
  grid = jnp.meshgrid(jnp.arange(image.shape[0]), jnp.arange(image.shape[1]), indexing="ij")
  coords = [grid[0] + layers["shift"][0], grid[1] + layers["shift"][1]]
  x = image.astype(jnp.float32)
  seen = jnp.stack([jax.scipy.ndimage.map_coordinates(x[..., c], coords, order=1,
                                                      mode="nearest") for c in range(3)], -1)
  seen = seen + 0.35 * layers["rim"][..., None] * (235.0 - seen)
  return _round_uint8(seen + 0.85 * layers["core"][..., None] * (20.0 - seen))


@register("camera_crack", deterministic=False, per_scene=True,
          description="procedural cracked lens: `severity` impact points with radial cracks")
def camera_crack(key, image, severity, *, scale):
  """Cracked camera glass: from each of `severity` impact points (impact i from
  fold_in(key, i), so a higher severity adds cracks to the lower ones') radial cracks random-
  walk outwards, each sprouting a branch. A crack is a dark antialiased core with a light rim,
  and the glass ridge along it refracts the view slightly. RobustNav fixes its crack per
  scene with a seed: pass a key derived from the scene (or draw `crack_layers` once)."""
  return apply_crack(image, crack_layers(key, image.shape[:2], severity, scale))
