"""timm VisionTransformer (VC-1 / MAE / MVP layout) -> vcbench ViT: conversion and parity."""
import functools

import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

from vcbench.models import convert  # pylint: disable=g-import-not-at-top
from vcbench.models import layouts
from vcbench.models import zoo
from vcbench.models.vit import ViT, default_pyramid_layers

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

# The real entries' layout (with the 'model.' / 'state_dict.' prefixes), on small models.
VC1_LAYOUT = zoo.entry("vc1_vitb").layout


def timm_vit(width=64, depth=4, heads=2, patch=16, img_size=64, seed=0):
  """As VC-1 / MAE build it: qkv bias, LayerNorm eps 1e-6, CLS-token representation."""
  torch.manual_seed(seed)
  model = timm.models.vision_transformer.VisionTransformer(
      img_size=img_size, patch_size=patch, embed_dim=width, depth=depth, num_heads=heads,
      mlp_ratio=4.0, qkv_bias=True, norm_layer=functools.partial(torch.nn.LayerNorm, eps=1e-6),
      num_classes=0, global_pool="token")
  return lib.randomize_(model, seed)


def reference(model, x):
  with torch.no_grad():
    feats = model.forward_features(lib.nchw(x)).numpy()
  return feats[:, 0], feats[:, 1:]


@pytest.mark.parametrize("patch, img_size, width, heads", [
    (16, 64, 64, 2),   # ViT-*/16, grid 4.
    (14, 56, 64, 4),   # ViT-*/14, grid 4.
    (32, 64, 64, 4),   # ViT-*/32, grid 2.
])
def test_timm_vit_parity(tmp_path, patch, img_size, width, heads):
  model = timm_vit(width=width, depth=4, heads=heads, patch=patch, img_size=img_size)
  path = lib.save_state(model.state_dict(), tmp_path / "vit.pth")
  module = ViT(width, 4, heads, patch=patch, img_size=img_size)
  variables, dropped = lib.convert_file(path, VC1_LAYOUT, module, img_size)
  assert not dropped
  x = lib.images(2, img_size)
  out, inter = lib.run(module, variables, x)
  cls, tokens = reference(model, x)
  grid = img_size // patch
  assert out["cls"].shape == (2, width)
  assert out["tokens"].shape == (2, grid * grid, width)
  lib.assert_close(out["cls"], cls, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")
  assert sorted(inter) == [f"block_{i}" for i in range(4)]


def test_mae_wrapped_checkpoint_drops_decoder_and_mask_token(tmp_path):
  """MAE / VC-1 pretraining files: {'model': encoder + decoder + mask_token, ...}."""
  model = timm_vit()
  state = dict(model.state_dict())
  width, dec = 64, 32
  state.update({
      "mask_token": torch.randn(1, 1, width),
      "decoder_embed.weight": torch.randn(dec, width),
      "decoder_embed.bias": torch.randn(dec),
      "decoder_pos_embed": torch.randn(1, 17, dec),
      "decoder_blocks.0.norm1.weight": torch.randn(dec),
      "decoder_blocks.0.attn.qkv.weight": torch.randn(3 * dec, dec),
      "decoder_norm.weight": torch.randn(dec),
      "decoder_pred.weight": torch.randn(16 * 16 * 3, dec),
      "decoder_pred.bias": torch.randn(16 * 16 * 3),
  })
  path = lib.save_state({"model": state, "epoch": 799}, tmp_path / "mae.pth")
  module = ViT(width, 4, 2, patch=16, img_size=64)
  variables, dropped = lib.convert_file(path, VC1_LAYOUT, module, 64)
  decoder_keys = {f"model.{k}" for k in state if k.startswith("decoder") or k == "mask_token"}
  assert set(dropped) == decoder_keys
  assert "decoder" in dropped["model.decoder_pred.weight"]
  assert "mask" in dropped["model.mask_token"]
  x = lib.images(2, 64, seed=1)
  out, _ = lib.run(module, variables, x)
  cls, tokens = reference(model, x)
  lib.assert_close(out["cls"], cls, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")


def test_decoder_keys_without_a_rule_would_be_unexpected(tmp_path):
  """The drop rules are what make MAE files load; an unknown extra key still fails."""
  model = timm_vit(depth=4)
  state = {"model": {**model.state_dict(), "decoder_pred.weight": torch.zeros(2, 2),
                     "projector.weight": torch.zeros(3, 3)}}
  path = lib.save_state(state, tmp_path / "mae.pth")
  with pytest.raises(convert.ConversionError, match=r"projector\.weight"):
    lib.convert_file(path, VC1_LAYOUT, ViT(64, 4, 2, patch=16, img_size=64), 64)


def gvue_pyramid(model, x, layers):
  """G-VUE's ViT neck: raw outputs of `layers`, [B, D, h, w], bilinear to H/4 .. H/32."""
  captured = {}
  hooks = [model.blocks[i].register_forward_hook(
      lambda _m, _inp, out, i=i: captured.__setitem__(i, out)) for i in layers]
  with torch.no_grad():
    model.forward_features(lib.nchw(x))
  for h in hooks:
    h.remove()
  b, size = x.shape[0], x.shape[1]
  grid = size // model.patch_embed.patch_size[0]
  maps = []
  for i, div in zip(layers, (4, 8, 16, 32)):
    f = captured[i][:, 1:].transpose(1, 2).reshape(b, -1, grid, grid)
    f = F.interpolate(f, size=(size // div, size // div), mode="bilinear", align_corners=False)
    maps.append(lib.to_nhwc(f))
  return maps




@pytest.mark.parametrize("patch, img_size", [
    (16, 64), (16, 96),
    (8, 64), (32, 64), (14, 112),
])
def test_gvue_pyramid_parity(tmp_path, patch, img_size):
  model = timm_vit(patch=patch, img_size=img_size, depth=4)
  path = lib.save_state(model.state_dict(), tmp_path / "vit.pth")
  module = ViT(64, 4, 2, patch=patch, img_size=img_size, pyramid_layers=(0, 1, 2, 3))
  variables, _ = lib.convert_file(path, VC1_LAYOUT, module, img_size)
  x = lib.images(2, img_size, seed=2)
  out, _ = lib.run(module, variables, x)
  ref = gvue_pyramid(model, x, (0, 1, 2, 3))
  assert len(out["pyramid"]) == 4
  for level, (ours, theirs, div) in enumerate(zip(out["pyramid"], ref, (4, 8, 16, 32))):
    assert ours.shape == (2, img_size // div, img_size // div, 64), level
    lib.assert_close(ours, theirs, f"pyramid level {level} (stride {div})")


def test_gvue_pyramid_picks_non_default_layers(tmp_path):
  """pyramid_layers selects raw block outputs (not normed), in the given order."""
  model = timm_vit(depth=4)
  path = lib.save_state(model.state_dict(), tmp_path / "vit.pth")
  module = ViT(64, 4, 2, patch=16, img_size=64, pyramid_layers=(3, 1, 0, 2))
  variables, _ = lib.convert_file(path, VC1_LAYOUT, module, 64)
  x = lib.images(2, 64, seed=3)
  out, _ = lib.run(module, variables, x)
  for level, (ours, theirs) in enumerate(zip(out["pyramid"], gvue_pyramid(model, x, (3, 1, 0, 2)))):
    lib.assert_close(ours, theirs, f"pyramid level {level}")


def test_default_pyramid_layers_match_gvue():
  assert default_pyramid_layers(12) == (2, 5, 8, 11)     # ViT-B: G-VUE's blocks.
  assert default_pyramid_layers(24) == (5, 11, 17, 23)   # ViT-L.
  assert default_pyramid_layers(4) == (0, 1, 2, 3)


def test_shallow_vit_builds_with_default_pyramid():
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  out, _ = jax.eval_shape(ViT(64, 2, 2, patch=16, img_size=64).init_with_output,
                          jax.random.key(0), jnp.zeros((1, 64, 64, 3)))[0]
  assert len(out["pyramid"]) == 4


def test_vc1_entry_converts_real_size_vit_b(tmp_path):
  """vc1_vitb end to end through zoo.load with the real ViT-B/16 architecture."""
  model = timm_vit(width=768, depth=12, heads=12, patch=16, img_size=224)
  path = lib.save_state({"model": model.state_dict()}, tmp_path / "vc1_vitb.pth")
  enc = zoo.load("vc1_vitb", checkpoint=path, cache=False)
  x = lib.images(1, 224, seed=4)
  out, _ = lib.run(enc.module, enc.params, x)
  cls, tokens = reference(model, x)
  lib.assert_close(out["cls"], cls, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")
  ref = gvue_pyramid(model, x, (2, 5, 8, 11))
  for level, (ours, theirs) in enumerate(zip(out["pyramid"], ref)):
    lib.assert_close(ours, theirs, f"pyramid level {level}")


def test_layout_table_is_the_timm_one():
  assert VC1_LAYOUT.rules == layouts.TIMM_VIT.rules
  for name in ("vc1_vitl", "mae_vitb_in", "mae_vitl_in", "mvp_vitb", "mvp_vitl"):
    assert zoo.entry(name).layout == VC1_LAYOUT, name
