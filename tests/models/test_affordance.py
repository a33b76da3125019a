"""The manipulation decoder's pieces against direct computations: rotated crops against
`map_coordinates`, the transport correlation against a loop, soft labels against their
decoding, and the decoder's shapes and language dependence."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.models import affordance


def _reference_crops(query, center, n, k):
  half = (k - 1) / 2
  out = np.zeros((n, k, k, query.shape[-1]), np.float32)
  for r in range(n):
    a = -2 * math.pi * r / n
    for i in range(k):
      for j in range(k):
        vr, vc = i - half, j - half
        row = center[0] + math.cos(a) * vr - math.sin(a) * vc
        col = center[1] + math.sin(a) * vr + math.cos(a) * vc
        for d in range(query.shape[-1]):
          out[r, i, j, d] = jax.scipy.ndimage.map_coordinates(
              query[..., d], [jnp.array([row]), jnp.array([col])], order=1, mode="constant")[0]
  return out


@pytest.mark.parametrize("center", [(7.3, 5.6), (0.4, 10.9), (11.0, 0.0)])
def test_rotated_crops_match_map_coordinates(center):
  q = jax.random.normal(jax.random.key(0), (12, 11, 2))
  got = affordance.rotated_crops(q, jnp.array(center), 4, 5)
  np.testing.assert_allclose(got, _reference_crops(q, center, 4, 5), atol=1e-5)


def test_rotation_zero_is_the_plain_crop():
  q = jax.random.normal(jax.random.key(1), (10, 10, 3))
  got = affordance.rotated_crops(q, jnp.array([5.0, 4.0]), 8, 3)
  np.testing.assert_allclose(got[0], q[4:7, 3:6], atol=1e-6)
  # A quarter turn (r = n/4) is the crop rotated by 90 degrees.
  np.testing.assert_allclose(got[2], np.rot90(np.asarray(q[4:7, 3:6]), k=1), atol=1e-5)


def test_correlate_is_the_sum_over_offsets():
  key = np.asarray(jax.random.normal(jax.random.key(2), (6, 7, 2)))
  kernels = np.asarray(jax.random.normal(jax.random.key(3), (3, 3, 3, 2)))
  got = np.asarray(affordance.correlate(jnp.asarray(key), jnp.asarray(kernels)))
  conv = np.asarray(affordance.correlate_conv(jnp.asarray(key), jnp.asarray(kernels)))
  padded = np.pad(key, ((1, 1), (1, 1), (0, 0)))
  want = np.zeros((6, 7, 3))
  for r in range(3):
    for y in range(6):
      for x in range(7):
        want[y, x, r] = np.sum(padded[y:y + 3, x:x + 3] * kernels[r])
  np.testing.assert_allclose(got, want, atol=1e-4)
  np.testing.assert_allclose(conv, want, atol=1e-4)


@pytest.mark.parametrize("point", [(3.25, 4.75), (0.0, 7.0), (5.5, 2.0)])
def test_soft_target_is_decoded_back_by_refine(point):
  t = affordance.soft_target(jnp.array(point), (8, 9))
  assert float(t.sum()) == pytest.approx(1.0)
  rows, cols = np.meshgrid(np.arange(8), np.arange(9), indexing="ij")
  assert float((t * rows).sum()) == pytest.approx(point[0], abs=1e-5)
  assert float((t * cols).sum()) == pytest.approx(point[1], abs=1e-5)
  # Logits = log of the soft label (a trained map's ideal): refine returns the point.
  got = affordance.refine(jnp.log(t + 1e-12), jnp.ones((8, 9), bool))
  np.testing.assert_allclose(got, point, atol=1e-3)


def test_refine_ignores_invalid_cells():
  logits = jnp.zeros((6, 6)).at[0, 0].set(10.0).at[4, 4].set(5.0)
  valid = jnp.ones((6, 6), bool).at[0, 0].set(False)
  np.testing.assert_allclose(affordance.refine(logits, valid), (4.0, 4.0), atol=0.05)


def test_decoder_shapes_and_language_dependence():
  keys = jax.random.split(jax.random.key(4), 6)
  pyramid = [jax.random.normal(keys[i], (2, 16 // 2 ** i, 16 // 2 ** i, 8)) for i in range(4)]
  text = jax.random.normal(keys[4], (2, 5, 12))
  mask = jnp.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
  model = affordance.AffordanceDecoder(width=16, transport_dim=4)
  variables = model.init(keys[5], pyramid, text, mask)
  (pick, k, q), inter = model.apply(variables, pyramid, text, mask)
  assert pick.shape == (2, 16, 16) and k.shape == q.shape == (2, 16, 16, 4)
  place = affordance.place_logits(k, q, jnp.array([[3.0, 4.0], [8.5, 9.5]]), 6, 5)
  assert place.shape == (2, 16, 16, 6)
  # Padding tokens do not count; the real words do.
  noisy = text.at[0, 3:].set(100.0)
  np.testing.assert_allclose(model.apply(variables, pyramid, noisy, mask)[0][0], pick,
                             atol=1e-5)
  other = model.apply(variables, pyramid, text.at[0, 0].add(1.0), mask)[0][0]
  assert float(jnp.abs(other[0] - pick[0]).max()) > 1e-4


def test_the_decoder_tells_which_colour_is_picked_and_which_is_the_place():
  """The same words in another order ("red blocks in a green bowl" vs "green blocks in a red
  bowl") must condition the maps differently; a mean over tokens would make them equal."""
  from vcbench.models import text as text_lib
  encoder = text_lib.load("hashed_words")
  text, mask = encoder.encode(["put the red blocks in a green bowl",
                               "put the green blocks in a red bowl"], 12)
  text, mask = jnp.asarray(text), jnp.asarray(mask)
  keys = jax.random.split(jax.random.key(7), 5)
  pyramid = [jax.random.normal(keys[i], (1, 8 // 2 ** i, 8 // 2 ** i, 8)).repeat(2, 0)
             for i in range(4)]
  model = affordance.AffordanceDecoder(width=16, transport_dim=4)
  variables = model.init(keys[4], pyramid, text, mask)
  (pick, _, _), _ = model.apply(variables, pyramid, text, mask)
  assert float(jnp.abs(pick[0] - pick[1]).max()) > 1e-3
