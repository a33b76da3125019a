"""The manipulation decoder's transport: one training gradient step as vcbench writes it
(rotated crops as an einsum of tent weights, the correlation as a matmul over shifted maps)
vs XLA's convolution and per-point bilinear gathers (`map_coordinates`).

  python -m launch.bench.affordance [--batch=8] [--grid=56] [--repeats=5]

Both on the same key/query maps (the quick protocol's shapes: a 56 x 56 grid for 224-pixel
images, 16 transport channels, 36 rotations, a 9-cell crop); timed round-robin, medians.
"""
from __future__ import annotations

import statistics

import jax
import jax.numpy as jnp
from absl import flags

from launch import cli
from launch.bench import timing
from vcbench.models import affordance

_BATCH = flags.DEFINE_integer("batch", 8, "examples per step")
_GRID = flags.DEFINE_integer("grid", 56, "cells per side of the affordance map")
_REPEATS = flags.DEFINE_integer("repeats", 5, "timed steps per variant")
N_ROT, CROP, DIM = 36, 9, 16


def gather_crops(query, center, n_rotations, crop):
  rows, cols = affordance._rotated_offsets(center, n_rotations, crop)
  sample = lambda ch: jax.scipy.ndimage.map_coordinates(ch, [rows, cols], order=1,
                                                        mode="constant")
  return jax.vmap(sample, in_axes=-1, out_axes=-1)(query)


def grad_step(crops_fn, correlate_fn):
  def loss(kq, pick):
    k, q = kq
    out = jax.vmap(lambda a, b, p: correlate_fn(a, crops_fn(b, p, N_ROT, CROP)))(k, q, pick)
    return jax.nn.logsumexp(out.reshape(out.shape[0], -1), -1).mean()
  return jax.jit(jax.grad(loss))


def main(argv):
  del argv
  keys = jax.random.split(jax.random.key(0), 3)
  shape = (_BATCH.value, _GRID.value, _GRID.value, DIM)
  kq = (jax.random.normal(keys[0], shape), jax.random.normal(keys[1], shape))
  pick = jax.random.uniform(keys[2], (_BATCH.value, 2), maxval=_GRID.value - 1)
  variants = {"einsum crops, shifted-matmul correlation (vcbench)":
              (affordance.rotated_crops, affordance.correlate),
              "einsum crops, convolution": (affordance.rotated_crops, affordance.correlate_conv),
              "gathered crops, convolution": (gather_crops, affordance.correlate_conv)}
  fns = {name: (lambda f=grad_step(*fn): f(kq, pick)) for name, fn in variants.items()}
  times = timing.interleaved(fns, _REPEATS.value)
  med = {k: statistics.median(v) for k, v in times.items()}
  base = next(iter(med.values()))
  print("| transport | s/step (median) | vs vcbench's |\n|:--|--:|--:|")
  for k, v in med.items():
    print(f"| {k} | {v:.3f} | {v / base:.1f}x |")


if __name__ == "__main__":
  cli.run(main)
