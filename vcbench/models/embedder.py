"""A frozen PVR as a function of observations: the "embedding" BC and RL policies consume.

An `Embedder` is either a zoo encoder applied to `obs['rgb']` (its own preprocessing, its
`cls` output) or the state oracle, which passes `obs['state']` (simulator state: hand,
gripper, object poses, goal) through unchanged: the upper-bound baseline a PVR is compared
with. `fingerprint` identifies the function exactly (name, input size, a hash of the
weights), so cached embeddings are never reused across PVR versions.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.models import zoo
from vcbench.progress import progress

STATE_ORACLE = "state_oracle"


@dataclasses.dataclass(frozen=True)
class Embedder:
  name: str
  obs_key: str
  dim: int
  params: Any
  fn: Callable[[Any, dict], jax.Array]   # (params, obs dict) -> [B, dim]; pure, jittable.
  fingerprint: str

  @functools.cached_property
  def batch_fn(self) -> Callable[[Any, np.ndarray], jax.Array]:
    """`fn` jitted over a batch of raw `obs_key` values; compiled once per embedder, so every
    task's demos reuse it."""
    return jax.jit(lambda params, x: self.fn(params, {self.obs_key: x}))


def names() -> list[str]:
  return [STATE_ORACLE, *zoo.names()]


def _weights_digest(params) -> str:
  h = hashlib.sha256()
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    h.update(jax.tree_util.keystr(path).encode())
    h.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
  return h.hexdigest()[:16]


def make(name: str, *, state_dim: int, img_size: int | None = None,
         checkpoint: str | None = None, seed: int = 0) -> Embedder:
  """The embedder `name`: 'state_oracle' or a zoo entry (unknown names list the valid ones)."""
  if name == STATE_ORACLE:
    return Embedder(name=name, obs_key="state", dim=state_dim, params={},
                    fn=lambda params, obs: jnp.asarray(obs["state"], jnp.float32),
                    fingerprint=f"{STATE_ORACLE}/{state_dim}")
  if name not in zoo.names():
    raise ValueError(f"unknown PVR {name!r}; valid: {names()}")
  encoder = zoo.load(name, checkpoint=checkpoint, img_size=img_size, seed=seed)
  return of_encoder(name, encoder)


def of_encoder(name: str, encoder: zoo.Encoder, *, params: Any = None,
               fingerprint: str | None = None) -> Embedder:
  """The embedder of a loaded zoo encoder: its `cls` output on `obs['rgb']`, with `params`
  (default the encoder's) and `fingerprint` (default: name, input size, weights digest)."""
  params = encoder.params if params is None else params
  # Closes over the module and preprocessing only: the weights are always an argument.
  stripped = zoo.Encoder(encoder.module, None, encoder.preprocess)

  def fn(params, obs):
    return stripped.apply(params, obs["rgb"])["cls"].astype(jnp.float32)

  size = encoder.preprocess.size
  dim = jax.eval_shape(fn, params,
                       {"rgb": jax.ShapeDtypeStruct((1, size, size, 3), jnp.uint8)}).shape[-1]
  if fingerprint is None:
    fingerprint = f"{name}/{size}/{_weights_digest(params)}"
  return Embedder(name=name, obs_key="rgb", dim=int(dim), params=params, fn=fn,
                  fingerprint=fingerprint)


def embed_all(embedder: Embedder, values: np.ndarray, batch_size: int = 64,
              desc: str = "embed") -> np.ndarray:
  """Embeds `values` (frames or states) in fixed-size batches (one compile; the last batch is
  padded)."""
  fn = embedder.batch_fn
  out = []
  for start in progress(range(0, len(values), batch_size), desc=desc):
    chunk = values[start:start + batch_size]
    pad = batch_size - len(chunk)
    if pad:
      chunk = np.concatenate([chunk, np.repeat(chunk[-1:], pad, axis=0)])
    out.append(np.asarray(fn(embedder.params, chunk))[: batch_size - pad])
  return np.concatenate(out) if out else np.zeros((0, embedder.dim), np.float32)
