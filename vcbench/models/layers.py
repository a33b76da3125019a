"""Convolution layers shared by the CNN encoders (ResNet, CLIP ResNet, MobileNetV2)."""
from __future__ import annotations

from typing import Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp


def _conv(x, k, stride: int, padding: int, groups: int):
  return jax.lax.conv_general_dilated(
      x, k, (stride, stride), [(padding, padding)] * 2,
      dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)


def _depthwise(x, k, stride: int, padding: int):
  """Depthwise convolution as a sum of kh*kw shifted, strided slices times a
  per-channel tap: one fused elementwise loop instead of XLA:CPU's grouped
  convolution."""
  kh, kw = k.shape[:2]
  xp = jnp.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
  oh = (xp.shape[1] - kh) // stride + 1
  ow = (xp.shape[2] - kw) // stride + 1
  taps = [xp[:, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
          * k[i, j, 0] for i in range(kh) for j in range(kw)]
  # Pairwise summation keeps the rounding error of the kh*kw-term sum at the
  # level of the native convolution's (parity with PyTorch within 1e-5).
  while len(taps) > 1:
    taps = [a + b for a, b in zip(taps[::2], taps[1::2])] + taps[len(taps) // 2 * 2:]
  return taps[0]


def conv2d(x, k, stride: int = 1, padding: int = 0, groups: int = 1):
  """NHWC convolution; depthwise ones on the CPU as a fused sum of shifted slices.

  XLA:CPU's grouped convolution is 18-43x slower than that on MobileNetV2's
  depthwise layers (`python -m launch.bench.convs`, one run: 18.0x, 42.8x, 30.2x). Dense convolutions and
  everything on accelerators stay native (not measured here: no GPU).
  """
  cin, cout = k.shape[2:]
  if (jax.default_backend() == "cpu" and groups > 1 and cin == 1
      and cout == groups == x.shape[-1]):
    return _depthwise(x, k, stride, padding)
  return _conv(x, k, stride, padding, groups)


def relu6(x):
  return jnp.clip(x, 0.0, 6.0)


class ConvBN(nn.Module):
  """Bias-free convolution followed by a frozen (inference-mode) BatchNorm.

  Frozen encoders never update BatchNorm statistics, so the normalisation is
  folded into the kernel and a bias before the convolution runs: one conv and
  one add instead of a conv plus a full pass over the activations. The
  parameters stay unfolded (`kernel`, `scale`, `bias` in `params`; `mean`,
  `var` in `batch_stats`) so they map one-to-one onto a PyTorch Conv2d +
  BatchNorm2d pair and fine-tuning sees the usual variables.
  """
  features: int
  kernel: int
  stride: int = 1
  padding: int = 0
  groups: int = 1
  eps: float = 1e-5
  act: Optional[Callable] = None
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    in_ch = x.shape[-1]
    if in_ch % self.groups:
      raise ValueError(f"{in_ch} input channels are not divisible by {self.groups} groups")
    k = self.param("kernel", nn.initializers.variance_scaling(2.0, "fan_out", "normal"),
                   (self.kernel, self.kernel, in_ch // self.groups, self.features))
    scale = self.param("scale", nn.initializers.ones, (self.features,))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    mean = self.variable("batch_stats", "mean", jnp.zeros, (self.features,)).value
    var = self.variable("batch_stats", "var", jnp.ones, (self.features,)).value
    mult = scale * jax.lax.rsqrt(var + self.eps)
    y = conv2d(x.astype(self.dtype), (k * mult).astype(self.dtype), self.stride,
               self.padding, self.groups)
    y = y + (bias - mean * mult).astype(self.dtype)
    return self.act(y) if self.act is not None else y


def avg_pool(x, size: int):
  """Non-overlapping average pooling, PyTorch's AvgPool2d(size)."""
  return nn.avg_pool(x, (size, size), strides=(size, size)) if size > 1 else x


def global_avg_pool(x):
  return jnp.mean(x, axis=(1, 2))
