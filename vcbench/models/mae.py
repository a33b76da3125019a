"""Masked autoencoder (He et al. 2022) around a zoo ViT: the model VC-1 was trained as.

    mae = MAE(encoder=zoo.entry("vcbench_vit_ti").build(img_size=112, dtype=jnp.float32))
    variables = init(mae, key, img_size=112)          # MAE's initialisation, from scratch
    (out, inter) = mae.apply(variables, images, noise)  # images: normalised [B, H, W, 3]
    loss = reconstruction_loss(out["pred"], images, out["mask"], patch=16)

Semantics follow facebookresearch/mae `models_mae.py` (parity-tested on identical weights and
noise): per-sample random masking by argsort of uniform noise; the encoder sees the CLS token
and the visible patches only; the decoder embeds the latent, appends one shared mask token per
masked patch, unshuffles, adds a fixed 2-D sin-cos position embedding, runs pre-norm blocks and
predicts each patch's pixels; the loss is the MSE on masked patches, against per-patch
normalised pixels when `norm_pix_loss`.

Parameters: the encoder's are under `encoder/` with exactly the zoo ViT's names, so a trained
MAE's `params['encoder']` *is* a zoo ViT (no conversion); the decoder's mirror MAE's PyTorch
names (`decoder_blocks_3/attn/qkv`, `mask_token`, ...). The encoder's position embedding is a
parameter because the zoo ViT has one; MAE keeps it fixed at sin-cos, which `init` sets and the
optimiser (`algos/mae.py`) freezes.
"""
from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vcbench.models.vit import Block, ViT


def patchify(images: jax.Array, patch: int) -> jax.Array:
  """[B, H, W, C] -> [B, h*w, p*p*C], each patch row-major with channels last (MAE's order)."""
  b, hh, ww, c = images.shape
  h, w = hh // patch, ww // patch
  x = images.reshape(b, h, patch, w, patch, c).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(b, h * w, patch * patch * c)


def unpatchify(patches: jax.Array, patch: int, grid: tuple[int, int]) -> jax.Array:
  """Inverse of `patchify`: [B, h*w, p*p*C] -> [B, h*p, w*p, C]."""
  b, _, d = patches.shape
  h, w = grid
  c = d // (patch * patch)
  x = patches.reshape(b, h, w, patch, patch, c).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(b, h * patch, w * patch, c)


def _sincos_1d(width: int, pos: np.ndarray) -> np.ndarray:
  omega = 1.0 / 10000 ** (np.arange(width // 2, dtype=np.float64) / (width / 2.0))
  out = np.einsum("m,d->md", pos.reshape(-1).astype(np.float64), omega)
  return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sincos_pos_embed(width: int, grid: tuple[int, int], cls_token: bool = True) -> np.ndarray:
  """MAE's fixed 2-D sin-cos table [(1 +) h*w, width]: the first half encodes the column, the
  second the row (MAE's `get_2d_sincos_pos_embed`); the CLS row is zeros."""
  if width % 4:
    raise ValueError(f"sin-cos position embedding needs a width divisible by 4, got {width}")
  h, w = grid
  cols, rows = np.meshgrid(np.arange(w), np.arange(h))
  emb = np.concatenate([_sincos_1d(width // 2, cols), _sincos_1d(width // 2, rows)], axis=1)
  if cls_token:
    emb = np.concatenate([np.zeros((1, width)), emb], axis=0)
  return emb.astype(np.float32)


def num_kept(num_patches: int, mask_ratio: float) -> int:
  """Visible patches per image: int(L * (1 - ratio)), as MAE rounds."""
  if not 0.0 <= mask_ratio < 1.0:
    raise ValueError(f"mask_ratio must be in [0, 1), got {mask_ratio}")
  return max(int(num_patches * (1 - mask_ratio)), 1)


def random_masking(noise: jax.Array, keep: int):
  """Per-sample masking from uniform noise [B, L]: the `keep` lowest-noise patches stay.

  Returns (keep_idx [B, keep], mask [B, L] with 1 = masked, restore [B, L]), where
  `restore` undoes the noise sort (MAE's ids_restore)."""
  shuffle = jnp.argsort(noise, axis=1)
  restore = jnp.argsort(shuffle, axis=1)
  mask = (restore >= keep).astype(jnp.float32)
  return shuffle[:, :keep], mask, restore


class MAE(nn.Module):
  """A zoo ViT encoder + MAE's transformer decoder. Returns ({pred, mask}, {latent})."""
  encoder: ViT
  mask_ratio: float = 0.75
  decoder_width: int = 512
  decoder_depth: int = 8
  decoder_heads: int = 16
  mlp_ratio: float = 4.0

  @nn.compact
  def __call__(self, images, noise):
    enc = self.encoder
    if enc.proj_dim is not None:
      raise ValueError("MAE needs an encoder whose CLS output is the token itself "
                       f"(timm layout); this one projects it to {enc.proj_dim}")
    b, hh, ww, _ = images.shape
    grid = (hh // enc.patch, ww // enc.patch)
    num = grid[0] * grid[1]
    if noise.shape != (b, num):
      raise ValueError(f"noise must be [batch, patches] = {(b, num)}, got {noise.shape}")
    keep, mask, restore = random_masking(noise, num_kept(num, self.mask_ratio))
    out, _ = enc(images, keep=keep)
    latent = jnp.concatenate([out["cls"][:, None], out["tokens"]], axis=1)

    dtype = enc.dtype
    x = nn.Dense(self.decoder_width, dtype=dtype, name="decoder_embed")(latent)
    mask_token = self.param("mask_token", nn.initializers.normal(0.02),
                            (1, 1, self.decoder_width))
    filler = jnp.broadcast_to(mask_token, (b, num - keep.shape[1], self.decoder_width))
    tokens = jnp.concatenate([x[:, 1:], filler.astype(x.dtype)], axis=1)
    tokens = jnp.take_along_axis(tokens, restore[..., None], axis=1)
    x = jnp.concatenate([x[:, :1], tokens], axis=1)
    x = x + jnp.asarray(sincos_pos_embed(self.decoder_width, grid), x.dtype)
    for i in range(self.decoder_depth):
      x = Block(self.decoder_heads, int(self.decoder_width * self.mlp_ratio), enc.act,
                enc.ln_eps, True, dtype, name=f"decoder_blocks_{i}")(x)
    x = nn.LayerNorm(epsilon=enc.ln_eps, dtype=dtype, name="decoder_norm")(x)
    pred = nn.Dense(enc.patch * enc.patch * 3, dtype=dtype, name="decoder_pred")(x)
    return {"pred": pred[:, 1:].astype(jnp.float32), "mask": mask}, {"latent": latent}


def patch_stats(patches: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Per-patch mean and std (unbiased variance + 1e-6) of [B, L, D] patches: the statistics
  MAE's norm-pix loss standardises its targets with."""
  mean = patches.mean(axis=-1, keepdims=True)
  return mean, jnp.sqrt(patches.var(axis=-1, keepdims=True, ddof=1) + 1e-6)


def reconstruction_loss(pred, images, mask, patch: int, norm_pix_loss: bool = True):
  """Mean squared error on the masked patches; targets are the (normalised) input pixels,
  each patch standardised by its own mean and unbiased variance when `norm_pix_loss`."""
  target = patchify(images.astype(jnp.float32), patch)
  if norm_pix_loss:
    mean, std = patch_stats(target)
    target = (target - mean) / std
  per_patch = jnp.mean((pred - target) ** 2, axis=-1)
  return jnp.sum(per_patch * mask) / jnp.sum(mask)


def _xavier(key, shape, fan_in: int, fan_out: int):
  limit = np.sqrt(6.0 / (fan_in + fan_out))
  return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


def _mae_leaf(path, leaf, key, pos_table):
  names = [getattr(p, "key", str(p)) for p in path]
  name = names[-1]
  if name == "pos_embed":
    return jnp.asarray(pos_table).reshape(leaf.shape)
  if name in ("cls_token", "mask_token"):
    return 0.02 * jax.random.normal(key, leaf.shape, jnp.float32)
  if name == "kernel" and names[-2] == "patch_embed":   # xavier on the [D, p*p*3] view.
    return _xavier(key, leaf.shape, int(np.prod(leaf.shape[:-1])), leaf.shape[-1])
  if name == "kernel":
    return _xavier(key, leaf.shape, leaf.shape[0], leaf.shape[1])
  if name == "bias" and names[-2] != "patch_embed":
    return jnp.zeros_like(leaf)
  return leaf   # LayerNorm (1, 0) and the patch bias keep flax's defaults.


def init(mae: MAE, key, img_size: int):
  """MAE's initialisation: xavier-uniform linears with zero bias, xavier patch projection,
  N(0, 0.02) CLS and mask tokens, sin-cos encoder position embedding."""
  k_init, k_re = jax.random.split(key)
  noise = jnp.zeros((1, (img_size // mae.encoder.patch) ** 2))
  variables = mae.init(k_init, jnp.zeros((1, img_size, img_size, 3)), noise)
  grid = mae.encoder.img_size // mae.encoder.patch
  pos_table = sincos_pos_embed(mae.encoder.width, (grid, grid))
  leaves, treedef = jax.tree_util.tree_flatten_with_path(variables["params"])
  keys = jax.random.split(k_re, len(leaves))
  new = [_mae_leaf(p, l, k, pos_table) for (p, l), k in zip(leaves, keys)]
  return {"params": jax.tree_util.tree_unflatten(treedef, new)}


@functools.partial(jax.jit, static_argnums=(0,))
def reconstruct(mae: MAE, variables, images, noise):
  """(prediction unpatchified, mask as an image) for pictures of what MAE sees and makes;
  `pred` is in the loss's space (per-patch normalised when trained with norm_pix_loss)."""
  out, _ = mae.apply(variables, images, noise)
  patch = mae.encoder.patch
  grid = (images.shape[1] // patch, images.shape[2] // patch)
  pred = unpatchify(out["pred"], patch, grid)
  mask = unpatchify(jnp.repeat(out["mask"][..., None], patch * patch * 3, axis=-1), patch,
                    grid)
  return pred, mask
