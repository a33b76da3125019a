"""A 2-D convolution whose gradients stay fast inside XLA:CPU loops.

On XLA:CPU (jaxlib 0.10) both gradients of a convolution run far slower inside a `while` loop
than outside one, so a training loop written as `lax.scan` over SGD steps (PPO, BC over
sequences) spends nearly all its time there. `python -m launch.bench.conv_grad --repeats 1` on
the quiet machine (2026-12-02) gave, for habitat's SimpleCNN layers on 2048 maps, 23x, 85x and
88x slowdowns of the kernel gradient (e.g. the 4x4/2 layer on 8x8x32 maps: 0.026 s outside a
loop, 2.2 s per step inside); the input gradient of the 3x3/1 layer on 8x8x64 maps took 0.38 s
per step inside a loop against 0.012 s for its forward pass.

`conv2d` keeps XLA's forward pass and computes both gradients through the stride-1 problem
that a space-to-depth rearrangement turns any strided convolution into: the (zero-padded to a
multiple of the stride) kernel and the padded input are cut into stride x stride blocks
stacked on the channel axis, so a k x k / s convolution becomes a ceil(k/s)^2 / 1 one. Its
input gradient is then a plain forward convolution of the output gradient with the flipped
kernel (fast in loops), and its kernel gradient one matmul per kernel tap over shifted slices
of the input. Numerically it is the same convolution (tests/models/test_trainable_conv.py
checks values and both gradients); `python -m launch.bench.conv_grad` times it.
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


def space_to_depth(x: jax.Array, s: int) -> jax.Array:
  """[N, H, W, C] (H, W multiples of s) -> [N, H/s, W/s, s*s*C], block rows then columns."""
  n, h, w, c = x.shape
  x = x.reshape(n, h // s, s, w // s, s, c).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(n, h // s, w // s, s * s * c)


def depth_to_space(x: jax.Array, s: int) -> jax.Array:
  """The inverse of `space_to_depth`."""
  n, h, w, c = x.shape
  x = x.reshape(n, h, w, s, s, c // (s * s)).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(n, h * s, w * s, c // (s * s))


def _kernel_to_depth(w: jax.Array, s: int) -> jax.Array:
  """[K, K', I, O] (K, K' multiples of s) -> [K/s, K'/s, s*s*I, O], matching `space_to_depth`."""
  kh, kw, i, o = w.shape
  w = w.reshape(kh // s, s, kw // s, s, i, o).transpose(0, 2, 1, 3, 4, 5)
  return w.reshape(kh // s, kw // s, s * s * i, o)


def _kernel_from_depth(w: jax.Array, s: int) -> jax.Array:
  kb, kb2, d, o = w.shape
  w = w.reshape(kb, kb2, s, s, d // (s * s), o).transpose(0, 2, 1, 3, 4, 5)
  return w.reshape(kb * s, kb2 * s, d // (s * s), o)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _conv(x, w, stride: int, pads):
  return _forward(x, w, stride, pads)


def _conv_fwd(x, w, stride, pads):
  return _forward(x, w, stride, pads), (x, w)


def _conv_bwd(s, pads, res, dy):
  x, w = res
  kh, kw, cin, cout = w.shape
  ho, wo = dy.shape[1], dy.shape[2]
  # Kernel padded with zero taps to multiples of s; the input padded (or cropped: lax.pad
  # takes negative pads) to exactly the rows and columns those taps read.
  big_h, big_w = -(-kh // s) * s, -(-kw // s) * s
  w_big = jnp.pad(w, ((0, big_h - kh), (0, big_w - kw), (0, 0), (0, 0)))
  edges = [(lo, (out - 1) * s + k - size - lo, 0) for (lo, _), out, k, size in
           zip(pads, (ho, wo), (big_h, big_w), x.shape[1:3])]
  xs = space_to_depth(jax.lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0), *edges, (0, 0, 0)]), s)
  ws = _kernel_to_depth(w_big, s)
  bh, bw = big_h // s, big_w // s
  # The stride-1 problem's input gradient: a full convolution with the flipped kernel.
  dxs = jax.lax.conv_general_dilated(dy, jnp.flip(ws, (0, 1)).transpose(0, 1, 3, 2), (1, 1),
                                     ((bh - 1, bh - 1), (bw - 1, bw - 1)), dimension_numbers=_DN)
  undo = [(-lo, -hi, 0) for lo, hi, _ in edges]
  dx = jax.lax.pad(depth_to_space(dxs, s), jnp.zeros((), x.dtype), [(0, 0, 0), *undo, (0, 0, 0)])
  rows = dy.reshape(-1, cout)
  taps = [jnp.dot(xs[:, a:a + ho, b:b + wo, :].reshape(-1, xs.shape[-1]).T, rows)
          for a in range(bh) for b in range(bw)]
  dw = _kernel_from_depth(jnp.stack(taps).reshape(bh, bw, -1, cout), s)[:kh, :kw]
  return dx.astype(x.dtype), dw.astype(w.dtype)


_conv.defvjp(_conv_fwd, _conv_bwd)


def conv2d(x: jax.Array, w: jax.Array, stride: int = 1, padding="SAME") -> jax.Array:
  """NHWC x HWIO convolution, `padding` 'SAME', 'VALID' or a symmetric int. The rewritten
  gradients on the CPU only: accelerators keep XLA's own convolution and its autodiff (the
  CPU's pathology is not theirs, and their convolution kernels are what they are tuned for)."""
  pads = _pads(x.shape, w.shape, int(stride), padding)
  if jax.default_backend() != "cpu":
    return _forward(x, w, int(stride), pads)
  return _conv(x, w, int(stride), pads)


def tap_conv2d(x: jax.Array, w: jax.Array, padding="SAME") -> jax.Array:
  """The stride-1 convolution as a sum of one matmul per kernel tap over shifted slices of the
  padded input (plain autodiff gives both gradients). XLA:CPU's convolution is pathological
  for maps of few pixels and many channels: the compression layer's 3x3 conv on a 2x2x1280
  MobileNet token grid (batch 16, 512 filters) took 1.0 s; as taps it is a few matmuls."""
  kh, kw, _, cout = w.shape
  (t, b), (l, r) = _pads(x.shape, w.shape, 1, padding)
  xp = jax.lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0), (t, b, 0), (l, r, 0), (0, 0, 0)])
  ho, wo = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
  if jax.default_backend() != "cpu":   # The CPU's workaround only (see `conv2d`).
    return _forward(x, w, 1, ((t, b), (l, r)))
  y = sum(jnp.einsum("nhwi,io->nhwo", xp[:, a:a + ho, c:c + wo, :], w[a, c])
          for a in range(kh) for c in range(kw))
  return y.reshape(x.shape[0], ho, wo, cout)


class Conv(nn.Module):
  """`nn.Conv`'s parameters (kernel HWIO, bias) and initialisers, with `conv2d` inside (or,
  with `taps` and stride 1, `tap_conv2d`: for maps of few pixels and many channels)."""
  features: int
  kernel_size: tuple[int, int]
  strides: int = 1
  padding: object = "SAME"
  use_bias: bool = True
  kernel_init: object = nn.initializers.lecun_normal()
  taps: bool = False

  @nn.compact
  def __call__(self, x):
    kh, kw = self.kernel_size
    w = self.param("kernel", self.kernel_init, (kh, kw, x.shape[-1], self.features))
    if self.taps and self.strides != 1:
      raise ValueError(f"Conv(taps=True) needs stride 1, got {self.strides}")
    y = (tap_conv2d(x, w.astype(x.dtype), self.padding) if self.taps
         else conv2d(x, w.astype(x.dtype), self.strides, self.padding))
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,)).astype(y.dtype)
    return y
