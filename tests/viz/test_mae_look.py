"""vcbench.viz.mae_look (attention maps, de-normalised reconstructions, the figure) and
launch.mae_look (the command, end to end on a tiny MAE checkpoint)."""
import os
import struct

import numpy as np
import pytest

import vcbench  # noqa: F401  # XLA defaults before JAX starts.
import jax
import jax.numpy as jnp

from launch import mae_look as cli  # noqa: F401 - the command line imports.
from vcbench.algos import mae
from vcbench.checkpoint import Checkpointer
from vcbench.data import frames
from vcbench.models import convert
from vcbench.models import mae as mae_model
from vcbench.models import zoo
from vcbench.models.vit import ViT
from vcbench.viz import mae_look


def _png_size(path):
  data = open(path, "rb").read()
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", data[16:24])  # IHDR width, height.


def tiny_config():
  c = mae.default_config()
  c.encoder, c.img_size = "random_vit_ti", 32
  c.decoder_width, c.decoder_depth, c.decoder_heads = 32, 1, 2
  c.batch_size = 4
  return c


def _random_like(shapes, seed=0, scale=0.3):
  """Numpy normal values for every leaf of an abstract tree (integer leaves: zeros): random
  weights with no parameter moved to a special value (LayerNorm 1/0, zero biases), and no
  initialiser to compile, which on these shared CPUs costs more than the tests themselves."""
  rng = np.random.default_rng(seed)

  def leaf(s):
    if not jnp.issubdtype(s.dtype, jnp.floating):
      return np.zeros(s.shape, s.dtype)
    return (scale * rng.standard_normal(s.shape)).astype(s.dtype)
  return jax.tree.map(leaf, shapes)


def _layer_norm(x, p, eps):
  mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * np.asarray(p["scale"]) + np.asarray(p["bias"])


def _patchify(images, p):
  """[B, H, W, C] -> [B, h*w, p*p*C] in numpy, MAE's order (row-major patches, channels last)."""
  b, hh, ww, c = images.shape
  x = images.reshape(b, hh // p, p, ww // p, p, c).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(b, -1, p * p * c)


def _embedded(vit, params, images):
  """The tokens before the first block, in numpy: patch projection, CLS, position."""
  patches = _patchify(images, vit.patch)
  kernel = np.asarray(params["patch_embed"]["kernel"]).reshape(-1, vit.width)
  x = patches @ kernel + np.asarray(params["patch_embed"]["bias"])
  cls = np.broadcast_to(np.asarray(params["cls_token"]), (x.shape[0], 1, vit.width))
  return np.concatenate([cls, x], axis=1) + np.asarray(params["pos_embed"])


def _numpy_attention(vit, params, x):
  """softmax(q k^T / sqrt(d)) of the CLS query over all keys, CLS key dropped, renormalised,
  averaged over heads: [B, patches]."""
  p = params[f"blocks_{vit.depth - 1}"]
  x = _layer_norm(np.asarray(x, np.float64), p["norm1"], vit.ln_eps)
  qkv = x @ np.asarray(p["attn"]["qkv"]["kernel"]) + np.asarray(p["attn"]["qkv"]["bias"])
  b, n, _ = qkv.shape
  d = vit.width // vit.heads
  qkv = qkv.reshape(b, n, 3, vit.heads, d)   # timm's fused layout: (q | k | v), heads inside.
  q, k = qkv[:, :, 0], qkv[:, :, 1]
  logits = np.einsum("bhd,bnhd->bhn", q[:, 0], k) / np.sqrt(d)
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  patch_weights = weights[:, :, 1:] / weights[:, :, 1:].sum(-1, keepdims=True)
  return patch_weights.mean(axis=1)


@pytest.mark.parametrize("depth", [1, 2])
def test_attention_maps_match_numpy_softmax_and_sum_to_one(depth):
  vit = ViT(width=16, depth=depth, heads=2, patch=8, img_size=32)
  images = np.random.default_rng(0).standard_normal((3, 32, 32, 3)).astype(np.float32)
  variables = _random_like(jax.eval_shape(vit.init, jax.random.key(0), images))
  maps = np.asarray(mae_look.attention_maps(vit, variables, images))
  assert maps.shape == (3, 4, 4)
  np.testing.assert_allclose(maps.sum(axis=(1, 2)), 1.0, rtol=1e-5)
  params = variables["params"]
  if depth == 1:
    x = _embedded(vit, params, images)
  else:
    _, inter = jax.jit(vit.apply)(variables, images)
    x = inter[f"block_{depth - 2}"]
  expected = _numpy_attention(vit, params, x).reshape(3, 4, 4)
  np.testing.assert_allclose(maps, expected, rtol=1e-4, atol=1e-6)
  assert np.ptp(maps) > 1e-3   # random weights give a map that is not flat


def test_denormalise_patches_inverts_the_norm_pix_target():
  images = np.random.default_rng(0).standard_normal((2, 16, 16, 3)).astype(np.float32) * 2 + 1
  target = _patchify(images, 8)
  target = (target - target.mean(-1, keepdims=True)) / np.sqrt(
      target.var(-1, keepdims=True, ddof=1) + 1e-6)
  pred = target.reshape(2, 2, 2, 8, 8, 3).transpose(0, 1, 3, 2, 4, 5).reshape(images.shape)
  np.testing.assert_allclose(mae_look.denormalise_patches(pred, images, 8), images, atol=1e-4)


@pytest.fixture(scope="module")
def tiny_mae():
  config = tiny_config()
  model = mae.build_model(config)
  shapes = jax.eval_shape(lambda key: mae_model.init(model, key, config.img_size),
                          jax.random.key(0))
  return config, model, _random_like(shapes, scale=0.05)


def test_figure_writes_png_of_expected_size(tmp_path, tiny_mae):
  config, model, variables = tiny_mae
  preprocess = mae_look.sized(zoo.entry(config.encoder).preprocess, config.img_size)
  rng = np.random.default_rng(1)
  images = jax.jit(preprocess)(rng.integers(0, 256, (3, 40, 40, 3), dtype=np.uint8))
  noise = rng.uniform(size=(3, 4)).astype(np.float32)
  columns = mae_look.mae_columns(model, variables, images, noise, preprocess)
  assert list(columns) == ["original", "masked", "reconstruction", "reconstruction + visible",
                           "attention"]
  for tile in columns.values():
    assert tile.shape == (3, 32, 32, 3) and tile.dtype == np.uint8
  grey = np.all(columns["masked"] == mae_look.GREY, axis=-1)
  assert grey.mean() == pytest.approx(config.mask_ratio)   # 3 of 4 patches per image
  pasted, original = columns["reconstruction + visible"], columns["original"]
  np.testing.assert_array_equal(pasted[~grey], original[~grey])
  np.testing.assert_array_equal(pasted[grey], columns["reconstruction"][grey])

  out = tmp_path / "figs" / "look.png"
  mae_look.save_png(mae_look.figure(columns, title="tiny"), out)
  assert os.path.getsize(out) > 1000
  assert _png_size(out) == mae_look.figure_size(3, 5, 32)
  assert os.listdir(out.parent) == ["look.png"]   # atomic: no temporary left


def test_spread_shares_frames_over_shards():
  picks = mae_look.spread(5, [10, 3])
  assert [list(p) for p in picks] == [[1, 5, 8], [0, 2]]
  assert [len(p) for p in mae_look.spread(2, [4, 4, 4])] == [1, 1, 0]


def _write_shards(tmp_path):
  rng = np.random.default_rng(0)
  paths = []
  for name, n, size in (("a", 5, 40), ("b", 3, 48)):
    paths.append(str(tmp_path / f"{name}.npy"))   # Shards as `vcbench.data.frames` writes them.
    frames.write_shard(paths[-1], rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
                       {"source": "test"})
  return paths


def test_cli_end_to_end_on_a_tiny_checkpoint(tmp_path):
  config = tiny_config()
  state = _random_like(jax.eval_shape(mae.Trainer(config).init, jax.random.key(3)), seed=3,
                       scale=0.05)   # a TrainState like training's, with other weights
  workdir = tmp_path / "run"
  with Checkpointer(workdir / "checkpoints") as ckpt:   # the layout `runner.run` writes
    ckpt.save(7, {"state": state, "metrics": {"loss": np.zeros(7, np.float32)}})
  step, params = mae_look.restore_params(config, str(workdir))
  assert step == 7
  for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(state.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

  out = tmp_path / "look.png"
  path = mae_look.run(config, str(workdir), _write_shards(tmp_path), n=3, out=out, seed=0)
  assert path == out
  assert _png_size(out) == mae_look.figure_size(3, 5, 32)


def test_cli_refuses_a_workdir_without_checkpoints(tmp_path):
  with pytest.raises(FileNotFoundError, match="no checkpoints"):
    mae_look.run(tiny_config(), str(tmp_path), _write_shards(tmp_path), n=2, out=tmp_path / "x.png")


def test_cli_encoder_only(tmp_path):
  # vcbench_vit_ti works at 112 px: a quarter of the tokens of a 224-px entry, same code path.
  entry = zoo.entry("vcbench_vit_ti")
  size = entry.preprocess.size
  module = entry.build(img_size=size, dtype=jnp.float32)
  shapes = jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((1, size, size, 3)))
  weights = str(tmp_path / "vit_ti.npz")
  convert.save_variables(weights, _random_like(shapes, scale=0.05))
  out = tmp_path / "attention.png"
  mae_look.run_encoder_only(f"vcbench_vit_ti:{weights}", _write_shards(tmp_path), n=2, out=out)
  assert _png_size(out) == mae_look.figure_size(2, 2, size)
