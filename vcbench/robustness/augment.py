"""Training-time image augmentation, RobustNav's "Nav loss + Data Aug" baseline (Table 3).

    image = augment.augment(key, image)                 # uint8 [H, W, 3] -> uint8 [H, W, 3]
    env = augment.augmented(train_env, seed=0)          # every RGB frame the agent sees

RobustNav names the three operations (random crop, random shift, colour jitter) but not their
parameters; these are the common ones of pixel RL: DrQ's random shift (replicate-pad 4 px at
84 px, i.e. 4.8% of the side, then crop back), a random crop keeping 80-100% of the side
resized back to the full frame, and torchvision's ColorJitter(0.4, 0.4, 0.4) (brightness,
contrast and saturation factors uniform in [0.6, 1.4]). Each frame gets its own draw.
Pure JAX and jittable; `vmap` batches.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

SHIFT_FRACTION = 4 / 84
CROP_SCALE = (0.8, 1.0)
JITTER = 0.4
LUMA = (0.299, 0.587, 0.114)   # torchvision's rgb_to_grayscale weights


def random_shift(key, image: jax.Array, fraction: float = SHIFT_FRACTION) -> jax.Array:
  """Replicate-pads by `fraction` of the side and crops back at a random offset."""
  h, w, _ = image.shape
  pad = max(1, round(fraction * max(h, w)))
  padded = jnp.pad(image, ((pad, pad), (pad, pad), (0, 0)), mode="edge")
  dy, dx = jax.random.randint(key, (2,), 0, 2 * pad + 1)
  return jax.lax.dynamic_slice(padded, (dy, dx, 0), (h, w, image.shape[2]))


def random_crop(key, image: jax.Array, scale: tuple[float, float] = CROP_SCALE) -> jax.Array:
  """A random square-ratio crop keeping `scale` of each side, resized back (bilinear)."""
  h, w, c = image.shape
  k_size, k_y, k_x = jax.random.split(key, 3)
  s = jax.random.uniform(k_size, (), minval=scale[0], maxval=scale[1])
  y0 = jax.random.uniform(k_y) * (1.0 - s) * h
  x0 = jax.random.uniform(k_x) * (1.0 - s) * w
  # The crop as a scale-and-translate of the sampling grid, so the crop size may be traced.
  return jax.image.scale_and_translate(
      image.astype(jnp.float32), (h, w, c), (0, 1), jnp.array([1.0 / s, 1.0 / s]),
      jnp.array([-y0 / s, -x0 / s]), method="linear", antialias=False)


def colour_jitter(key, image: jax.Array, strength: float = JITTER) -> jax.Array:
  """Brightness, contrast and saturation factors in [1 - strength, 1 + strength], random order
  as torchvision (here a fixed order: the three commute up to clipping)."""
  kb, kc, ks = jax.random.split(key, 3)
  factor = lambda k: jax.random.uniform(k, (), minval=1.0 - strength, maxval=1.0 + strength)
  luma = lambda x: x @ jnp.array(LUMA, jnp.float32)
  x = image.astype(jnp.float32)
  x = jnp.clip(x * factor(kb), 0.0, 255.0)
  mean = jnp.mean(luma(x))
  x = jnp.clip(mean + factor(kc) * (x - mean), 0.0, 255.0)
  grey = luma(x)
  return jnp.clip(grey[..., None] + factor(ks) * (x - grey[..., None]), 0.0, 255.0)


def augment(key, image: jax.Array) -> jax.Array:
  """Crop, shift and colour jitter of one uint8 image; returns uint8 of the same shape."""
  if image.dtype != jnp.uint8 or image.ndim != 3 or image.shape[-1] != 3:
    raise ValueError(f"augment: expected a uint8 [H, W, 3] image, got {image.dtype} "
                     f"{tuple(image.shape)}")
  k_crop, k_shift, k_jitter = jax.random.split(key, 3)
  x = random_crop(k_crop, image)
  x = random_shift(k_shift, x)
  x = colour_jitter(k_jitter, x)
  return jnp.round(x).astype(jnp.uint8)


@dataclasses.dataclass(frozen=True)
class Augment:
  """The `NavEnv.visual` hook that augments every frame (a fresh draw per episode and step)."""
  seed: int = 0

  def __call__(self, scene, episode, step, rgb):
    del scene
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(self.seed), episode), step)
    return augment(key, rgb)


def augmented(env, seed: int = 0):
  """`env` whose RGB observations are augmented (for training; evaluation stays clean)."""
  return env.replace(visual=Augment(seed))
