"""Imitation of the shortest-path expert: the loss falls, the executed actions follow the
config's mixing, the critic learns the executed returns when asked to, bad configs are named."""
import jax
import numpy as np
import pytest

import vcbench  # noqa: F401
from vcbench.algos import nav_bc
from vcbench.config import ConfigError
from vcbench.envs import nav
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import expert, explorer


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


def test_the_critic_fits_the_returns_only_when_it_is_on(env):
  c = small_config(num_updates=40)
  c.critic.coef = 0.5
  _, on = nav_bc.make_train(c, env).train(jax.random.key(2))
  _, off = nav_bc.make_train(small_config(num_updates=40), env).train(jax.random.key(2))
  fitted, unfitted = np.asarray(on["value_loss"]), np.asarray(off["value_loss"])
  # The expert's returns are ~10 per episode: an untrained head stays far off them.
  assert fitted[-10:].mean() < 0.5 * fitted[:5].mean()
  assert fitted[-10:].mean() < 0.5 * unfitted[-10:].mean()


def test_near_goal_steps_weigh_more_when_asked(env):
  # Same key: the runs differ only by how their steps are weighted (at the start every step's
  # loss is log 4, whatever its weight, so the difference shows once the policy has learnt).
  _, plain = nav_bc.make_train(small_config(num_updates=6), env).train(jax.random.key(3))
  _, near = nav_bc.make_train(small_config(num_updates=6, near_goal_weight=10.0),
                              env).train(jax.random.key(3))
  assert float(plain["success"][0]) > 0           # the rollout reached goals: near steps exist
  assert abs(float(near["loss"][-1]) - float(plain["loss"][-1])) > 1e-3


def test_the_explorer_teacher_labels_the_steps_and_succeeds():
  objnav = nav.make("objectnav", "train", num_scenes=4, num_episodes=64, height=8, width=8,
                    sensors=("depth",))
  trainer = nav_bc.make_train(small_config(teacher="explorer", expert_noise=0.0, num_updates=6),
                              objnav)
  assert isinstance(trainer.env, explorer.WithMap)
  state, m = trainer.train(jax.random.key(4))
  assert np.nanmean(np.asarray(m["success"])) == 1.0     # it drives: its episodes succeed
  # The labels are the explorer's: it turns to look where the expert would head straight on.
  label = jax.vmap(trainer.env.label)(state.env_state)
  sims = state.env_state.replace(sim=state.env_state.sim.nav)
  shortest = jax.vmap(lambda s: expert.action(objnav, s))(sims)
  seen = jax.vmap(lambda s, m: explorer.goal_seen(objnav, s, m))(sims.sim,
                                                                  state.env_state.sim.seen)
  np.testing.assert_array_equal(np.asarray(label)[np.asarray(seen)],
                                np.asarray(shortest)[np.asarray(seen)])


@pytest.fixture(scope="module")
def objnav_rgb():
  return nav.make("objectnav", "train", num_scenes=4, num_episodes=64, height=16, width=16,
                  sensors=("rgb",))


def test_the_recognition_heads_learn_only_when_asked(objnav_rgb):
  heads = {}
  for coef in (1.0, 0.0):
    c = small_config(num_updates=30)
    c.policy.aux_goal_visible, c.policy.aux_categories = True, nav_env.NUM_CATEGORIES
    c.aux_coef = coef
    trainer = nav_bc.make_train(c, objnav_rgb)
    start = jax.device_get(trainer.init(jax.random.key(5)).params)
    # The categories head reads the frame's features (the CNN's, hidden 32): a logit each.
    assert start["aux_categories"]["kernel"].shape == (32, nav_env.NUM_CATEGORIES)
    state, m = trainer.train(jax.random.key(5))
    end = jax.device_get(state.params)
    heads[coef] = [float(np.abs(end[k]["kernel"] - start[k]["kernel"]).max())
                   for k in ("aux_goal_visible", "aux_categories")]
    if coef:   # from log 2 per label at the start towards the base rates in view, at least
      for loss in ("aux_loss", "aux_categories_loss"):
        aux = np.asarray(m[loss])
        assert aux[-5:].mean() < aux[0] - 0.02, (loss, aux)
      # Summed over the 6 categories: ~6 log 2 at the start, not one label's log 2.
      assert 3.0 < float(m["aux_categories_loss"][0]) < 5.0
      assert 0.0 < float(m["aux_categories_accuracy"][0]) < 1.0
    else:
      assert "aux_loss" not in m and "aux_categories_loss" not in m
  assert min(heads[1.0]) > 1e-3 and max(heads[0.0]) == 0.0, heads


def test_the_depth_head_of_an_rgb_policy_learns_the_clean_coarse_depth():
  env = nav.make("pointnav", "train", num_scenes=4, num_episodes=64, height=16, width=16,
                 sensors=("rgb",))
  c = small_config(num_updates=30, aux_coef=1.0)
  c.policy.aux_depth = 4
  trainer = nav_bc.make_train(c, env)
  # A sigmoid per cell of the 4x4 grid, on the frame's features (the CNN's, hidden 32).
  assert jax.device_get(trainer.init(jax.random.key(0)).params)["aux_depth"]["kernel"].shape == (
      32, 16)
  _, m = trainer.train(jax.random.key(0))
  loss, mae = np.asarray(m["aux_depth_loss"]), np.asarray(m["aux_depth_mae"])
  # Summed over the 16 cells: from an untrained guess (~0.5 per cell) to well below it.
  assert loss[0] > 0.5 and loss[-5:].mean() < 0.5 * loss[0], loss
  assert mae[-5:].mean() < 0.1, mae


def test_bad_configs_are_named(env):
  with pytest.raises(ConfigError, match="expert_noise"):
    nav_bc.make_train(small_config(expert_noise=1.5), env)
  with pytest.raises(ConfigError, match="> 1"):
    nav_bc.make_train(small_config(expert_noise=0.6, learner_mix=0.6), env)
  with pytest.raises(ConfigError, match="near_goal_weight"):
    nav_bc.make_train(small_config(near_goal_weight=-1.0), env)
  with pytest.raises(ConfigError, match="critic.coef"):
    c = small_config()
    c.critic.coef = -1.0
    nav_bc.make_train(c, env)
  with pytest.raises(ConfigError, match="'oracle' in config.teacher"):
    nav_bc.make_train(small_config(teacher="oracle"), env)
  with pytest.raises(ConfigError, match="aux_goal_visible, aux_categories and aux_depth are off"):
    nav_bc.make_train(small_config(aux_coef=1.0), env)
  with pytest.raises(ConfigError, match="aux_categories = 3: the env labels 6"):
    c = small_config()
    c.policy.aux_categories = 3
    nav_bc.make_train(c, env)
  with pytest.raises(ConfigError, match="unknown key"):
    c = small_config()
    c.gamma = 0.99
    nav_bc.make_train(c, env)
