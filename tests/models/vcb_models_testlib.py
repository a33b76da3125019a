"""Helpers for the PyTorch-parity tests of vcbench.models (imported by the tests here).

Every parity test follows one recipe: build the reference PyTorch module,
randomise *all* of its floating tensors (LayerNorm/BatchNorm affine parameters
and BatchNorm running statistics included, so a transpose or a BN-folding bug
cannot hide behind an identity initialisation), save its state dict with
`torch.save`, load it through the real vcbench path and compare outputs on the
same random input with the max relative error max|a - b| / max|b|.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.models import convert

RTOL = 1e-5  # max|a - b| / max|b| in float32.


def rel_err(a, b) -> float:
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  assert a.shape == b.shape, (a.shape, b.shape)
  return float(np.abs(a - b).max() / np.abs(b).max())


def assert_close(a, b, what: str = "", rtol: float = RTOL) -> None:
  err = rel_err(a, b)
  assert err <= rtol, f"{what}: max relative error {err:.3g} > {rtol:g}"


def randomize_(model, seed: int = 0):
  """Perturbs every floating parameter and buffer of a torch module, in place."""
  import torch  # pylint: disable=g-import-not-at-top
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    named = list(model.named_parameters()) + list(model.named_buffers())
    for name, t in named:
      if not t.dtype.is_floating_point:
        continue
      noise = torch.randn(t.shape, generator=gen, dtype=t.dtype)
      if name.endswith("running_var"):
        t.copy_(0.5 + torch.rand(t.shape, generator=gen, dtype=t.dtype))
      elif name.endswith("running_mean"):
        t.copy_(0.2 * noise)
      elif t.ndim <= 1:       # Norm scales (around 1) and biases (around 0).
        t.add_(0.2 * noise)
      else:                   # Kernels, embeddings, tokens, projections.
        t.add_(0.02 * noise)
  return model.eval()


def nchw(x: np.ndarray):
  import torch  # pylint: disable=g-import-not-at-top
  return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))


def to_nhwc(t) -> np.ndarray:
  return t.detach().permute(0, 2, 3, 1).numpy()


def images(batch: int, size: int, seed: int = 0) -> np.ndarray:
  """Preprocessed-looking float32 NHWC input."""
  return np.random.RandomState(seed).randn(batch, size, size, 3).astype(np.float32)


def expected_tree(module, size: int):
  return jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((1, size, size, 3)))


def save_state(state: dict, path) -> str:
  import torch  # pylint: disable=g-import-not-at-top
  torch.save(state, str(path))
  return str(path)


def convert_file(path, layout, module, size: int):
  """The real conversion path: read the file, audit and map it onto `module`."""
  flat = convert.read_checkpoint(str(path))
  return convert.convert_state(flat, layout, expected_tree(module, size), source=str(path))


@functools.lru_cache(maxsize=None)
def jit_apply(module):
  """One compiled `module.apply` per module configuration (shared across tests)."""
  return jax.jit(module.apply)


def run(module, variables, x):
  outputs, intermediates = jit_apply(module)(variables, x)
  return jax.tree.map(np.asarray, outputs), jax.tree.map(np.asarray, intermediates)
