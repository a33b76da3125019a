"""Vision Transformers behind the Encoder contract.

One module covers the two layouts the zoo needs:
  * timm/MAE style (VC-1, MVP, MAE, random ViTs): patch conv with bias, CLS
    token, learned position embedding, pre-norm blocks, final LayerNorm
    (eps 1e-6), exact GELU.
  * CLIP style (OpenAI/open_clip visual towers): patch conv without bias, an
    extra LayerNorm before the blocks (`ln_pre`), eps 1e-5, QuickGELU for
    OpenAI weights, and a linear projection of the CLS token.

Parameter names follow timm's (`blocks_3/attn/qkv`), so conversion rules read as
a rename table. The module takes preprocessed float images [B, H, W, 3] (the
zoo entry owns preprocessing) and returns `(outputs, intermediates)`.
"""
from __future__ import annotations

import functools
from typing import Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vcbench.models import resize

Dtype = jnp.dtype


def quick_gelu(x):
  return x * jax.nn.sigmoid(1.702 * x)


def gelu(x):
  """Exact (erf) GELU. Written out because `jax.nn.gelu(approximate=False)`
  goes through erfc, ~30% slower on XLA:CPU for the same values."""
  return 0.5 * x * (1.0 + jax.lax.erf(x * 0.7071067811865476))


ACTIVATIONS = {
    "gelu": gelu,
    "gelu_tanh": functools.partial(jax.nn.gelu, approximate=True),
    "quick_gelu": quick_gelu,
}


class Mlp(nn.Module):
  hidden: int
  act: str = "gelu"
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    d = x.shape[-1]
    x = nn.Dense(self.hidden, dtype=self.dtype, name="fc1")(x)
    x = ACTIVATIONS[self.act](x)
    return nn.Dense(d, dtype=self.dtype, name="fc2")(x)


class Attention(nn.Module):
  """Multi-head self-attention with a fused qkv projection (timm's layout)."""
  heads: int
  qkv_bias: bool = True
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    b, n, d = x.shape
    if d % self.heads:
      raise ValueError(f"width {d} is not divisible by {self.heads} heads")
    hd = d // self.heads
    qkv = nn.Dense(3 * d, use_bias=self.qkv_bias, dtype=self.dtype, name="qkv")(x)
    q, k, v = jnp.split(qkv.reshape(b, n, 3 * self.heads, hd), 3, axis=2)
    # [B, H, N, hd] keeps the two attention matmuls as plain batched GEMMs.
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    logits = jnp.einsum("bhqd,bhkd->bhqk", q * (hd ** -0.5), k).astype(jnp.float32)
    # Softmax with the normalisation after the second matmul: dividing the
    # [B, H, N, hd] output is N/hd times less work than dividing the weights.
    e = jnp.exp(logits - jax.lax.stop_gradient(logits.max(axis=-1, keepdims=True)))
    out = jnp.einsum("bhqk,bhkd->bhqd", e.astype(v.dtype), v)
    out = out / e.sum(axis=-1, keepdims=True).astype(v.dtype)
    out = out.transpose(0, 2, 1, 3).reshape(b, n, d)
    return nn.Dense(d, dtype=self.dtype, name="proj")(out)


class Block(nn.Module):
  heads: int
  mlp_dim: int
  act: str = "gelu"
  ln_eps: float = 1e-6
  qkv_bias: bool = True
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    norm = functools.partial(nn.LayerNorm, epsilon=self.ln_eps, dtype=self.dtype)
    x = x + Attention(self.heads, self.qkv_bias, self.dtype, name="attn")(
        norm(name="norm1")(x))
    x = x + Mlp(self.mlp_dim, self.act, self.dtype, name="mlp")(norm(name="norm2")(x))
    return x


def vit_pyramid(features: Sequence[jax.Array], grid: tuple[int, int],
                image_hw: tuple[int, int]):
  """Four patch-token maps [B, h*w, D] -> maps at strides 4, 8, 16, 32.

  G-VUE hands four evenly spaced blocks to the dense decoders; each token map
  becomes [B, h, w, D] and is resized bilinearly (align_corners=False, as
  `F.interpolate`) to the image size over 4, 8, 16 and 32, whatever the patch.
  """
  h, w = grid
  out = []
  for f, stride in zip(features, (4, 8, 16, 32)):
    f = f.reshape(f.shape[0], h, w, f.shape[-1])
    out.append(resize.resize_hw(f, (image_hw[0] // stride, image_hw[1] // stride), "bilinear"))
  return out


def default_pyramid_layers(depth: int) -> tuple[int, ...]:
  """Evenly spaced blocks ending at the last: (2, 5, 8, 11) for depth 12."""
  step = max(depth // 4, 1)
  return tuple(min(step * (i + 1), depth) - 1 for i in range(4))


class ViT(nn.Module):
  """Vision Transformer returning ({cls, tokens, pyramid}, intermediates)."""
  width: int
  depth: int
  heads: int
  patch: int = 16
  mlp_ratio: float = 4.0
  img_size: int = 224
  act: str = "gelu"
  ln_eps: float = 1e-6
  qkv_bias: bool = True
  patch_bias: bool = True
  pre_norm: bool = False          # CLIP's ln_pre.
  proj_dim: Optional[int] = None  # CLIP's projection of the CLS token.
  pyramid_layers: Optional[tuple[int, ...]] = None
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, images, keep: Optional[jax.Array] = None):
    """keep: optional [B, K] indices of the patches to encode (MAE's visible patches); the
    others are dropped after the position embedding, and the outputs hold only `cls` and the
    K visible `tokens` (no pyramid: it needs the whole grid)."""
    if images.ndim != 4 or images.shape[-1] != 3:
      raise ValueError(f"ViT expects preprocessed images [B, H, W, 3], got {images.shape}")
    b, hh, ww, _ = images.shape
    if hh % self.patch or ww % self.patch:
      raise ValueError(f"image size {hh}x{ww} is not a multiple of patch {self.patch}")
    norm = functools.partial(nn.LayerNorm, epsilon=self.ln_eps, dtype=self.dtype)

    x = nn.Conv(self.width, (self.patch, self.patch), strides=self.patch,
                padding="VALID", use_bias=self.patch_bias, dtype=self.dtype,
                name="patch_embed")(images.astype(self.dtype))
    grid = x.shape[1:3]
    x = x.reshape(b, grid[0] * grid[1], self.width)
    cls = self.param("cls_token", nn.initializers.zeros, (1, 1, self.width))
    x = jnp.concatenate([jnp.broadcast_to(cls, (b, 1, self.width)).astype(x.dtype), x], 1)

    train_grid = self.img_size // self.patch
    pos = self.param("pos_embed", nn.initializers.normal(0.02),
                     (1, 1 + train_grid * train_grid, self.width))
    pos = resize.resample_pos_embed(pos, grid, old_grid=(train_grid, train_grid))
    x = x + pos.astype(x.dtype)
    if keep is not None:
      visible = jnp.take_along_axis(x[:, 1:], keep[..., None].astype(jnp.int32), axis=1)
      x = jnp.concatenate([x[:, :1], visible], axis=1)
    if self.pre_norm:
      x = norm(name="norm_pre")(x)

    intermediates = {}
    for i in range(self.depth):
      x = Block(self.heads, int(self.width * self.mlp_ratio), self.act, self.ln_eps,
                self.qkv_bias, self.dtype, name=f"blocks_{i}")(x)
      intermediates[f"block_{i}"] = x
    x = norm(name="norm")(x)

    cls_out = x[:, 0]
    if self.proj_dim is not None:
      proj = self.param("proj", nn.initializers.normal(self.width ** -0.5),
                        (self.width, self.proj_dim))
      cls_out = cls_out @ proj.astype(x.dtype)
    if keep is not None:
      return {"cls": cls_out, "tokens": x[:, 1:]}, intermediates
    layers = self.pyramid_layers or default_pyramid_layers(self.depth)
    pyramid = vit_pyramid([intermediates[f"block_{i}"][:, 1:] for i in layers], grid,
                          (hh, ww))
    outputs = {"cls": cls_out, "tokens": x[:, 1:], "pyramid": pyramid}
    return outputs, intermediates
