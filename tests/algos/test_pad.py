"""PAD (action / rotation prediction): the SS losses, what adaptation may change, and that it learns."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from toy_nav_env import make_env
from vcbench.algos import pad as pad_lib
from vcbench.algos import ppo
from vcbench.algos import runner
from vcbench.config import ConfigError


@functools.lru_cache(maxsize=1)
def _trainer():
  """One small PPO policy for all tests (building it compiles)."""
  c = ppo.default_config()
  c.num_envs, c.rollout_len, c.num_updates, c.log_every = 8, 8, 1, 0
  c.policy.hidden, c.policy.rnn_layers = 32, 1
  env = make_env()
  trainer = ppo.make_train(c, env, log_fn=False)
  return trainer, trainer.init(jax.random.key(0)).params, env


def _config(task):
  p = pad_lib.default_config()
  p.task, p.num_envs, p.rollout_len, p.sgd_steps = task, 8, 16, 3
  p.fit_steps, p.budget, p.lr, p.head_lr = 8 * 16 * 6, 8 * 16 * 2, 1e-3, 3e-3
  return p


def _setup(task):
  """The head-fitting phase's trainer, the policy params and the env."""
  policy, params, env = _trainer()
  return pad_lib.make_train(_config(task), policy, params, env, seed=1), params, env


def test_rotate_matches_numpy():
  img = np.arange(4 * 4 * 2).reshape(4, 4, 2)
  for k in range(4):
    np.testing.assert_array_equal(pad_lib.rotate(jnp.asarray(img), jnp.int32(k)), np.rot90(img, k))


@pytest.mark.parametrize("task", ["rp", "ap"])
def test_fit_then_adapt_changes_only_the_encoder(task):
  fit, params, env = _setup(task)
  state, log = runner.run(fit, None, 6)
  assert log["loss"].shape == (6,)
  # Each round's SGD steps lower the SS loss on the rollout they train on.
  assert np.all(log["loss_after"] < log["loss"])
  head = fit.head(state)
  assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)),   # Fitting leaves
                                   fit.adapted_params(state), params))          # the encoder.
  adapt = pad_lib.make_train(_config(task), fit.policy, params, env, head=head, seed=2)
  state2, log2 = runner.run(adapt, None, 2)
  assert log2["loss"].shape == (2,)
  adapted = adapt.adapted_params(state2)
  for name in params:
    same = jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), params[name],
                                     adapted[name]))
    assert same == (name != "visual_cnn"), name
  assert not jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), head,
                                       adapt.head(state2)))


def test_rounds_resume_bit_identically_and_chunking_does_not_matter(tmp_path):
  fit, _, _ = _setup("rp")
  whole, log = runner.run(fit, None, 6)
  runner.run(fit, tmp_path, 2, stop_at=4)                # killed after 4 of 6 rounds
  resumed, log2 = runner.run(fit, tmp_path, 2)
  np.testing.assert_array_equal(log["loss"], log2["loss"])
  jax.tree.map(np.testing.assert_array_equal, fit.head(whole), fit.head(resumed))


def test_ap_ignores_steps_that_end_an_episode():
  pad, params, _ = _setup("ap")
  head = pad.head(pad.init(jax.random.key(0)))
  t, n = 5, 3
  obs = {"rgb": jax.random.randint(jax.random.key(1), (t, n, 8, 8, 3), 0, 255).astype(jnp.uint8)}
  action = jnp.zeros((t, n), jnp.int32)
  done = jnp.zeros((t, n), bool)
  base = pad.loss(params["visual_cnn"], head, pad_lib.Rollout(obs, action, done), None)[0]
  # Relabel a step that ends an episode: the loss must not see it.
  ended = done.at[1, 0].set(True)
  relabelled = action.at[1, 0].set(3)
  a = pad.loss(params["visual_cnn"], head, pad_lib.Rollout(obs, action, ended), None)[0]
  b = pad.loss(params["visual_cnn"], head, pad_lib.Rollout(obs, relabelled, ended), None)[0]
  np.testing.assert_allclose(a, b, rtol=1e-6)
  assert not np.isclose(base, pad.loss(params["visual_cnn"], head,
                                       pad_lib.Rollout(obs, relabelled, done), None)[0])


def test_config_errors():
  policy, params, env = _trainer()
  bad = _config("rp")
  bad.task = "jigsaw"
  with pytest.raises(ConfigError, match="task"):
    pad_lib.make_train(bad, policy, params, env)
