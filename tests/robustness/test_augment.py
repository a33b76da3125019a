"""Training augmentation: shapes, seeding, what each operation does, bad input."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.robustness import augment


def _image():
  return (np.random.RandomState(0).rand(32, 32, 3) * 255).astype(np.uint8)


def test_augment_is_seeded_uint8_and_changes_the_frame():
  img = jnp.asarray(_image())
  f = jax.jit(augment.augment)
  a, b, c = f(jax.random.key(0), img), f(jax.random.key(0), img), f(jax.random.key(1), img)
  assert a.shape == img.shape and a.dtype == jnp.uint8
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c) and not np.array_equal(a, img)


def test_random_shift_is_a_translation_with_replicated_edges():
  img = jnp.asarray(_image())
  out = np.asarray(augment.random_shift(jax.random.key(3), img))
  pad = round(augment.SHIFT_FRACTION * 32)
  padded = np.pad(np.asarray(img), ((pad, pad), (pad, pad), (0, 0)), mode="edge")
  assert any(np.array_equal(out, padded[y:y + 32, x:x + 32])
             for y in range(2 * pad + 1) for x in range(2 * pad + 1))


def test_colour_jitter_with_unit_factors_is_the_identity():
  img = jnp.asarray(_image())
  np.testing.assert_allclose(augment.colour_jitter(jax.random.key(0), img, strength=0.0),
                             img.astype(np.float32), atol=1e-3)


def test_augmented_env_hook_and_bad_input():
  hook = augment.Augment(seed=0)
  img = jnp.asarray(_image())
  np.testing.assert_array_equal(hook(0, 5, 2, img), hook(1, 5, 2, img))   # scene-independent
  assert not np.array_equal(hook(0, 5, 2, img), hook(0, 5, 3, img))
  with pytest.raises(ValueError, match="uint8"):
    augment.augment(jax.random.key(0), img.astype(jnp.float32))
