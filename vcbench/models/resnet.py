"""ResNets behind the Encoder contract.

* `ResNet(stem="torchvision")`: torchvision's ResNet-50 (v1.5, stride in the
  3x3 conv), the backbone of R3M, VIP, MoCo and ImageNet-supervised PVRs.
* `ResNet(stem="clip")`: CLIP's ModifiedResNet: a three-conv stem with average
  pooling, anti-aliased strides (average pool before the 1x1 expansion and in
  the shortcut), and attention pooling in place of global average pooling.

Outputs: `cls` is the global average pool of the last stage (CLIP: the
attention-pooled embedding, which is what CLIP calls the image feature; VIP:
its Linear head on the pool, the 1024-d embedding VIP was trained to give),
`tokens` the flattened last grid, `pyramid` the four stage outputs at strides
4/8/16/32.
"""
from __future__ import annotations

from typing import Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vcbench.models import resize
from vcbench.models.layers import ConvBN, avg_pool, global_avg_pool


class Bottleneck(nn.Module):
  width: int
  stride: int = 1
  downsample: bool = False
  anti_alias: bool = False  # CLIP: stride by average pooling, not by the conv.
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    relu, dt = nn.relu, self.dtype
    conv_stride = 1 if self.anti_alias else self.stride
    out = ConvBN(self.width, 1, act=relu, dtype=dt, name="conv1")(x)
    out = ConvBN(self.width, 3, conv_stride, 1, act=relu, dtype=dt, name="conv2")(out)
    if self.anti_alias:
      out = avg_pool(out, self.stride)
    out = ConvBN(self.width * 4, 1, dtype=dt, name="conv3")(out)
    if self.downsample:
      if self.anti_alias:
        x = ConvBN(self.width * 4, 1, dtype=dt, name="downsample")(avg_pool(x, self.stride))
      else:
        x = ConvBN(self.width * 4, 1, self.stride, dtype=dt, name="downsample")(x)
    return relu(out + x)


class AttentionPool2d(nn.Module):
  """CLIP's attention pooling: the mean token attends over the grid."""
  heads: int
  output_dim: int
  grid: int  # The grid the position embedding was trained at (224 // 32).
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    b, h, w, c = x.shape
    hd = c // self.heads
    x = x.reshape(b, h * w, c)
    x = jnp.concatenate([x.mean(axis=1, keepdims=True), x], axis=1)
    pos = self.param("positional_embedding", nn.initializers.normal(c ** -0.5),
                     (1 + self.grid * self.grid, c))
    pos = resize.resample_pos_embed(pos[None], (h, w), old_grid=(self.grid, self.grid))[0]
    x = x + pos.astype(x.dtype)
    dense = lambda n, name: nn.Dense(n, dtype=self.dtype, name=name)
    q = dense(c, "q_proj")(x[:, :1]).reshape(b, 1, self.heads, hd)
    k = dense(c, "k_proj")(x).reshape(b, h * w + 1, self.heads, hd)
    v = dense(c, "v_proj")(x).reshape(b, h * w + 1, self.heads, hd)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q * hd ** -0.5, k)
    weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(v.dtype)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, c)
    return dense(self.output_dim, "c_proj")(out)


class ResNet(nn.Module):
  """ResNet returning ({cls, tokens, pyramid}, intermediates)."""
  stage_sizes: Sequence[int] = (3, 4, 6, 3)
  width: int = 64
  stem: str = "torchvision"          # or "clip"
  attn_heads: Optional[int] = None   # CLIP attention pooling.
  output_dim: Optional[int] = None   # CLIP attention-pool output width.
  head_dim: Optional[int] = None     # VIP: a Linear on the pooled feature is the embedding.
  img_size: int = 224
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, images):
    if images.ndim != 4 or images.shape[-1] != 3:
      raise ValueError(f"ResNet expects preprocessed images [B, H, W, 3], got {images.shape}")
    if self.stem not in ("torchvision", "clip"):
      raise ValueError(f"stem must be 'torchvision' or 'clip', got {self.stem!r}")
    clip = self.stem == "clip"
    relu, dt = nn.relu, self.dtype
    x = images.astype(dt)
    if clip:
      x = ConvBN(self.width // 2, 3, 2, 1, act=relu, dtype=dt, name="conv1")(x)
      x = ConvBN(self.width // 2, 3, 1, 1, act=relu, dtype=dt, name="conv2")(x)
      x = ConvBN(self.width, 3, 1, 1, act=relu, dtype=dt, name="conv3")(x)
      x = avg_pool(x, 2)
    else:
      x = ConvBN(self.width, 7, 2, 3, act=relu, dtype=dt, name="conv1")(x)
      x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
    intermediates = {"stem": x}
    stages = []
    for i, blocks in enumerate(self.stage_sizes):
      for j in range(blocks):
        stride = 2 if (i > 0 and j == 0) else 1
        x = Bottleneck(self.width * 2 ** i, stride, downsample=(j == 0), anti_alias=clip,
                       dtype=dt, name=f"layer{i + 1}_{j}")(x)
      intermediates[f"layer{i + 1}"] = x
      stages.append(x)

    b, h, w, c = x.shape
    if clip:
      cls = AttentionPool2d(self.attn_heads, self.output_dim, self.img_size // 32, dt,
                            name="attnpool")(x)
    else:
      cls = intermediates["pooled"] = global_avg_pool(x)
    if self.head_dim is not None:
      cls = nn.Dense(self.head_dim, dtype=dt, name="fc")(cls)
    outputs = {"cls": cls, "tokens": x.reshape(b, h * w, c), "pyramid": stages}
    return outputs, intermediates
