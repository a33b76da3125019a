"""Differentiating an encoder over many frames with bounded activation memory.

Fine-tuning runs the encoder's backward pass over every frame of a minibatch: ViT-B/16 at
224 px on 768 frames (CortexBench BC's batch 256 x history 3) holds 128 GiB of activations at
once. `apply_in_chunks` runs it a chunk at a time under `jax.checkpoint`, so the backward pass
recomputes one chunk's forward at a time (11 GiB in chunks of 64), for one more forward pass.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp


def apply_in_chunks(fn: Callable[[Any, jax.Array], jax.Array], params, images: jax.Array,
                    chunk: Optional[int]) -> jax.Array:
  """fn(params, images) [N, ...], computed `chunk` frames at a time (rematerialised in the
  backward pass) when N > chunk; None: all at once, as `fn` itself.

  Chunk i takes frames i, i + K, i + 2K, ... (K chunks) rather than a contiguous block: when
  the frames are sharded over devices in contiguous blocks, every chunk then spans all devices
  and they all work on each one."""
  n = images.shape[0]
  if chunk is None or n <= chunk:
    return fn(params, images)
  pad = -n % chunk
  if pad:
    images = jnp.concatenate([images, jnp.repeat(images[:1], pad, axis=0)])
  k = images.shape[0] // chunk
  strided = jnp.swapaxes(images.reshape(chunk, k, *images.shape[1:]), 0, 1)
  out = jax.lax.map(jax.checkpoint(lambda x: fn(params, x)), strided)
  return jnp.swapaxes(out, 0, 1).reshape(k * chunk, *out.shape[2:])[:n]
