"""G-VUE's task decoders: small trainable heads on top of a frozen visual encoder.

G-VUE (Zhu et al. 2022) scores a visual encoder by training a light decoder per task on its
features: a transformer label decoder for the tasks with one answer per image, SegFormer's
all-MLP head for dense maps, an attention-pooling head for image-text retrieval and a 3-D
decoder for single-view reconstruction. Every module returns `(output, intermediates)` like the
encoders, and takes `train` to switch dropout (drawn from the 'dropout' rng) and, for the dense
head, BatchNorm statistics (the 'batch_stats' collection).

`LabelDecoder` follows G-VUE's `LabelType` decoder (classification, VQA, common-sense, Bongard,
phrase grounding's box regression) and its defaults: width 256, 6 post-norm encoder layers with
8 heads, a 2048-wide ReLU feed-forward, dropout 0.1 (residuals, feed-forward and attention
weights), LayerNorm eps 1e-5, a learned label token (initialised N(0, 0.1)) prepended to the
visual tokens, DETR-style 2-D sine position embeddings added to the queries and keys (never the
values) of every attention layer, and a zero position for the label and text tokens (the
reference gives text none: the language model's states carry their own). The label token's
final state goes through Linear(width, 2*width) -> GELU -> LayerNorm -> Linear(num_outputs).
Where this differs from the reference:
  * the text projection (Linear(Dt, width)) lives here; G-VUE keeps it in its joint model;
  * the sine embedding is computed for whatever grid `features` has, where the reference builds
    it once for image_size / grid_feature_ratio;
  * q, k and v are three projections rather than one fused matrix (same function); weights are
    Xavier-uniform as the reference's transformer re-initialises them, biases start at zero.
The caller picks the feature map (G-VUE feeds the last one).

`RetrievalHead` pools a token sequence into a unit vector for image-text retrieval (G-VUE's
Flickr30k task, embedding width 1024). The reference pools image tokens with CLIP's
AttentionPool2d (the mean token plus learned positions as the query) and takes the text model's
first token; here a learned query attends over the tokens (with an optional padding mask), the
same head serves both sides with separate parameters, and no positions are added (ViT tokens and
text states already carry theirs). Then Linear(C, dim) and L2 normalisation, as the reference.

`DenseDecoder` is G-VUE's `DenseType` decoder (segmentation, depth), the all-MLP head of
SegFormer, with its defaults (width 256, dropout 0.1): each of the four pyramid levels (strides
4, 8, 16, 32) gets its own Linear to `width`, is resized bilinearly (align_corners=False, as
`F.interpolate`) to the stride-4 grid, and the four are concatenated coarsest first (the
SegFormer order); a bias-free 1x1 convolution fuses them, then BatchNorm (torch's momentum 0.1
and eps 1e-5), ReLU, channel dropout (`Dropout2d`: a dropped channel is dropped over the whole
map) and a 1x1 classifier. The 1x1 convolutions are written as Dense layers over the channel
axis (the same function). Differences from the reference: the logits stay on the stride-4 grid
(the reference resizes them to the image inside the decoder; callers resize them where the
target needs it, e.g. with `resize.resize_hw`), and Flax's BatchNorm tracks the biased batch
variance where torch's tracks the unbiased one (a factor n/(n-1), n = B*h*w pixels: negligible).

`OccupancyDecoder` replaces G-VUE's `Rec3DType`. The reference maps the last feature map
through a Linear over the spatial positions (h*w -> 8^3 cells) and ResNet/attention blocks into
logits over the 512-entry codebook of a frozen AutoSDF prior (a VQ-VAE and an autoregressive
transformer), which then decodes a 64^3 SDF. Those pretrained AutoSDF weights are not available
to vcbench, so this is a direct occupancy decoder: the same kind of spatial Linear (h*w image
cells -> grid^3 volume cells, shared by the channels), a Linear from the encoder's channels to
`width`, dropout, then one 3-D transposed convolution per doubling (kernel 2, stride 2 in
torch's terms: `VoxelDoubling`), each followed by GroupNorm (8 groups, eps 1e-6 as in the
reference's 3-D blocks) and ReLU and halving the channels, and a 1x1x1 convolution to occupancy
logits [B, R, R, R]. The spatial Linear ties a trained decoder to one feature grid (h, w), as
the reference's does.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vcbench.errors import UserError
from vcbench.models import resize
from vcbench.models.vit import gelu

# torch.nn.LayerNorm's default, which every G-VUE decoder layer uses.
LN_EPS = 1e-5
xavier_uniform = nn.initializers.xavier_uniform()

PYRAMID_STRIDES = (4, 8, 16, 32)
BN_MOMENTUM = 0.9   # torch's momentum 0.1, in Flax's convention.
BN_EPS = 1e-5
GN_EPS = 1e-6       # The reference's 3-D blocks' GroupNorm.
MIN_CHANNELS = 8


class DecoderInputError(UserError, ValueError):
  """A decoder setting, or an input (features, text, mask) whose shape does not fit it."""


def check_rank(name: str, what: str, x, rank: int, layout: str) -> None:
  if x.ndim != rank:
    raise DecoderInputError(f"{name}: {what} must be {layout}, got shape {tuple(x.shape)}")


def sine_position_embedding(h: int, w: int, dim: int, temperature: float = 10000.0,
                            normalize: bool = True) -> np.ndarray:
  """DETR's PositionEmbeddingSine for an unpadded h x w grid -> float32 [h, w, dim].

  The first dim/2 channels encode the row, the rest the column; within each half, channel
  pairs (2i, 2i+1) are sin and cos of position / temperature^(2i / (dim/2)). Positions count
  from 1; `normalize` rescales them to (0, 2*pi] (the last row/column gets 2*pi), as DETR and
  G-VUE do. Built in float64 NumPy from static shapes: a constant under jit.
  """
  if dim % 4:
    raise DecoderInputError(f"sine position embedding needs dim divisible by 4 (sin/cos pairs "
                            f"for rows and columns), got {dim}")
  feats = dim // 2
  rows = np.arange(1, h + 1, dtype=np.float64)
  cols = np.arange(1, w + 1, dtype=np.float64)
  if normalize:
    eps, scale = 1e-6, 2 * math.pi
    rows = rows / (rows[-1] + eps) * scale
    cols = cols / (cols[-1] + eps) * scale
  freq = temperature ** (2 * (np.arange(feats) // 2) / feats)

  def encode(pos):  # [n] -> [n, feats] as sin, cos, sin, cos, ...
    angles = pos[:, None] / freq
    return np.stack([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], -1).reshape(-1, feats)

  by_row = np.broadcast_to(encode(rows)[:, None], (h, w, feats))
  by_col = np.broadcast_to(encode(cols)[None, :], (h, w, feats))
  return np.concatenate([by_row, by_col], -1).astype(np.float32)


class MultiHeadAttention(nn.Module):
  """torch.nn.MultiheadAttention's function: q/k/v projections, scaled dot product with an
  optional key padding mask, dropout on the attention weights, output projection.

  key_mask: [B, K] bool, True where the key is a real token (the opposite of torch's
  `key_padding_mask`). Masked keys get the most negative float rather than -inf, so a row
  with every key masked averages instead of turning into NaN.
  """
  num_heads: int
  dropout: float = 0.0

  @nn.compact
  def __call__(self, query, key, value, key_mask=None, *, train: bool):
    b, nq, d = query.shape
    if d % self.num_heads:
      raise DecoderInputError(f"attention width {d} is not divisible by {self.num_heads} heads")
    hd = d // self.num_heads
    dense = functools.partial(nn.Dense, d, kernel_init=xavier_uniform)

    def heads(x, name):
      return dense(name=name)(x).reshape(b, x.shape[1], self.num_heads, hd)

    q, k, v = heads(query, "query"), heads(key, "key"), heads(value, "value")
    logits = jnp.einsum("bqhd,bkhd->bhqk", q * hd ** -0.5, k)
    if key_mask is not None:
      logits = jnp.where(key_mask[:, None, None, :], logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits, axis=-1)
    weights = nn.Dropout(self.dropout)(weights, deterministic=not train)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, nq, d)
    return dense(name="out")(out)


class PostNormEncoderLayer(nn.Module):
  """DETR's encoder layer: positions added to queries and keys only, LayerNorm after each
  residual, ReLU feed-forward, dropout on both residual branches and inside the feed-forward."""
  num_heads: int
  mlp_dim: int
  dropout: float

  @nn.compact
  def __call__(self, x, pos, key_mask, *, train: bool):
    def drop(y):
      return nn.Dropout(self.dropout)(y, deterministic=not train)

    qk = x + pos
    attn = MultiHeadAttention(self.num_heads, self.dropout, name="self_attn")(
        qk, qk, x, key_mask, train=train)
    x = nn.LayerNorm(LN_EPS, name="norm1")(x + drop(attn))
    hidden = drop(nn.relu(nn.Dense(self.mlp_dim, kernel_init=xavier_uniform,
                                   name="linear1")(x)))
    ff = nn.Dense(x.shape[-1], kernel_init=xavier_uniform, name="linear2")(hidden)
    return nn.LayerNorm(LN_EPS, name="norm2")(x + drop(ff))


class LabelHead(nn.Module):
  """G-VUE's output MLP: Linear(2 * width) -> exact GELU -> LayerNorm -> Linear(outputs)."""
  num_outputs: int

  @nn.compact
  def __call__(self, x):
    x = gelu(nn.Dense(2 * x.shape[-1], name="fc1")(x))
    return nn.Dense(self.num_outputs, name="fc2")(nn.LayerNorm(LN_EPS, name="norm")(x))


class LabelDecoder(nn.Module):
  """Transformer over [label token; visual tokens; text tokens] -> logits [B, num_outputs].

  features: [B, h, w, C] visual feature map. text: optional [B, T, Dt] language-model states;
  text_mask: optional [B, T] bool, True for real tokens (all real when omitted). Intermediates:
  `layer_{i}` (every token after layer i) and `label_state` (the label token's final state).
  """
  num_outputs: int
  width: int = 256
  depth: int = 6
  num_heads: int = 8
  mlp_dim: int = 2048
  dropout: float = 0.1

  def check_inputs(self, features, text, text_mask) -> None:
    check_rank("LabelDecoder", "features", features, 4, "[B, h, w, C]")
    if self.width % self.num_heads or self.width % 4:
      raise DecoderInputError(f"LabelDecoder width {self.width} must be divisible by "
                              f"num_heads ({self.num_heads}) and by 4 (sine position embedding)")
    if text is None:
      if text_mask is not None:
        raise DecoderInputError("LabelDecoder: text_mask given without text")
      return
    check_rank("LabelDecoder", "text", text, 3, "[B, T, Dt]")
    if text.shape[0] != features.shape[0]:
      raise DecoderInputError(f"LabelDecoder: text batch {text.shape[0]} != features batch "
                              f"{features.shape[0]}")
    if text_mask is not None and tuple(text_mask.shape) != tuple(text.shape[:2]):
      raise DecoderInputError(f"LabelDecoder: text_mask must be [B, T] = "
                              f"{tuple(text.shape[:2])}, got {tuple(text_mask.shape)}")

  @nn.compact
  def __call__(self, features, text=None, text_mask=None, *, train: bool):
    self.check_inputs(features, text, text_mask)
    b, h, w, c = features.shape
    label = self.param("label_token", nn.initializers.normal(0.1), (self.width,))
    tokens = [jnp.broadcast_to(label, (b, 1, self.width)),
              nn.Dense(self.width, name="visual_proj")(features.reshape(b, h * w, c))]
    sine = jnp.asarray(sine_position_embedding(h, w, self.width).reshape(1, h * w, self.width))
    positions = [jnp.zeros((b, 1, self.width)), jnp.broadcast_to(sine, (b, h * w, self.width))]
    valid = [jnp.ones((b, 1 + h * w), bool)]
    if text is not None:
      tokens.append(nn.Dense(self.width, name="text_proj")(text))
      positions.append(jnp.zeros((b, text.shape[1], self.width)))
      valid.append(jnp.ones(text.shape[:2], bool) if text_mask is None
                   else jnp.asarray(text_mask).astype(bool))
    x, pos, key_mask = (jnp.concatenate(parts, 1) for parts in (tokens, positions, valid))

    intermediates = {}
    for i in range(self.depth):
      x = PostNormEncoderLayer(self.num_heads, self.mlp_dim, self.dropout, name=f"layer_{i}")(
          x, pos, key_mask, train=train)
      intermediates[f"layer_{i}"] = x
    intermediates["label_state"] = x[:, 0]
    return LabelHead(self.num_outputs, name="head")(x[:, 0]), intermediates


def l2_normalize(x, eps: float = 1e-12):
  """torch.nn.functional.normalize: x / max(||x||, eps) along the last axis."""
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), eps)


class RetrievalHead(nn.Module):
  """Attention pooling by a learned query, Linear(C, dim), L2 normalisation -> [B, dim].

  tokens: [B, N, C] (or a map [B, h, w, C], flattened); mask: optional [B, N] bool, True for
  real tokens. `dropout` acts on the attention weights (0, as the reference's pooling).
  Intermediates: `pooled`, the attention output before the projection.
  """
  dim: int = 1024
  num_heads: int = 8
  dropout: float = 0.0

  @nn.compact
  def __call__(self, tokens, mask=None, *, train: bool):
    if tokens.ndim == 4:
      tokens = tokens.reshape(tokens.shape[0], -1, tokens.shape[-1])
    check_rank("RetrievalHead", "tokens", tokens, 3, "[B, N, C] or [B, h, w, C]")
    b, n, c = tokens.shape
    if mask is not None and tuple(mask.shape) != (b, n):
      raise DecoderInputError(f"RetrievalHead: mask must be [B, N] = {(b, n)}, got "
                              f"{tuple(mask.shape)}")
    query = self.param("query", nn.initializers.normal(c ** -0.5), (c,))
    key_mask = None if mask is None else jnp.asarray(mask).astype(bool)
    pooled = MultiHeadAttention(self.num_heads, self.dropout, name="pool")(
        jnp.broadcast_to(query, (b, 1, c)), tokens, tokens, key_mask, train=train)[:, 0]
    embedding = l2_normalize(nn.Dense(self.dim, name="proj")(pooled))
    return embedding, {"pooled": pooled}


def check_pyramid(pyramid) -> None:
  if len(pyramid) != len(PYRAMID_STRIDES):
    raise DecoderInputError(f"DenseDecoder: pyramid must hold {len(PYRAMID_STRIDES)} maps "
                            f"(strides {PYRAMID_STRIDES}), got {len(pyramid)}")
  for level, fmap in enumerate(pyramid):
    check_rank("DenseDecoder", f"pyramid[{level}]", fmap, 4, "[B, h, w, C]")
    if fmap.shape[0] != pyramid[0].shape[0]:
      raise DecoderInputError(f"DenseDecoder: pyramid[{level}] has batch {fmap.shape[0]}, "
                              f"pyramid[0] has {pyramid[0].shape[0]}")


class DenseDecoder(nn.Module):
  """SegFormer's all-MLP head: four maps [B, h_i, w_i, C_i] -> logits [B, h_0, w_0, outputs].

  Intermediates: `fused`, the map after the fuse convolution, BatchNorm and ReLU.
  """
  num_outputs: int
  width: int = 256
  dropout: float = 0.1

  @nn.compact
  def __call__(self, pyramid: Sequence, *, train: bool):
    check_pyramid(pyramid)
    size = tuple(pyramid[0].shape[1:3])
    levels = [resize.resize_hw(nn.Dense(self.width, name=f"linear_c{i + 1}")(fmap), size)
              for i, fmap in enumerate(pyramid)]
    fused = nn.Dense(self.width, use_bias=False, name="linear_fuse")(
        jnp.concatenate(levels[::-1], axis=-1))
    fused = nn.BatchNorm(use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPS,
                         name="fuse_bn")(fused)
    fused = nn.relu(fused)
    x = nn.Dropout(self.dropout, broadcast_dims=(1, 2))(fused, deterministic=not train)
    return nn.Dense(self.num_outputs, name="linear_pred")(x), {"fused": fused}


def upsampling_stages(resolution: int, grid: int) -> int:
  """How many doublings take the grid^3 volume to resolution^3."""
  stages = int(round(math.log2(resolution / grid))) if resolution >= grid > 0 else -1
  if stages < 0 or grid * 2 ** stages != resolution:
    raise DecoderInputError(f"OccupancyDecoder resolution {resolution} must be grid {grid} "
                            "times a power of two")
  return stages


class VoxelDoubling(nn.Module):
  """A transposed 3-D convolution with kernel 2 and stride 2 (torch's ConvTranspose3d(c, k, 2,
  stride=2)): every voxel becomes its own 2x2x2 block of children, a linear map of its features.
  Written as one einsum and a reshape because XLA's CPU transposed 3-D convolution took ~30 s
  per step of 8 volumes at width 256 (kernel 4) where this takes a fraction of a second."""
  features: int

  @nn.compact
  def __call__(self, x):
    b, d, h, w, c = x.shape
    kernel = self.param("kernel", nn.initializers.lecun_normal(in_axis=3, out_axis=4),
                        (2, 2, 2, c, self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    y = jnp.einsum("bijkc,xyzco->bixjykzo", x, kernel)
    return y.reshape(b, 2 * d, 2 * h, 2 * w, self.features) + bias


class OccupancyDecoder(nn.Module):
  """Feature map [B, h, w, C] -> occupancy logits [B, R, R, R] (R = `resolution`).

  Stage i runs at grid * 2^(i+1) with max(width / 2^(i+1), 8) channels. Intermediates:
  `volume` (the grid^3 latent) and `up_{i}` (each stage's output).
  """
  resolution: int = 32
  width: int = 256
  grid: int = 4
  dropout: float = 0.1

  @nn.compact
  def __call__(self, features, *, train: bool):
    check_rank("OccupancyDecoder", "features", features, 4, "[B, h, w, C]")
    stages = upsampling_stages(self.resolution, self.grid)
    b, h, w, c = features.shape
    g = self.grid
    cells = features.reshape(b, h * w, c).transpose(0, 2, 1)
    volume = nn.Dense(g ** 3, name="to_volume")(cells).transpose(0, 2, 1)
    x = nn.Dense(self.width, name="reduce")(volume.reshape(b, g, g, g, c))
    x = nn.Dropout(self.dropout)(x, deterministic=not train)
    intermediates = {"volume": x}
    for i in range(stages):
      channels = max(self.width // 2 ** (i + 1), MIN_CHANNELS)
      x = VoxelDoubling(channels, name=f"up_{i}")(x)
      x = nn.GroupNorm(num_groups=math.gcd(channels, 8), epsilon=GN_EPS, name=f"norm_{i}")(x)
      x = nn.relu(x)
      intermediates[f"up_{i}"] = x
    return nn.Dense(1, name="occupancy")(x)[..., 0], intermediates
