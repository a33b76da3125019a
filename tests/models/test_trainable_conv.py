"""The loop-safe convolution equals lax.conv in value and in both gradients, and matches nn.Conv."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vcbench  # noqa: F401
from vcbench.models import trainable_conv


@pytest.mark.parametrize("shape,kernel,stride,padding", [
    ((3, 17, 15, 2), (8, 8), 4, "SAME"), ((2, 8, 8, 5), (4, 4), 2, "SAME"),
    ((2, 6, 7, 3), (3, 3), 1, 1), ((2, 9, 9, 3), (3, 3), 2, "VALID"),
    ((2, 64, 64, 4), (8, 8), 4, "SAME"), ((2, 8, 8, 4), (3, 3), 1, "SAME"),
    ((2, 11, 10, 2), (5, 3), 3, 2), ((2, 13, 12, 2), (2, 2), 3, "VALID"),
    ((2, 7, 9, 3), (3, 3), 2, "SAME")])
def test_value_and_gradients_match_lax_conv(shape, kernel, stride, padding):
  kx, kw, ky = jax.random.split(jax.random.key(0), 3)
  x = jax.random.normal(kx, shape)
  w = jax.random.normal(kw, (*kernel, shape[-1], 6))
  pads = padding if isinstance(padding, str) else ((padding, padding),) * 2
  ref = lambda x, w: jax.lax.conv_general_dilated(x, w, (stride, stride), pads,
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))
  ours = lambda x, w: trainable_conv.conv2d(x, w, stride, padding)
  y = ref(x, w)
  np.testing.assert_allclose(ours(x, w), y, rtol=1e-5, atol=1e-5)
  probe = jax.random.normal(ky, y.shape)
  loss = lambda f: lambda x, w: jnp.sum(f(x, w) * probe)
  for a, b in zip(jax.grad(loss(ref), (0, 1))(x, w), jax.grad(loss(ours), (0, 1))(x, w)):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_module_matches_flax_conv_with_the_same_params():
  x = jax.random.normal(jax.random.key(1), (2, 12, 12, 3))
  ref = nn.Conv(8, (4, 4), strides=2, padding="SAME")
  params = ref.init(jax.random.key(2), x)
  ours = trainable_conv.Conv(8, (4, 4), strides=2, padding="SAME")
  assert jax.tree.map(jnp.shape, ours.init(jax.random.key(2), x)) == jax.tree.map(jnp.shape, params)
  np.testing.assert_allclose(ours.apply(params, x), ref.apply(params, x), rtol=1e-5, atol=1e-5)


def test_bad_padding_is_named():
  with pytest.raises(ValueError, match="padding"):
    trainable_conv.conv2d(jnp.ones((1, 4, 4, 1)), jnp.ones((3, 3, 1, 1)), 1, "FULL")


@pytest.mark.parametrize("shape, kernel, padding", [
    ((3, 2, 2, 40), (3, 3), 1),          # a PVR token grid (CortexBench's compression layer)
    ((2, 5, 4, 3), (3, 2), "SAME"),
    ((2, 6, 5, 4), (2, 3), "VALID"),
])
def test_tap_convolution_is_the_convolution_with_its_gradients(shape, kernel, padding):
  kx, kw, ky = jax.random.split(jax.random.key(3), 3)
  x = jax.random.normal(kx, shape)
  w = jax.random.normal(kw, (*kernel, shape[-1], 6))
  pads = trainable_conv._pads(x.shape, w.shape, 1, padding)
  ref = lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), pads,
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))
  y = trainable_conv.tap_conv2d(x, w, padding)
  np.testing.assert_allclose(y, ref(x, w), rtol=1e-5, atol=1e-5)
  dy = jax.random.normal(ky, y.shape)
  got = jax.vjp(lambda x, w: trainable_conv.tap_conv2d(x, w, padding), x, w)[1](dy)
  want = jax.vjp(ref, x, w)[1](dy)
  for g, r in zip(got, want):
    np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn", ["conv2d", "tap_conv2d"])
def test_accelerators_get_xlas_own_convolution(monkeypatch, fn):
  """The gradient rewrite and the tap convolution are CPU workarounds: on another backend the
  traced program is one native convolution (no custom VJP, no per-tap matmuls)."""
  x, w = jnp.ones((2, 8, 8, 3)), jnp.ones((3, 3, 3, 4))
  conv = getattr(trainable_conv, fn)
  on_cpu = str(jax.make_jaxpr(lambda x, w: conv(x, w))(x, w))   # (Fresh functions: traces
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")     # are cached per function.)
  elsewhere = str(jax.make_jaxpr(lambda x, w: conv(x, w))(x, w))
  assert ("custom_vjp_call" in on_cpu) == (fn == "conv2d")
  assert ("dot_general" in on_cpu) == (fn == "tap_conv2d") and "dot_general" not in elsewhere
  assert "custom_vjp_call" not in elsewhere and elsewhere.count("conv_general_dilated") == 1
  np.testing.assert_allclose(conv(x, w), jax.lax.conv_general_dilated(
      x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")), rtol=1e-6)
