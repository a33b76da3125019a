"""Imitation of the shortest-path expert: the loss falls, the executed actions follow the
config's mixing, bad configs are named."""
import jax
import numpy as np
import pytest

import vcbench  # noqa: F401
from vcbench.algos import nav_bc
from vcbench.config import ConfigError
from vcbench.envs import nav


@pytest.fixture(scope="module")
def env():
  return nav.make("pointnav", "train", num_scenes=4, num_episodes=64, height=8, width=8,
                  sensors=("depth",))


def small_config(**kw):
  c = nav_bc.default_config()
  c.num_envs, c.rollout_len, c.num_updates, c.log_every, c.lr = 8, 16, 30, 0, 3e-3
  c.policy.hidden, c.policy.rnn_layers = 32, 1
  for k, v in kw.items():
    setattr(c, k, v)
  return c


def test_bc_loss_falls_and_accuracy_rises(env):
  trainer = nav_bc.make_train(small_config(), env)
  _, m = trainer.train(jax.random.key(0))
  loss, acc = np.asarray(m["loss"]), np.asarray(m["accuracy"])
  assert loss[-5:].mean() < 0.8 * loss[:5].mean()
  assert acc[-5:].mean() > acc[0] + 0.2
  # Executed by the (noisy) expert, episodes mostly succeed.
  assert np.nanmean(np.asarray(m["success"])) > 0.5


def test_without_noise_the_expert_drives_and_succeeds(env):
  trainer = nav_bc.make_train(small_config(expert_noise=0.0, num_updates=4), env)
  _, m = trainer.train(jax.random.key(1))
  assert np.nanmean(np.asarray(m["success"])) == 1.0


def test_bad_configs_are_named(env):
  with pytest.raises(ConfigError, match="expert_noise"):
    nav_bc.make_train(small_config(expert_noise=1.5), env)
  with pytest.raises(ConfigError, match="> 1"):
    nav_bc.make_train(small_config(expert_noise=0.6, learner_mix=0.6), env)
  with pytest.raises(ConfigError, match="unknown key"):
    c = small_config()
    c.gamma = 0.99
    nav_bc.make_train(c, env)
