"""The shapes probe: deterministic data, a probe that separates separable data."""
import numpy as np

from vcbench.benchmarks import shapes_probe


def test_make_shapes_is_deterministic_and_balanced():
  a, la = shapes_probe.make_shapes(3, 60, 32)
  b, lb = shapes_probe.make_shapes(3, 60, 32)
  c, _ = shapes_probe.make_shapes(4, 60, 32)
  assert a.dtype == np.uint8 and a.shape == (60, 32, 32, 3)
  np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(la, lb)
  assert not np.array_equal(a, c)
  assert set(la) == set(range(len(shapes_probe.SHAPES)))


def test_every_shape_draws_pixels():
  u, v = np.meshgrid(np.linspace(-1.2, 1.2, 64), np.linspace(-1.2, 1.2, 64))
  areas = {k: shapes_probe._shape_mask(k, u, v).mean() for k in shapes_probe.SHAPES}
  assert all(0.05 < a < 0.8 for a in areas.values()), areas
  assert len({round(a, 3) for a in areas.values()}) == len(areas)


def test_linear_probe_separates_informative_features_only():
  rng = np.random.default_rng(0)
  y = rng.integers(0, 3, 300)
  informative = np.eye(3)[y] * 3 + rng.normal(0, 0.5, (300, 3))
  noise = rng.normal(0, 1, (300, 3))
  good = shapes_probe.linear_probe(informative[:200], y[:200], informative[200:], y[200:], 3)
  bad = shapes_probe.linear_probe(noise[:200], y[:200], noise[200:], y[200:], 3)
  assert good["accuracy"] > 0.95
  assert bad["accuracy"] < 0.6
