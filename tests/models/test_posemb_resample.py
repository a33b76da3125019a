"""Position-embedding resampling and the resizing kernels vs PyTorch / timm."""
import functools
import inspect

import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

from vcbench.models import resize  # pylint: disable=g-import-not-at-top
from vcbench.models import zoo
from vcbench.models.vit import ViT

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

GRIDS = [((14, 14), (16, 16)), ((14, 14), (7, 7)), ((16, 16), (14, 14)), ((14, 14), (10, 20)),
         ((3, 5), (8, 4)), ((7, 7), (2, 2)), ((2, 2), (9, 9))]


def vc1_resample(pos, old, new, prefix=1):
  """VC-1 / timm 0.6.11: F.interpolate(grid, size, 'bicubic', align_corners=False)."""
  pos = torch.from_numpy(pos)
  d = pos.shape[-1]
  grid = pos[:, prefix:].reshape(1, old[0], old[1], d).permute(0, 3, 1, 2)
  grid = F.interpolate(grid, size=new, mode="bicubic", align_corners=False)
  grid = grid.permute(0, 2, 3, 1).reshape(1, new[0] * new[1], d)
  return torch.cat([pos[:, :prefix], grid], 1).numpy()


def timm_resample(pos, old, new, prefix=1):
  from timm.layers import resample_abs_pos_embed  # pylint: disable=g-import-not-at-top
  if "antialias" not in inspect.signature(resample_abs_pos_embed).parameters:
    return vc1_resample(pos, old, new, prefix)
  return resample_abs_pos_embed(torch.from_numpy(pos), list(new), list(old),
                                num_prefix_tokens=prefix, antialias=False).numpy()


@pytest.mark.parametrize("old, new", GRIDS)
@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_resample_pos_embed_matches_vc1(old, new, backend):
  pos = np.random.RandomState(0).randn(1, 1 + old[0] * old[1], 24).astype(np.float32)
  arg = pos if backend == "numpy" else jnp.asarray(pos)
  square = old[0] == old[1]
  ours = np.asarray(resize.resample_pos_embed(arg, new, 1, old_grid=None if square else old))
  assert ours.shape == (1, 1 + new[0] * new[1], 24)
  assert ours.dtype == np.float32
  np.testing.assert_array_equal(ours[:, :1], pos[:, :1])  # CLS untouched.
  lib.assert_close(ours, vc1_resample(pos, old, new), "vs F.interpolate")
  lib.assert_close(ours, timm_resample(pos, old, new), "vs timm antialias=False")


def test_resample_pos_embed_with_several_prefix_tokens():
  pos = np.random.RandomState(1).randn(1, 4 + 36, 8).astype(np.float32)
  ours = resize.resample_pos_embed(pos, (9, 9), num_prefix_tokens=4)
  np.testing.assert_array_equal(ours[:, :4], pos[:, :4])
  lib.assert_close(ours, vc1_resample(pos, (6, 6), (9, 9), prefix=4))


def test_resample_pos_embed_same_grid_is_identity_and_bad_grids_fail():
  pos = np.random.RandomState(2).randn(1, 17, 8).astype(np.float32)
  assert resize.resample_pos_embed(pos, (4, 4)) is pos
  with pytest.raises(ValueError, match="square"):
    resize.resample_pos_embed(pos[:, :16], (4, 4))          # 15 patch tokens.
  with pytest.raises(ValueError, match="old_grid"):
    resize.resample_pos_embed(pos, (4, 4), old_grid=(3, 3))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("in_hw, out_hw", [((4, 4), (16, 16)), ((4, 4), (2, 2)), ((5, 7), (3, 11)),
                                           ((7, 7), (28, 28)), ((3, 3), (1, 1))])
def test_resize_hw_matches_interpolate(mode, in_hw, out_hw):
  x = np.random.RandomState(3).randn(2, *in_hw, 5).astype(np.float32)
  ref = lib.to_nhwc(F.interpolate(lib.nchw(x), size=out_hw, mode=mode, align_corners=False))
  lib.assert_close(resize.resize_hw(x, out_hw, mode), ref, "numpy")
  lib.assert_close(np.asarray(resize.resize_hw(jnp.asarray(x), out_hw, mode)), ref, "jax")


def test_resize_rejects_unknown_mode():
  with pytest.raises(ValueError, match="mode"):
    resize.interp_matrix(4, 8, "nearest")


def timm_vit(img_size, width=64, depth=4, heads=2, patch=16):
  torch.manual_seed(0)
  model = timm.models.vision_transformer.VisionTransformer(
      img_size=img_size, patch_size=patch, embed_dim=width, depth=depth, num_heads=heads,
      qkv_bias=True, norm_layer=functools.partial(torch.nn.LayerNorm, eps=1e-6),
      num_classes=0, global_pool="token")
  return lib.randomize_(model)


@pytest.fixture(scope="module")
def grid14_and_grid16():
  """A checkpoint trained at 224 (grid 14) and the timm reference built at 256 (grid 16)
  with the checkpoint's position embedding resampled the VC-1 way."""
  trained = timm_vit(224)
  state = trained.state_dict()
  at256 = timm_vit(256)
  resampled = dict(state)
  resampled["pos_embed"] = torch.from_numpy(
      timm_resample(state["pos_embed"].numpy(), (14, 14), (16, 16)))
  at256.load_state_dict(resampled)
  return state, at256.eval()


def _reference(model, x):
  with torch.no_grad():
    f = model.forward_features(lib.nchw(x)).numpy()
  return f[:, 0], f[:, 1:]


def test_checkpoint_resampled_at_conversion(tmp_path, grid14_and_grid16):
  """ViT built for 256: the 197-token embedding is resampled to 257 when converting."""
  state, ref_model = grid14_and_grid16
  path = lib.save_state(state, tmp_path / "vit224.pth")
  module = ViT(64, 4, 2, patch=16, img_size=256)
  variables, _ = lib.convert_file(path, zoo.entry("vc1_vitb").layout, module, 256)
  assert variables["params"]["pos_embed"].shape == (1, 257, 64)
  lib.assert_close(variables["params"]["pos_embed"], ref_model.pos_embed.detach().numpy(),
                   "pos_embed")
  x = lib.images(2, 256, seed=5)
  out, _ = lib.run(module, variables, x)
  cls, tokens = _reference(ref_model, x)
  lib.assert_close(out["cls"], cls, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")


def test_checkpoint_resampled_at_run_time(tmp_path, grid14_and_grid16):
  """ViT kept at its training grid (what zoo.load does) and fed 256 px: same numbers."""
  state, ref_model = grid14_and_grid16
  path = lib.save_state(state, tmp_path / "vit224.pth")
  module = ViT(64, 4, 2, patch=16, img_size=224)
  variables, _ = lib.convert_file(path, zoo.entry("vc1_vitb").layout, module, 224)
  assert variables["params"]["pos_embed"].shape == (1, 197, 64)
  x = lib.images(2, 256, seed=6)
  out, _ = lib.run(module, variables, x)
  cls, tokens = _reference(ref_model, x)
  assert out["tokens"].shape == (2, 256, 64)
  lib.assert_close(out["cls"], cls, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")


def test_zoo_load_with_img_size_keeps_training_grid(tmp_path):
  """zoo.load(..., img_size=256) on a ViT-B/16 224 checkpoint: the variables keep the
  checkpoint's grid (resampled at run time, covered above) and preprocessing follows."""
  import jax  # pylint: disable=g-import-not-at-top
  trained = timm_vit(224, width=768, depth=12, heads=12)
  path = lib.save_state({"model": trained.state_dict()}, tmp_path / "vc1.pth")
  enc = zoo.load("vc1_vitb", checkpoint=path, img_size=256, cache=False)
  assert enc.preprocess.size == 256 and enc.preprocess.resize == round(256 * 256 / 224)
  assert enc.module.img_size == 224
  np.testing.assert_array_equal(enc.params["params"]["pos_embed"],
                                trained.pos_embed.detach().numpy())
  out, _ = jax.eval_shape(enc.module.apply, enc.params, jnp.zeros((1, 256, 256, 3)))
  assert out["cls"].shape == (1, 768) and out["tokens"].shape == (1, 256, 768)
