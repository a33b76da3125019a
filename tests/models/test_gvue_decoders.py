"""G-VUE task decoders: parity with PyTorch modules of the same math, masking, dropout, gradients.

Every variable of a Flax decoder is drawn at random (LayerNorm and BatchNorm affine parameters,
biases and running statistics too, so an identity initialisation cannot hide a transpose or a
swapped parameter), the variables are copied into a PyTorch module of the same math
(`gvue_torch_decoders`, in the layout of the G-VUE reference), and the two are compared on the
same input: max|a - b| / max|b| <= 1e-5.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vcbench.errors import UserError  # pylint: disable=g-import-not-at-top
from vcbench.models import gvue_decoders as gd  # pylint: disable=g-import-not-at-top

import gvue_torch_decoders as ref  # pylint: disable=g-import-not-at-top
import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top
from gvue_torch_decoders import nchw, t  # pylint: disable=g-import-not-at-top

# Small parity models, so the file runs in seconds.
WIDTH, DEPTH, HEADS, MLP = 32, 2, 4, 64


def rand(*shape, seed=0):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def random_variables(shapes_tree, seed=0):
  """Random values for every variable, none at an initial value that could hide a bug (LayerNorm
  and BatchNorm scales off one, biases and running means off zero, positive variances)."""
  rng = np.random.RandomState(seed)

  def fill(path, leaf):
    name = jax.tree_util.keystr(path)
    noise = rng.randn(*leaf.shape).astype(np.float32)
    if name.endswith("['var']"):
      return 0.5 + rng.rand(*leaf.shape).astype(np.float32)
    if name.endswith("['scale']"):
      return 1 + 0.2 * noise
    if leaf.ndim == 1:
      return 0.2 * noise
    return noise / np.sqrt(np.prod(leaf.shape[:-1]))   # Kernels: unit variance out.

  return jax.tree_util.tree_map_with_path(fill, shapes_tree)


def init(module, *args):
  """Random variables of the module's structure. They come from NumPy rather than the module's
  initialisers: on the CPU, compiling JAX's random number generation for rank-5 convolution
  kernels takes seconds per shape, more than the rest of a test."""
  return random_variables(jax.eval_shape(
      lambda: module.init(jax.random.key(0), *args, train=False)))


# --- Sine position embedding --------------------------------------------------------------------


@pytest.mark.parametrize("h, w, dim, temperature, normalize", [
    (3, 4, 32, 10000, True), (7, 5, 64, 10000, True), (14, 14, 256, 10000, True),
    (4, 6, 16, 20, False)])
def test_sine_position_embedding_matches_detr(h, w, dim, temperature, normalize):
  ours = gd.sine_position_embedding(h, w, dim, temperature, normalize)
  assert ours.shape == (h, w, dim) and ours.dtype == np.float32
  lib.assert_close(ours, ref.detr_sine(h, w, dim, temperature, normalize).numpy(), "sine")


def test_sine_position_embedding_rejects_width_not_multiple_of_four():
  with pytest.raises(gd.DecoderInputError, match="divisible by 4"):
    gd.sine_position_embedding(4, 4, 30)


# --- LabelDecoder -------------------------------------------------------------------------------


def label_inputs(batch=2, h=3, w=4, channels=24, tokens=5, text_dim=20):
  features = rand(batch, h, w, channels, seed=1)
  text = rand(batch, tokens, text_dim, seed=2)
  mask = np.ones((batch, tokens), bool)
  mask[0, 3:] = False   # The first example has two padded text tokens.
  return features, text, mask


def small_label_decoder(**kwargs):
  return gd.LabelDecoder(7, width=WIDTH, depth=DEPTH, num_heads=HEADS, mlp_dim=MLP, **kwargs)


@pytest.mark.parametrize("with_text", [False, True])
def test_label_decoder_parity(with_text):
  features, text, mask = label_inputs()
  text_args = (text, mask) if with_text else ()
  module = small_label_decoder()
  variables = init(module, features, *text_args)
  logits, inter = module.apply(variables, features, *text_args, train=False)
  reference = ref.TorchLabelDecoder(24, 20, 7, WIDTH, DEPTH, HEADS, MLP)
  reference.load(variables["params"])
  with torch.no_grad():
    expected = reference(nchw(features), *((t(text), torch.from_numpy(mask))
                                           if with_text else ()))
  assert logits.shape == (2, 7)
  lib.assert_close(logits, expected.numpy(), "label logits")
  assert sorted(inter) == ["label_state", "layer_0", "layer_1"]
  assert inter["layer_1"].shape == (2, 1 + 12 + (5 if with_text else 0), WIDTH)


def test_label_decoder_padded_text_tokens_do_not_change_the_output():
  features, text, mask = label_inputs()
  module = small_label_decoder()
  variables = init(module, features, text, mask)
  changed = text.copy()
  changed[0, 3:] = 100 * rand(2, 20, seed=5)   # Only the padded tokens.
  out, _ = module.apply(variables, features, text, mask, train=False)
  out_changed, _ = module.apply(variables, features, changed, mask, train=False)
  np.testing.assert_array_equal(out, out_changed)
  # The same change to unpadded tokens does move the output (the test can fail).
  everything, _ = module.apply(variables, features, changed, np.ones_like(mask), train=False)
  assert np.abs(np.asarray(everything) - np.asarray(out)).max() > 1e-3


def test_label_decoder_default_shapes():
  features = jnp.zeros((2, 14, 14, 768))
  text = jnp.zeros((2, 9, 768))
  module = gd.LabelDecoder(1843)   # G-VUE's GQA answer vocabulary.
  (logits, inter), variables = jax.eval_shape(
      lambda: module.init_with_output(jax.random.key(0), features, text, train=False))
  assert logits.shape == (2, 1843)
  assert len([k for k in inter if k.startswith("layer_")]) == 6
  layer = variables["params"]["layer_0"]
  assert layer["linear1"]["kernel"].shape == (256, 2048)
  assert layer["self_attn"]["query"]["kernel"].shape == (256, 256)


def test_label_decoder_initialisation_follows_the_reference():
  features, text, mask = label_inputs()
  params = small_label_decoder().init(jax.random.key(0), features, text, mask,
                                      train=False)["params"]
  assert 0.05 < np.asarray(params["label_token"]).std() < 0.2   # N(0, 0.1).
  layer = params["layer_0"]
  kernels = {name: (layer["self_attn"][name], WIDTH, WIDTH)
             for name in ("query", "key", "value", "out")}
  kernels.update(linear1=(layer["linear1"], WIDTH, MLP), linear2=(layer["linear2"], MLP, WIDTH))
  for name, (p, fan_in, fan_out) in kernels.items():
    bound = math.sqrt(6 / (fan_in + fan_out))   # Xavier-uniform.
    kernel = np.abs(np.asarray(p["kernel"]))
    assert 0.8 * bound < kernel.max() <= bound, name
    assert not np.asarray(p["bias"]).any(), name
  np.testing.assert_array_equal(layer["norm1"]["scale"], 1.0)


def dropout_checks(run):
  """`run(train, rng)` -> output: eval needs no rng and is deterministic; train differs with
  the rng and from eval, and repeats with the same rng."""
  evaluated = np.asarray(run(False, None))
  np.testing.assert_array_equal(evaluated, np.asarray(run(False, None)))
  a, b = (np.asarray(run(True, jax.random.key(k))) for k in (1, 2))
  assert np.abs(a - b).max() > 1e-4
  assert np.abs(a - evaluated).max() > 1e-4
  np.testing.assert_array_equal(a, np.asarray(run(True, jax.random.key(1))))


def rngs(rng):
  return {} if rng is None else {"rngs": {"dropout": rng}}


def test_label_decoder_dropout_in_train_mode_only():
  features, text, mask = label_inputs()
  module = small_label_decoder()
  variables = init(module, features, text, mask)
  dropout_checks(lambda train, rng: module.apply(variables, features, text, mask, train=train,
                                                 **rngs(rng))[0])


@pytest.mark.parametrize("args, match", [
    ((np.zeros((2, 12, 24)),), "features must be"),
    ((np.zeros((2, 3, 4, 24)), None, np.ones((2, 5), bool)), "text_mask given without text"),
    ((np.zeros((2, 3, 4, 24)), np.zeros((3, 5, 20))), "text batch 3"),
    ((np.zeros((2, 3, 4, 24)), np.zeros((2, 5, 20)), np.ones((2, 4), bool)), "text_mask must"),
])
def test_label_decoder_rejects_bad_inputs(args, match):
  with pytest.raises(gd.DecoderInputError, match=match) as caught:
    small_label_decoder().init(jax.random.key(0), *args, train=False)
  assert isinstance(caught.value, UserError)


# --- RetrievalHead ------------------------------------------------------------------------------


def test_retrieval_head_parity_and_mask():
  tokens = rand(3, 6, WIDTH, seed=3)
  mask = np.ones((3, 6), bool)
  mask[1, 4:] = False
  module = gd.RetrievalHead(dim=16, num_heads=HEADS)
  variables = init(module, tokens, mask)
  emb, inter = module.apply(variables, tokens, mask, train=False)
  reference = ref.TorchRetrievalHead(WIDTH, 16, HEADS).load(variables["params"])
  with torch.no_grad():
    lib.assert_close(emb, reference(t(tokens), torch.from_numpy(mask)).numpy(), "masked")
    unmasked, _ = module.apply(variables, tokens, train=False)
    lib.assert_close(unmasked, reference(t(tokens)).numpy(), "unmasked")
  assert emb.shape == (3, 16) and inter["pooled"].shape == (3, WIDTH)
  np.testing.assert_allclose(np.linalg.norm(emb, axis=-1), 1.0, rtol=1e-6)
  changed = tokens.copy()
  changed[1, 4:] = 50.0
  np.testing.assert_array_equal(emb, module.apply(variables, changed, mask, train=False)[0])


def test_retrieval_head_takes_a_feature_map_and_has_no_dropout_by_default():
  fmap = rand(2, 3, 4, WIDTH, seed=4)
  module = gd.RetrievalHead(dim=16, num_heads=HEADS)
  variables = init(module, fmap)
  as_map = module.apply(variables, fmap, train=True, rngs={"dropout": jax.random.key(1)})[0]
  as_tokens = module.apply(variables, fmap.reshape(2, 12, WIDTH), train=False)[0]
  np.testing.assert_array_equal(as_map, as_tokens)
  dropping = gd.RetrievalHead(dim=16, num_heads=HEADS, dropout=0.3)
  dropout_checks(lambda train, rng: dropping.apply(variables, fmap, train=train, **rngs(rng))[0])


# --- DenseDecoder -------------------------------------------------------------------------------

PYRAMID_CHANNELS = (8, 12, 16, 20)


def pyramid(batch=2, size=32):
  return [rand(batch, size // s, size // s, c, seed=10 + i)
          for i, (s, c) in enumerate(zip(gd.PYRAMID_STRIDES, PYRAMID_CHANNELS))]


def test_dense_decoder_parity_eval():
  maps = pyramid()
  module = gd.DenseDecoder(5, width=WIDTH)
  variables = init(module, maps)
  logits, inter = module.apply(variables, maps, train=False)
  reference = ref.TorchSegFormerHead(PYRAMID_CHANNELS, WIDTH, 5).load(variables)
  with torch.no_grad():
    expected = reference([nchw(m) for m in maps])
  assert logits.shape == (2, 8, 8, 5) and inter["fused"].shape == (2, 8, 8, WIDTH)
  lib.assert_close(logits, expected.permute(0, 2, 3, 1).numpy(), "dense logits")


def test_dense_decoder_batchnorm_in_train_mode_matches_torch():
  maps = pyramid()
  module = gd.DenseDecoder(5, width=WIDTH, dropout=0.0)
  variables = init(module, maps)
  (logits, _), updates = module.apply(variables, maps, train=True, mutable=("batch_stats",))
  reference = ref.TorchSegFormerHead(PYRAMID_CHANNELS, WIDTH, 5, dropout=0.0).load(variables)
  old_var = reference.bn.running_var.clone()
  reference.train()
  with torch.no_grad():
    expected = reference([nchw(m) for m in maps])
  lib.assert_close(logits, expected.permute(0, 2, 3, 1).numpy(), "train-mode logits")
  stats = updates["batch_stats"]["fuse_bn"]
  lib.assert_close(stats["mean"], reference.bn.running_mean.numpy(), "running mean")
  # torch tracks the unbiased batch variance, Flax the biased one (n = B*h*w pixels).
  n = 2 * 8 * 8
  unbiased = (reference.bn.running_var - 0.9 * old_var) / 0.1
  lib.assert_close(stats["var"], (0.9 * old_var + 0.1 * unbiased * (n - 1) / n).numpy(),
                   "running var", rtol=1e-5)


def test_dense_decoder_dropout_drops_whole_channels_in_train_mode_only():
  maps = pyramid()
  module = gd.DenseDecoder(5, width=WIDTH, dropout=0.5)
  variables = init(module, maps)

  def run(train, rng):
    return module.apply(variables, maps, train=train, mutable=("batch_stats",), **rngs(rng))[0][0]

  dropout_checks(run)
  (_, inter), state = module.apply(variables, maps, train=True, capture_intermediates=True,
                                   mutable=("batch_stats", "intermediates"),
                                   rngs={"dropout": jax.random.key(3)})
  dropped = np.asarray(state["intermediates"]["Dropout_0"]["__call__"][0])
  fused = np.asarray(inter["fused"])
  kept = dropped.reshape(2, 64, WIDTH).any(axis=1)             # [B, C]
  np.testing.assert_allclose(dropped, fused * 2 * kept[:, None, None, :], rtol=1e-6)
  assert 0 < kept.mean() < 1


def test_dense_decoder_rejects_a_short_pyramid():
  with pytest.raises(gd.DecoderInputError, match="4 maps"):
    gd.DenseDecoder(5, width=WIDTH).init(jax.random.key(0), pyramid()[:3], train=False)


# --- OccupancyDecoder ---------------------------------------------------------------------------


def small_occupancy_decoder():
  return gd.OccupancyDecoder(resolution=8, width=WIDTH, grid=2)


def test_occupancy_decoder_parity():
  features = rand(2, 3, 4, 24, seed=6)
  module = small_occupancy_decoder()
  variables = init(module, features)
  logits, inter = module.apply(variables, features, train=False)
  reference = ref.TorchOccupancyDecoder(12, 24, WIDTH, 2, 2).load(variables["params"])
  with torch.no_grad():
    expected = reference(nchw(features))
  assert logits.shape == (2, 8, 8, 8)
  assert [inter[f"up_{i}"].shape[1:] for i in range(2)] == [(4, 4, 4, 16), (8, 8, 8, 8)]
  lib.assert_close(logits, expected.numpy(), "occupancy logits")


def test_occupancy_decoder_defaults_and_dropout():
  module = gd.OccupancyDecoder()
  logits, _ = jax.eval_shape(lambda: module.init_with_output(
      jax.random.key(0), jnp.zeros((2, 14, 14, 768)), train=False)[0])
  assert logits.shape == (2, 32, 32, 32)
  small = small_occupancy_decoder()
  features = rand(2, 3, 4, 24, seed=7)
  variables = init(small, features)
  dropout_checks(lambda train, rng: small.apply(variables, features, train=train,
                                                **rngs(rng))[0])


@pytest.mark.parametrize("resolution, grid", [(24, 4), (2, 4)])
def test_occupancy_decoder_rejects_a_resolution_off_the_doublings(resolution, grid):
  with pytest.raises(gd.DecoderInputError, match="power of two"):
    gd.OccupancyDecoder(resolution=resolution, grid=grid).init(
        jax.random.key(0), jnp.zeros((1, 2, 2, 8)), train=False)


# --- Gradients ----------------------------------------------------------------------------------


def gradient_cases():
  features, text, mask = label_inputs()
  return {
      "label": (small_label_decoder(), (features, text, mask), {}),
      "retrieval": (gd.RetrievalHead(dim=16, num_heads=HEADS), (rand(2, 5, WIDTH), mask), {}),
      "dense": (gd.DenseDecoder(5, width=WIDTH), (pyramid(),), {"mutable": ("batch_stats",)}),
      "occupancy": (small_occupancy_decoder(), (features,), {}),
  }


@pytest.mark.parametrize("name", ["label", "retrieval", "dense", "occupancy"])
def test_gradients_are_finite_and_reach_every_parameter(name):
  module, args, kwargs = gradient_cases()[name]
  variables = init(module, *args)

  def loss(params):
    out = module.apply({**variables, "params": params}, *args, train=True,
                       rngs={"dropout": jax.random.key(0)}, **kwargs)
    out = out[0][0] if kwargs else out[0]
    weights = jax.random.normal(jax.random.key(1), out.shape)   # Not a constant of the output.
    return jnp.sum(out * weights)

  grads = jax.jit(jax.grad(loss))(variables["params"])
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    g = np.asarray(g)
    assert np.isfinite(g).all(), jax.tree_util.keystr(path)
    assert np.abs(g).max() > 0, f"no gradient reaches {jax.tree_util.keystr(path)}"
