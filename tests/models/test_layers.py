"""conv2d (depthwise as shifted sums, the rest native) equals the native convolution."""
import jax
import numpy as np
import pytest

from vcbench.models import layers


@pytest.mark.parametrize("kernel, stride, padding, groups, size", [
    (1, 1, 0, 1, 8), (1, 2, 0, 1, 8), (1, 2, 0, 1, 7),
    (3, 2, 1, 1, 8), (3, 2, 1, 1, 7), (3, 2, 1, 1, 6),
    (3, 1, 1, 1, 8), (3, 2, 1, 4, 8), (7, 2, 3, 1, 16), (1, 1, 0, 4, 8),
    (3, 1, 1, 8, 8), (3, 2, 1, 8, 8), (3, 2, 1, 8, 7), (5, 1, 2, 8, 9),  # depthwise
])
def test_conv2d_equals_native_convolution(kernel, stride, padding, groups, size):
  rng = np.random.default_rng(0)
  x = rng.standard_normal((2, size, size + 2, 8)).astype(np.float32)
  cout = 8 if groups == 8 else 12
  k = rng.standard_normal((kernel, kernel, 8 // groups, cout)).astype(np.float32)
  ours = jax.jit(layers.conv2d, static_argnums=(2, 3, 4))(x, k, stride, padding, groups)
  ref = jax.lax.conv_general_dilated(
      x, k, (stride, stride), [(padding, padding)] * 2,
      dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups,
      precision=jax.lax.Precision.HIGHEST)
  assert ours.shape == ref.shape
  np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-4)


def test_the_depthwise_rewrite_is_for_the_cpu_only(monkeypatch):
  """On the CPU a depthwise layer is shifted sums (no convolution); elsewhere it is XLA's own
  grouped convolution."""
  x, k = np.ones((1, 8, 8, 4), np.float32), np.ones((3, 3, 1, 4), np.float32)
  trace = lambda: str(jax.make_jaxpr(lambda x, k: layers.conv2d(x, k, 1, 1, 4))(x, k))
  assert "conv_general_dilated" not in trace()
  monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
  assert trace().count("conv_general_dilated") == 1
