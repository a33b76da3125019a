"""A 2-D convolution whose kernel gradient stays fast inside XLA:CPU loops.

On XLA:CPU (jaxlib 0.10) the kernel gradient of a convolution -- a convolution that contracts
over the batch -- runs 20-90x slower inside a `while` loop than outside one, so a training loop
written as `lax.scan` over SGD steps (PPO, BC over sequences) spends nearly all its time there.
`python -m launch.bench.conv_grad --repeats 1` on the quiet machine (2026-12-02) gave, for
habitat's SimpleCNN layers on 2048 maps, 23x, 85x and 88x slowdowns (e.g. the 4x4/2 layer on
8x8x32 maps: 0.026 s outside a loop, 2.2 s per step inside; 0.051 s inside with `conv2d`).
`conv2d` keeps XLA's forward and input gradient and computes the kernel gradient as one matmul
over patches cut with strided slices, which is as fast inside a loop as outside. Numerically it is the same
convolution (tests/models/test_trainable_conv.py checks values and both gradients).
"""
from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

_DN = ("NHWC", "HWIO", "NHWC")


def _same_pads(size: int, out: int, kernel: int, stride: int) -> tuple[int, int]:
  total = max((out - 1) * stride + kernel - size, 0)
  return total // 2, total - total // 2


def _pads(x_shape, k_shape, stride: int, padding):
  """Explicit (lo, hi) pads per spatial dim for 'SAME', 'VALID' or an int."""
  if isinstance(padding, int):
    return ((padding, padding), (padding, padding))
  if padding == "VALID":
    return ((0, 0), (0, 0))
  if padding != "SAME":
    raise ValueError(f"conv2d: padding must be 'SAME', 'VALID' or an int, got {padding!r}")
  return tuple(_same_pads(x_shape[d], -(-x_shape[d] // stride), k_shape[d - 1], stride)
               for d in (1, 2))


def _forward(x, w, stride, pads):
  return jax.lax.conv_general_dilated(x, w, (stride, stride), pads, dimension_numbers=_DN)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _conv(x, w, stride: int, pads):
  return _forward(x, w, stride, pads)


def _conv_fwd(x, w, stride, pads):
  return _forward(x, w, stride, pads), (x, w)


def _conv_bwd(stride, pads, res, dy):
  x, w = res
  kh, kw, cin, cout = w.shape
  _, vjp_x = jax.vjp(lambda x: _forward(x, w, stride, pads), x)
  (dx,) = vjp_x(dy)
  ho, wo = dy.shape[1], dy.shape[2]
  xp = jnp.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
  cols = [xp[:, i:i + (ho - 1) * stride + 1:stride, j:j + (wo - 1) * stride + 1:stride, :]
          for i in range(kh) for j in range(kw)]
  patches = jnp.stack(cols, axis=3)                      # [N, ho, wo, kh*kw, cin]
  dw = jnp.einsum("nhwkc,nhwf->kcf", patches, dy).reshape(kh, kw, cin, cout)
  return dx, dw.astype(w.dtype)


_conv.defvjp(_conv_fwd, _conv_bwd)


def conv2d(x: jax.Array, w: jax.Array, stride: int = 1, padding="SAME") -> jax.Array:
  """NHWC x HWIO convolution, `padding` 'SAME', 'VALID' or a symmetric int."""
  return _conv(x, w, int(stride), _pads(x.shape, w.shape, int(stride), padding))


class Conv(nn.Module):
  """`nn.Conv`'s parameters (kernel HWIO, bias) and initialisers, with `conv2d` inside."""
  features: int
  kernel_size: tuple[int, int]
  strides: int = 1
  padding: object = "SAME"
  use_bias: bool = True
  kernel_init: object = nn.initializers.lecun_normal()

  @nn.compact
  def __call__(self, x):
    kh, kw = self.kernel_size
    w = self.param("kernel", self.kernel_init, (kh, kw, x.shape[-1], self.features))
    y = conv2d(x, w.astype(x.dtype), self.strides, self.padding)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,)).astype(y.dtype)
    return y
