"""PyTorch modules with the math of vcbench's G-VUE decoders, for the parity tests.

Written from torch.nn building blocks in the layout of the G-VUE reference (NCHW maps, fused
q/k/v in nn.MultiheadAttention, F.interpolate, ConvTranspose3d); each `load` copies a Flax
decoder's variables in, so a test compares the two on the same weights and input.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn as tnn


def t(x):
  return torch.from_numpy(np.array(x, dtype=np.float32))


def nchw(x):
  return t(np.moveaxis(np.asarray(x), -1, 1))


# --- Copying Flax variables into torch modules -------------------------------------------------


@torch.no_grad()
def load_linear(linear, p):
  linear.weight.copy_(t(p["kernel"]).T.reshape(linear.weight.shape))
  if linear.bias is not None:
    linear.bias.copy_(t(p["bias"]))


@torch.no_grad()
def load_norm(norm, p):
  norm.weight.copy_(t(p["scale"]))
  norm.bias.copy_(t(p["bias"]))


@torch.no_grad()
def load_mha(mha, p):
  mha.in_proj_weight.copy_(torch.cat([t(p[n]["kernel"]).T for n in ("query", "key", "value")]))
  mha.in_proj_bias.copy_(torch.cat([t(p[n]["bias"]) for n in ("query", "key", "value")]))
  load_linear(mha.out_proj, p["out"])


# --- PyTorch modules -----------------------------------------------------------------------------


def detr_sine(h, w, dim, temperature=10000, normalize=True):
  """DETR's PositionEmbeddingSine.forward on an unpadded [1, h, w] mask -> [h, w, dim]."""
  not_mask = torch.ones(1, h, w)
  y_embed = not_mask.cumsum(1, dtype=torch.float32)
  x_embed = not_mask.cumsum(2, dtype=torch.float32)
  if normalize:
    eps, scale = 1e-6, 2 * math.pi
    y_embed = y_embed / (y_embed[:, -1:, :] + eps) * scale
    x_embed = x_embed / (x_embed[:, :, -1:] + eps) * scale
  num_pos_feats = dim // 2
  dim_t = torch.arange(num_pos_feats, dtype=torch.float32)
  dim_t = temperature ** (2 * (dim_t // 2) / num_pos_feats)
  pos_x = x_embed[:, :, :, None] / dim_t
  pos_y = y_embed[:, :, :, None] / dim_t
  pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
  pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
  return torch.cat((pos_y, pos_x), dim=3)[0]


class TorchEncoderLayer(tnn.Module):
  """DETR's post-norm encoder layer: positions on queries and keys only."""

  def __init__(self, width, heads, mlp, dropout):
    super().__init__()
    self.self_attn = tnn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
    self.linear1, self.linear2 = tnn.Linear(width, mlp), tnn.Linear(mlp, width)
    self.norm1, self.norm2 = tnn.LayerNorm(width), tnn.LayerNorm(width)
    self.drop = tnn.Dropout(dropout)

  def forward(self, x, pos, pad):
    qk = x + pos
    attn = self.self_attn(qk, qk, x, key_padding_mask=pad, need_weights=False)[0]
    x = self.norm1(x + self.drop(attn))
    return self.norm2(x + self.drop(self.linear2(self.drop(F.relu(self.linear1(x))))))

  def load(self, p):
    load_mha(self.self_attn, p["self_attn"])
    for name in ("linear1", "linear2"):
      load_linear(getattr(self, name), p[name])
    for name in ("norm1", "norm2"):
      load_norm(getattr(self, name), p[name])


class TorchLabelDecoder(tnn.Module):
  """Label token + projected visual tokens (+ projected text), sine positions on the visual
  tokens, zero elsewhere; the label token's state through Linear-GELU-LayerNorm-Linear."""

  def __init__(self, channels, text_dim, outputs, width, depth, heads, mlp, dropout=0.1):
    super().__init__()
    self.width = width
    self.label_token = tnn.Parameter(torch.zeros(width))
    self.visual_proj = tnn.Linear(channels, width)
    self.text_proj = tnn.Linear(text_dim, width)
    self.layers = tnn.ModuleList(
        [TorchEncoderLayer(width, heads, mlp, dropout) for _ in range(depth)])
    self.fc1, self.norm, self.fc2 = (tnn.Linear(width, 2 * width), tnn.LayerNorm(2 * width),
                                     tnn.Linear(2 * width, outputs))

  def forward(self, features, text=None, text_mask=None):
    b, _, h, w = features.shape
    x = torch.cat([self.label_token.expand(b, 1, -1),
                   self.visual_proj(features.flatten(2).transpose(1, 2))], 1)
    pos = torch.cat([torch.zeros(b, 1, self.width),
                     detr_sine(h, w, self.width).reshape(1, h * w, -1).expand(b, -1, -1)], 1)
    pad = torch.zeros(b, 1 + h * w, dtype=torch.bool)
    if text is not None:
      x = torch.cat([x, self.text_proj(text)], 1)
      pos = torch.cat([pos, torch.zeros(b, text.shape[1], self.width)], 1)
      pad = torch.cat([pad, ~text_mask], 1)
    for layer in self.layers:
      x = layer(x, pos, pad)
    return self.fc2(self.norm(F.gelu(self.fc1(x[:, 0]))))

  def load(self, p):
    with torch.no_grad():
      self.label_token.copy_(t(p["label_token"]))
    load_linear(self.visual_proj, p["visual_proj"])
    if "text_proj" in p:
      load_linear(self.text_proj, p["text_proj"])
    for i, layer in enumerate(self.layers):
      layer.load(p[f"layer_{i}"])
    load_linear(self.fc1, p["head"]["fc1"])
    load_norm(self.norm, p["head"]["norm"])
    load_linear(self.fc2, p["head"]["fc2"])
    return self.eval()


class TorchRetrievalHead(tnn.Module):

  def __init__(self, channels, dim, heads):
    super().__init__()
    self.query = tnn.Parameter(torch.zeros(channels))
    self.pool = tnn.MultiheadAttention(channels, heads, batch_first=True)
    self.proj = tnn.Linear(channels, dim)

  def forward(self, tokens, mask=None):
    q = self.query.expand(tokens.shape[0], 1, -1)
    pad = None if mask is None else ~mask
    pooled = self.pool(q, tokens, tokens, key_padding_mask=pad, need_weights=False)[0][:, 0]
    return F.normalize(self.proj(pooled))

  def load(self, p):
    with torch.no_grad():
      self.query.copy_(t(p["query"]))
    load_mha(self.pool, p["pool"])
    load_linear(self.proj, p["proj"])
    return self.eval()


class TorchSegFormerHead(tnn.Module):
  """SegFormer's all-MLP head on NCHW maps, as G-VUE's DenseType (before its final resize)."""

  def __init__(self, in_channels, width, outputs, dropout=0.1):
    super().__init__()
    self.linears = tnn.ModuleList([tnn.Linear(c, width) for c in in_channels])
    self.linear_fuse = tnn.Conv2d(4 * width, width, 1, bias=False)
    self.bn = tnn.BatchNorm2d(width)
    self.dropout = tnn.Dropout2d(dropout)
    self.linear_pred = tnn.Conv2d(width, outputs, 1)

  def forward(self, maps):
    size = maps[0].shape[2:]
    embedded = []
    for linear, m in zip(self.linears, maps):
      e = linear(m.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(
          m.shape[0], -1, *m.shape[2:])
      embedded.append(F.interpolate(e, size=size, mode="bilinear", align_corners=False))
    c1, c2, c3, c4 = embedded
    fused = F.relu(self.bn(self.linear_fuse(torch.cat([c4, c3, c2, c1], 1))))
    return self.linear_pred(self.dropout(fused))

  def load(self, variables):
    p = variables["params"]
    for i, linear in enumerate(self.linears):
      load_linear(linear, p[f"linear_c{i + 1}"])
    load_linear(self.linear_fuse, p["linear_fuse"])
    load_linear(self.linear_pred, p["linear_pred"])
    load_norm(self.bn, p["fuse_bn"])
    with torch.no_grad():
      self.bn.running_mean.copy_(t(variables["batch_stats"]["fuse_bn"]["mean"]))
      self.bn.running_var.copy_(t(variables["batch_stats"]["fuse_bn"]["var"]))
    return self.eval()


class TorchOccupancyDecoder(tnn.Module):
  """Spatial Linear to a g^3 volume, channel Linear, ConvTranspose3d/GroupNorm/ReLU doublings,
  1x1x1 Conv3d to one logit per voxel."""

  def __init__(self, hw, channels, width, grid, stages):
    super().__init__()
    self.grid = grid
    self.to_volume = tnn.Linear(hw, grid ** 3)
    self.reduce = tnn.Linear(channels, width)
    ups, c_in = [], width
    for i in range(stages):
      c_out = max(width // 2 ** (i + 1), 8)
      ups += [tnn.ConvTranspose3d(c_in, c_out, 2, stride=2),
              tnn.GroupNorm(math.gcd(c_out, 8), c_out, eps=1e-6), tnn.ReLU()]
      c_in = c_out
    self.ups = tnn.Sequential(*ups)
    self.occupancy = tnn.Conv3d(c_in, 1, 1)

  def forward(self, features):
    b, c, h, w = features.shape
    g = self.grid
    volume = self.to_volume(features.reshape(b, c, h * w)).reshape(b, c, g, g, g)
    x = self.reduce(volume.permute(0, 2, 3, 4, 1)).permute(0, 4, 1, 2, 3)
    return self.occupancy(self.ups(x))[:, 0]

  def load(self, p):
    load_linear(self.to_volume, p["to_volume"])
    load_linear(self.reduce, p["reduce"])
    load_linear(self.occupancy, p["occupancy"])
    convs = [m for m in self.ups if isinstance(m, tnn.ConvTranspose3d)]
    norms = [m for m in self.ups if isinstance(m, tnn.GroupNorm)]
    with torch.no_grad():
      for i, (conv, norm) in enumerate(zip(convs, norms)):
        # Child (a, b, c) of a voxel is kernel[a, b, c] applied to it, in both (no flip).
        kernel = np.asarray(p[f"up_{i}"]["kernel"])
        conv.weight.copy_(t(kernel.transpose(3, 4, 0, 1, 2)))
        conv.bias.copy_(t(p[f"up_{i}"]["bias"]))
        load_norm(norm, p[f"norm_{i}"])
    return self.eval()
