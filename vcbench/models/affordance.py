"""G-VUE's manipulation decoder: CLIPort's pick and place affordances on a frozen PVR.

CLIPort (Shridhar et al., 2021) predicts where to pick as a heatmap over the top-down image
(the attention stream) and where to place, at which of `n_rotations` angles, by correlating
features of a crop around the pick point, rotated, with features of the whole image (the
transport stream); language enters by tiling the sentence's features over the image and
multiplying them in. G-VUE keeps CLIPort's semantic stream on the PVR's feature pyramid and
drops its spatial (depth) stream so only the PVR's features carry the image.

`AffordanceDecoder` here, on the pyramid (strides 4-32) of the frozen PVR:
  * the instruction: its T token vectors (padding zeroed) flattened and mapped by a Linear and
    ReLU to one sentence vector (CLIPort takes CLIP's sentence embedding). A mean over tokens
    would not do: "put the red blocks in a green bowl" and "put the green blocks in a red bowl"
    hold the same words, so their means are equal whatever the positions added to each token;
  * each level: Linear(C_i -> width) times Linear(sentence -> width) (CLIPort's `mult`
    fusion), resized bilinearly to the stride-4 grid;
    the levels concatenated coarsest first and fused by a Linear and ReLU (SegFormer's head);
  * three 1x1 heads on the fused map: pick logits [B, h, w], and the transport's key and query
    maps [B, h, w, transport_dim];
  * `place_logits`: the query map sampled bilinearly on a k x k grid around the pick point
    rotated by each of the n angles (`rotated_crops`), correlated with the key map ->
    [B, h, w, n_rotations] (object turned by angle r about the pick point: a feature at offset u
    from the pick lands at R(r) u from the place, so the kernel at v is query[pick + R(-r) v]).
Where this differs from CLIPort: both streams read features computed once on the full image
(CLIPort re-encodes the rotated crop with its own network; a frozen PVR would have to run once
per rotation), the affordances live on the stride-4 grid and are made precise below a cell by
soft labels and a local soft-argmax (`soft_target`, `refine`), and there is no BatchNorm
(CLIPort turns it off too: batch 1).
"""
from __future__ import annotations

import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vcbench.models import resize
from vcbench.models.gvue_decoders import check_pyramid


class AffordanceDecoder(nn.Module):
  """Pyramid + instruction -> (pick logits [B, h, w], key [B, h, w, D], query [B, h, w, D]).

  Intermediates: `fused`, the language-conditioned map."""
  width: int = 64
  transport_dim: int = 16
  sentence_dim: int = 256

  @nn.compact
  def __call__(self, pyramid: Sequence, text: jax.Array, text_mask: jax.Array, *,
               train: bool = False):
    del train
    check_pyramid(pyramid)
    size = tuple(pyramid[0].shape[1:3])
    tokens = text.astype(jnp.float32) * text_mask.astype(jnp.float32)[..., None]
    lang = nn.relu(nn.Dense(self.sentence_dim, name="sentence")(
        tokens.reshape(tokens.shape[0], -1)))
    levels = []
    for i, fmap in enumerate(pyramid):
      v = nn.Dense(self.width, name=f"visual_{i}")(fmap.astype(jnp.float32))
      g = nn.Dense(self.width, name=f"language_{i}")(lang)[:, None, None, :]
      levels.append(resize.resize_hw(v * g, size))
    fused = nn.relu(nn.Dense(self.width, name="fuse")(jnp.concatenate(levels[::-1], -1)))
    pick = nn.Dense(1, name="pick")(fused)[..., 0]
    key = nn.Dense(self.transport_dim, name="key")(fused)
    query = nn.Dense(self.transport_dim, name="query")(fused)
    return (pick, key, query), {"fused": fused}


def _rotated_offsets(center: jax.Array, n_rotations: int, crop: int):
  """Sample coordinates [n, k, k] (rows, cols): center + R(-2 pi r / n) v over the k x k
  offsets v."""
  half = (crop - 1) / 2
  offs = jnp.arange(crop, dtype=jnp.float32) - half
  vr, vc = jnp.meshgrid(offs, offs, indexing="ij")
  angles = -2 * jnp.pi * jnp.arange(n_rotations) / n_rotations
  cos, sin = jnp.cos(angles)[:, None, None], jnp.sin(angles)[:, None, None]
  return center[0] + cos * vr - sin * vc, center[1] + sin * vr + cos * vc


def rotated_crops(query: jax.Array, center: jax.Array, n_rotations: int, crop: int
                  ) -> jax.Array:
  """query [h, w, D], center (row, col) in grid cells -> kernels [n_rotations, k, k, D]:
  kernel r at offset v samples query at center + R(-2 pi r / n) v (bilinear, zero outside).

  Written as two tent-weight matrices contracted with the patch around the center (an einsum,
  whose gradient is one too) instead of per-point gathers; `test_affordance` checks it against
  `jax.scipy.ndimage.map_coordinates`."""
  reach = int(math.ceil((crop - 1) / 2 * math.sqrt(2))) + 2
  base = jnp.floor(center).astype(jnp.int32)
  padded = jnp.pad(query, ((reach, reach), (reach, reach), (0, 0)))
  size = 2 * reach + 1
  patch = jax.lax.dynamic_slice(padded, (base[0], base[1], 0), (size, size, query.shape[-1]))
  rows, cols = _rotated_offsets(center, n_rotations, crop)
  cells = jnp.arange(size, dtype=jnp.float32)
  wr = nn.relu(1 - jnp.abs((rows - base[0] + reach)[..., None] - cells))
  wc = nn.relu(1 - jnp.abs((cols - base[1] + reach)[..., None] - cells))
  return jnp.einsum("nabi,nabj,ijd->nabd", wr, wc, patch)


def correlate(key: jax.Array, kernels: jax.Array) -> jax.Array:
  """key [h, w, D] (x) kernels [n, k, k, D] -> [h, w, n]: at each cell p and rotation r, the
  sum over offsets v of key[p + v] . kernel_r[v] (zero padding).

  A matmul over the k*k shifted copies of the key map: XLA's CPU convolution with a kernel
  per example (what a vmapped `conv_general_dilated` becomes) is several times slower
  (`python -m launch.bench.affordance`)."""
  n, k = kernels.shape[:2]
  h, w, _ = key.shape
  half = k // 2
  padded = jnp.pad(key, ((half, k - 1 - half), (half, k - 1 - half), (0, 0)))
  shifts = jnp.stack([padded[a:a + h, b:b + w] for a in range(k) for b in range(k)], axis=2)
  return jnp.einsum("hwsd,nsd->hwn", shifts, kernels.reshape(n, k * k, -1))


def correlate_conv(key: jax.Array, kernels: jax.Array) -> jax.Array:
  """`correlate` as XLA's convolution (the reference its tests and benchmark compare with)."""
  out = jax.lax.conv_general_dilated(
      key[None], jnp.transpose(kernels, (1, 2, 3, 0)), (1, 1), "SAME",
      dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return out[0]


def place_logits(key: jax.Array, query: jax.Array, pick: jax.Array, n_rotations: int,
                 crop: int) -> jax.Array:
  """Batched transport: key, query [B, h, w, D], pick [B, 2] (grid cells) -> [B, h, w, n]."""
  def one(k, q, p):
    return correlate(k, rotated_crops(q, p, n_rotations, crop))
  return jax.vmap(one)(key, query, pick)


def soft_target(point: jax.Array, shape: tuple[int, int]) -> jax.Array:
  """A [h, w] map with the bilinear weights of the continuous cell coordinate `point` (row,
  col) on its four nearest cells: its expectation is `point`, so training on it keeps the
  target's sub-cell position."""
  h, w = shape
  p = jnp.clip(point, 0.0, jnp.array([h - 1.0, w - 1.0]))
  lo = jnp.floor(p)
  frac = p - lo
  lo = lo.astype(jnp.int32)
  hi = jnp.minimum(lo + 1, jnp.array([h - 1, w - 1]))
  out = jnp.zeros((h, w))
  for r, wr in ((lo[0], 1 - frac[0]), (hi[0], frac[0])):
    for c, wc in ((lo[1], 1 - frac[1]), (hi[1], frac[1])):
      out = out.at[r, c].add(wr * wc)
  return out


def refine(logits: jax.Array, valid: jax.Array) -> jax.Array:
  """[h, w] logits -> the continuous (row, col): the best valid cell, moved to the softmax
  mean over its 3 x 3 neighbourhood (the inverse of `soft_target`)."""
  h, w = logits.shape
  masked = jnp.where(valid, logits, -jnp.inf)
  best = jnp.argmax(masked)
  r, c = best // w, best % w
  rows = jnp.clip(r + jnp.arange(-1, 2), 0, h - 1)
  cols = jnp.clip(c + jnp.arange(-1, 2), 0, w - 1)
  win = masked[rows[:, None], cols[None, :]]
  p = jax.nn.softmax(win.reshape(-1)).reshape(3, 3)
  rr = jnp.broadcast_to(rows[:, None], (3, 3)).astype(jnp.float32)
  cc = jnp.broadcast_to(cols[None, :], (3, 3)).astype(jnp.float32)
  return jnp.stack([(p * rr).sum(), (p * cc).sum()])
