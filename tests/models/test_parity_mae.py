"""facebookresearch/mae MaskedAutoencoderViT -> vcbench MAE: conversion and parity.

The reference below is MAE's pre-training model (`models_mae.py`) rebuilt from timm's
`Block` and `PatchEmbed`, with one change: `random_masking` takes its uniform noise as an
argument, so that both sides mask the same patches.
"""
import functools

import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

import vcbench  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import  # before jax: sets it up.
import jax
import jax.numpy as jnp
import numpy as np
from timm.models.vision_transformer import Block, PatchEmbed, VisionTransformer

from vcbench.models import convert
from vcbench.models import layouts
from vcbench.models import mae as mae_lib
from vcbench.models.vit import ViT

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

nn = torch.nn


def mae_sincos_table(width: int, side: int) -> np.ndarray:
  """MAE's `get_2d_sincos_pos_embed(width, side, cls_token=True)`, in its float32 arithmetic:
  the first half of the channels encodes the column, the second the row; the CLS row is 0."""
  def one_axis(dim, coords):
    freqs = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float32) / np.float32(dim / 2))
    angles = np.outer(coords.reshape(-1), freqs)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
  rows, cols = np.mgrid[0:side, 0:side].astype(np.float32)
  table = np.concatenate([one_axis(width // 2, cols), one_axis(width // 2, rows)], axis=1)
  return np.concatenate([np.zeros((1, width)), table], axis=0).astype(np.float32)


def torch_masking(x, noise, mask_ratio):
  """MAE's per-sample masking, fed with `noise` [N, L]: the lowest-noise patches stay.
  Returns (visible tokens, mask with 1 = removed, ids_restore, ids_keep)."""
  n, length, d = x.shape
  keep = int(length * (1 - mask_ratio))
  ids_shuffle = torch.argsort(noise, dim=1)
  ids_restore = torch.argsort(ids_shuffle, dim=1)
  ids_keep = ids_shuffle[:, :keep]
  visible = torch.gather(x, 1, ids_keep[..., None].expand(-1, -1, d))
  mask = torch.ones(n, length)
  mask[:, :keep] = 0
  return visible, torch.gather(mask, 1, ids_restore), ids_restore, ids_keep


class TorchMAE(nn.Module):
  """MAE's MaskedAutoencoderViT: qkv bias, LayerNorm eps 1e-6, fixed sin-cos embeddings."""

  def __init__(self, img_size, patch, width, depth, heads, dec_width, dec_depth, dec_heads,
               mask_ratio):
    super().__init__()
    norm = functools.partial(nn.LayerNorm, eps=1e-6)
    self.patch, self.mask_ratio = patch, mask_ratio
    side = img_size // patch
    self.patch_embed = PatchEmbed(img_size, patch, 3, width)
    self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
    # Parameters that are never trained, as in MAE, so that they sit in the state dict.
    self.pos_embed = nn.Parameter(torch.from_numpy(mae_sincos_table(width, side))[None],
                                  requires_grad=False)
    self.blocks = nn.ModuleList(
        [Block(width, heads, 4.0, qkv_bias=True, norm_layer=norm) for _ in range(depth)])
    self.norm = norm(width)
    self.decoder_embed = nn.Linear(width, dec_width)
    self.mask_token = nn.Parameter(torch.zeros(1, 1, dec_width))
    self.decoder_pos_embed = nn.Parameter(
        torch.from_numpy(mae_sincos_table(dec_width, side))[None], requires_grad=False)
    self.decoder_blocks = nn.ModuleList(
        [Block(dec_width, dec_heads, 4.0, qkv_bias=True, norm_layer=norm)
         for _ in range(dec_depth)])
    self.decoder_norm = norm(dec_width)
    self.decoder_pred = nn.Linear(dec_width, patch * patch * 3)

  def patchify(self, imgs):
    """[N, 3, H, W] -> [N, L, p*p*3], pixels of a patch row-major, channels last."""
    n, c, hh, ww = imgs.shape
    p = self.patch
    x = imgs.reshape(n, c, hh // p, p, ww // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(n, (hh // p) * (ww // p), p * p * c)

  def forward_encoder(self, imgs, noise):
    x = self.patch_embed(imgs) + self.pos_embed[:, 1:]
    x, mask, ids_restore, _ = torch_masking(x, noise, self.mask_ratio)
    cls = (self.cls_token + self.pos_embed[:, :1]).expand(x.shape[0], -1, -1)
    x = torch.cat([cls, x], dim=1)
    for blk in self.blocks:
      x = blk(x)
    return self.norm(x), mask, ids_restore

  def forward_decoder(self, latent, ids_restore):
    x = self.decoder_embed(latent)
    n, length, d = x.shape[0], ids_restore.shape[1], x.shape[2]
    fill = self.mask_token.expand(n, length + 1 - x.shape[1], -1)
    tokens = torch.cat([x[:, 1:], fill], dim=1)
    tokens = torch.gather(tokens, 1, ids_restore[..., None].expand(-1, -1, d))
    x = torch.cat([x[:, :1], tokens], dim=1) + self.decoder_pos_embed
    for blk in self.decoder_blocks:
      x = blk(x)
    return self.decoder_pred(self.decoder_norm(x))[:, 1:]

  def forward_loss(self, imgs, pred, mask, norm_pix_loss):
    target = self.patchify(imgs)
    if norm_pix_loss:  # torch's var is the unbiased one.
      target = (target - target.mean(-1, keepdim=True)) / (target.var(-1, keepdim=True)
                                                            + 1e-6) ** 0.5
    per_patch = ((pred - target) ** 2).mean(-1)
    return (per_patch * mask).sum() / mask.sum()


CONFIGS = {
    # img, patch, width, depth, heads, dec_width, dec_depth, dec_heads, mask_ratio
    "p16": (64, 16, 64, 2, 4, 32, 2, 4, 0.75),   # L = 16, 4 kept.
    "p8": (64, 8, 64, 2, 2, 48, 2, 3, 0.6),      # L = 64, 25 kept.
}


def build(name, seed=0):
  img, patch, width, depth, heads, dec_width, dec_depth, dec_heads, ratio = CONFIGS[name]
  torch.manual_seed(seed)
  ref = lib.randomize_(TorchMAE(img, patch, width, depth, heads, dec_width, dec_depth,
                                dec_heads, ratio), seed)
  # Everything is perturbed (the encoder's position embedding too: it is converted like any
  # tensor), except the decoder's table, which the JAX MAE recomputes instead of loading.
  with torch.no_grad():
    ref.decoder_pos_embed.copy_(torch.from_numpy(mae_sincos_table(dec_width, img // patch)))
  encoder = ViT(width, depth, heads, patch=patch, img_size=img)
  module = mae_lib.MAE(encoder, mask_ratio=ratio, decoder_width=dec_width,
                       decoder_depth=dec_depth, decoder_heads=dec_heads)
  return ref, module


def expected_mae(module, img):
  num = (img // module.encoder.patch) ** 2
  return jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((1, img, img, 3)),
                        jnp.zeros((1, num)))


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def parity(request, tmp_path_factory):
  """Both models on one checkpoint, images and noise; the file is wrapped as MAE saves it."""
  name = request.param
  img, patch = CONFIGS[name][:2]
  ref, module = build(name)
  path = lib.save_state({"model": ref.state_dict(), "optimizer": {"step": torch.ones(1)}},
                        tmp_path_factory.mktemp(name) / "checkpoint-799.pth")
  flat = convert.read_checkpoint(path)
  variables, dropped = convert.convert_state(flat, layouts.MAE_PRETRAIN,
                                             expected_mae(module, img), source=path)
  images = lib.images(3, img, seed=1)
  noise = np.random.RandomState(2).rand(3, (img // patch) ** 2).astype(np.float32)
  out, inter = jax.jit(module.apply)(variables, images, noise)
  with torch.no_grad():
    x = lib.nchw(images)
    latent, mask, ids_restore = ref.forward_encoder(x, torch.from_numpy(noise))
    pred = ref.forward_decoder(latent, ids_restore)
  return dict(name=name, ref=ref, module=module, variables=variables, dropped=dropped,
              images=images, x=x, out=jax.tree.map(np.asarray, out),
              latent=np.asarray(inter["latent"]), ref_latent=latent.numpy(),
              ref_pred=pred, ref_mask=mask)


def test_conversion_accounts_for_every_tensor(parity):
  """Only the fixed decoder table and the training state are dropped; the rest is mapped."""
  assert parity["dropped"] == {
      "model.decoder_pos_embed": "fixed 2-D sin-cos table, recomputed by the decoder",
      "optimizer.step": "MAE training state (optimiser, scaler, epoch)"}
  params = parity["variables"]["params"]
  depth, dec_depth = CONFIGS[parity["name"]][3], CONFIGS[parity["name"]][6]
  assert sorted(k for k in params if k.startswith("decoder_blocks_")) == [
      f"decoder_blocks_{i}" for i in range(dec_depth)]
  assert sum(k.startswith("blocks_") for k in params["encoder"]) == depth


def test_latent_pred_mask_parity(parity):
  out = parity["out"]
  np.testing.assert_array_equal(out["mask"], parity["ref_mask"].numpy())
  assert parity["latent"].shape == parity["ref_latent"].shape
  lib.assert_close(parity["latent"], parity["ref_latent"], "latent")
  lib.assert_close(out["pred"], parity["ref_pred"].numpy(), "pred")


@pytest.mark.parametrize("norm_pix_loss", [True, False])
def test_loss_parity(parity, norm_pix_loss):
  patch = CONFIGS[parity["name"]][1]
  out = parity["out"]
  ours = mae_lib.reconstruction_loss(jnp.asarray(out["pred"]), parity["images"],
                                     jnp.asarray(out["mask"]), patch, norm_pix_loss)
  with torch.no_grad():
    theirs = parity["ref"].forward_loss(parity["x"], parity["ref_pred"], parity["ref_mask"],
                                        norm_pix_loss)
  lib.assert_close(np.float32(ours), theirs.numpy(), f"loss (norm_pix_loss={norm_pix_loss})")


def test_encoder_is_a_plain_vit(parity):
  """`params['encoder']` loads as is into a zoo ViT, which then computes timm's
  full-image features (no masking) for a VisionTransformer holding MAE's encoder."""
  name, ref = parity["name"], parity["ref"]
  img, patch, width, depth, heads = CONFIGS[name][:5]
  vit = VisionTransformer(img_size=img, patch_size=patch, embed_dim=width, depth=depth,
                          num_heads=heads, mlp_ratio=4.0, qkv_bias=True,
                          norm_layer=functools.partial(nn.LayerNorm, eps=1e-6),
                          num_classes=0, global_pool="token")
  encoder_keys = set(vit.state_dict())
  vit.load_state_dict({k: v for k, v in ref.state_dict().items() if k in encoder_keys})
  vit.eval()
  module = ViT(width, depth, heads, patch=patch, img_size=img)
  params = convert.check_native(
      convert.flatten_variables({"params": parity["variables"]["params"]["encoder"]}),
      lib.expected_tree(module, img), "params['encoder']")
  out, _ = lib.run(module, params, parity["images"])
  with torch.no_grad():
    feats = vit.forward_features(parity["x"]).numpy()
  lib.assert_close(out["cls"], feats[:, 0], "cls")
  lib.assert_close(out["tokens"], feats[:, 1:], "tokens")


@pytest.mark.parametrize("width, side", [(32, 4), (48, 8), (768, 14), (1024, 16)])
def test_sincos_table_is_maes(width, side):
  ours = mae_lib.sincos_pos_embed(width, (side, side))
  theirs = mae_sincos_table(width, side)
  assert ours.shape == theirs.shape == (1 + side * side, width)
  assert ours.dtype == np.float32
  np.testing.assert_array_equal(ours[0], 0)
  lib.assert_close(ours, theirs, f"sin-cos table {width}x{side}")
  lib.assert_close(mae_lib.sincos_pos_embed(width, (side, side), cls_token=False), theirs[1:])


@pytest.mark.parametrize("length, ratio", [
    (16, 0.75), (49, 0.75), (64, 0.6), (16, 0.9), (10, 0.7), (64, 0.0)])
def test_masking_keeps_int_of_l_times_one_minus_ratio(length, ratio):
  """Same kept indices (in the same order), mask and restore as MAE's masking."""
  keep = int(length * (1 - ratio))
  noise = np.random.RandomState(length).rand(4, length).astype(np.float32)
  keep_idx, mask, restore = mae_lib.random_masking(jnp.asarray(noise),
                                                   mae_lib.num_kept(length, ratio))
  x = torch.arange(length, dtype=torch.float32)[None, :, None].expand(4, -1, 1)
  _, ref_mask, ref_restore, ref_keep = torch_masking(x, torch.from_numpy(noise), ratio)
  assert keep_idx.shape == (4, keep)
  np.testing.assert_array_equal(np.asarray(mask).sum(1), length - keep)
  np.testing.assert_array_equal(np.asarray(keep_idx), ref_keep.numpy())
  np.testing.assert_array_equal(np.asarray(mask), ref_mask.numpy())
  np.testing.assert_array_equal(np.asarray(restore), ref_restore.numpy())


def test_latent_holds_cls_and_the_kept_patches():
  """The MAE's encoder sees 1 + int(L * (1 - ratio)) tokens (112 px / 16: L = 49, 12 kept)."""
  enc = ViT(32, 1, 2, patch=16, img_size=112)
  for ratio, kept in [(0.75, 12), (0.5, 24), (0.9, 4)]:
    module = mae_lib.MAE(enc, mask_ratio=ratio, decoder_width=16, decoder_depth=1,
                         decoder_heads=2)
    (out, inter), _ = jax.eval_shape(
        module.init_with_output, jax.random.key(0), jnp.zeros((2, 112, 112, 3)),
        jnp.zeros((2, 49)))
    assert inter["latent"].shape == (2, 1 + kept, 32), ratio
    assert out["pred"].shape == (2, 49, 16 * 16 * 3)


def test_unknown_decoder_or_head_keys_are_unexpected(tmp_path):
  """MAE_PRETRAIN maps the decoder instead of dropping it, so stray keys are reported."""
  ref, module = build("p16")
  state = {**ref.state_dict(), "decoder_extra.weight": torch.zeros(2, 2),
           "head.weight": torch.zeros(3, 3)}
  path = lib.save_state(state, tmp_path / "mae.pth")
  with pytest.raises(convert.ConversionError, match=r"decoder_extra\.weight") as e:
    convert.convert_state(convert.read_checkpoint(path), layouts.MAE_PRETRAIN,
                          expected_mae(module, 64), source=path)
  assert "head.weight" in str(e.value)


def test_missing_decoder_block_is_reported(tmp_path):
  ref, module = build("p16")
  state = {k: v for k, v in ref.state_dict().items()
           if not k.startswith("decoder_blocks.1.mlp")}
  path = lib.save_state(state, tmp_path / "mae.pth")
  with pytest.raises(convert.ConversionError, match=r"params/decoder_blocks_1/mlp/fc1/kernel"):
    convert.convert_state(convert.read_checkpoint(path), layouts.MAE_PRETRAIN,
                          expected_mae(module, 64), source=path)
