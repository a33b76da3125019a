"""BC pieces against eai-vc's definitions, and train/eval feature consistency."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.algos import bc


def _eai_flare(embeddings):
  """eai-vc's `fuse_embeddings_flare` for numpy inputs (its definition, restated)."""
  delta = [embeddings[i + 1] - embeddings[i] for i in range(len(embeddings) - 1)]
  delta.append(embeddings[-1].copy())
  return np.array(delta).ravel()


def _eai_features(emb, lengths, history):
  """eai-vc's `precompute_features`: per episode, window max(t - k, 0), oldest first."""
  out, start = [], 0
  for n in lengths:
    e = emb[start:start + n]
    for t in range(n):
      window = [e[max(t - k, 0)] for k in range(history)][::-1]
      out.append(_eai_flare(window))
    start += n
  return np.stack(out)


def test_features_match_eai_vc():
  rng = np.random.default_rng(0)
  lengths = [5, 1, 7]
  emb = rng.normal(size=(sum(lengths), 6)).astype(np.float32)
  episode = np.repeat(np.arange(3), lengths)
  got = bc.features(emb, episode, None, history=3)
  np.testing.assert_allclose(got, _eai_features(emb, lengths, 3), rtol=1e-6, atol=1e-6)
  proprio = rng.normal(size=(len(emb), 4)).astype(np.float32)
  with_p = bc.features(emb, episode, proprio, history=3)
  np.testing.assert_array_equal(with_p[:, -4:], proprio)


def test_policy_step_sees_the_training_features():
  """Replaying a demo episode through the rollout policy step builds the same inputs BC was
  trained on: the history update and the fusion agree between training and evaluation."""
  rng = np.random.default_rng(1)
  emb = rng.normal(size=(6, 5)).astype(np.float32)
  proprio = rng.normal(size=(6, 4)).astype(np.float32)
  want = bc.features(emb, np.zeros(6, np.int32), proprio, history=3)
  seen = []
  step = bc.make_policy_step(lambda p, obs: obs["x"], lambda s, x: (seen.append(x), x)[1],
                             history=3, use_proprio=True)
  carry = bc.initial_carry({}, None, 1, 5, 3)
  for t in range(6):
    carry, _ = step(carry, {"x": jnp.asarray(emb[t:t + 1]),
                            "proprio": jnp.asarray(proprio[t:t + 1])})
  np.testing.assert_allclose(np.concatenate(seen), want, rtol=1e-6, atol=1e-6)


def _trainer(x, y, batch_size, epochs):
  c = bc.default_config()
  c.batch_size, c.epochs = batch_size, epochs
  return bc.make_train(c, x, y)


def test_bc_fits_a_linear_expert_and_loss_falls():
  rng = np.random.default_rng(2)
  x = rng.normal(size=(600, 12)).astype(np.float32)
  w = rng.normal(size=(12, 4)).astype(np.float32) * 0.3
  y = np.tanh(x @ w)
  trainer = _trainer(x, y, batch_size=64, epochs=30)
  state, metrics = trainer.train_chunk(trainer.init(jax.random.key(0)), 30)
  losses = np.asarray(metrics["loss"])
  assert losses.shape == (30,) and losses[-1] < 0.1 * losses[0]
  pred = np.asarray(trainer.act(state.variables(), jnp.asarray(x)))
  assert np.abs(pred).max() <= 1.0 and np.mean((pred - y) ** 2) < 0.02
  assert int(state.step) == 30 * (600 // 64)


def test_training_is_deterministic_given_the_key():
  x = np.random.default_rng(3).normal(size=(100, 3)).astype(np.float32)
  trainer = _trainer(x, x[:, :2], batch_size=32, epochs=3)
  a = trainer.train_chunk(trainer.init(jax.random.key(0)), 3)[1]["loss"]
  b = trainer.train_chunk(trainer.init(jax.random.key(0)), 3)[1]["loss"]
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_shapes_are_refused():
  with pytest.raises(ValueError, match=r"\(10, 3\) and \(9, 2\)"):
    _trainer(np.zeros((10, 3)), np.zeros((9, 2)), batch_size=4, epochs=1)
