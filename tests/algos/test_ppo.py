"""Recurrent PPO: GAE, recurrent parity, learning, determinism, resume, config errors, PVR."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from toy_nav_env import make_env
from vcbench.algos import ppo
from vcbench.algos import recurrent
from vcbench.algos import runner
from vcbench.config import ConfigError
from vcbench.models import nav_policy, zoo
from vcbench.models.nav_policy import NavPolicy, fourier_features
from vcbench.models.preprocess import Preprocess
from vcbench.models.vit import ViT


def small_config(**overrides):
  c = ppo.default_config()
  c.num_envs, c.rollout_len, c.num_updates = 16, 16, 4
  c.update_epochs, c.num_minibatches = 2, 2
  c.lr, c.anneal_lr, c.log_every = 3e-3, False, 0
  c.policy.hidden, c.policy.rnn_layers = 32, 1
  c.update(overrides)
  return c


def _comparable(x):
  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


def assert_trees_equal(a, b):
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(_comparable(x), _comparable(y)), a, b)


# -- GAE ------------------------------------------------------------------------------------

def gae_reference(rewards, values, dones, last_value, gamma, lam):
  """The textbook backward loop, one env and one step at a time."""
  t_max, n = rewards.shape
  adv = np.zeros((t_max, n))
  for i in range(n):
    running = 0.0
    for t in reversed(range(t_max)):
      next_value = last_value[i] if t == t_max - 1 else values[t + 1, i]
      live = 1.0 - dones[t, i]
      delta = rewards[t, i] + gamma * next_value * live - values[t, i]
      running = delta + gamma * lam * live * running
      adv[t, i] = running
  return adv, adv + values


def test_gae_matches_numpy_loop():
  rng = np.random.default_rng(0)
  rewards, values = rng.normal(size=(9, 5)), rng.normal(size=(9, 5))
  dones, last = rng.random((9, 5)) < 0.25, rng.normal(size=5)
  adv, ret = ppo.gae(jnp.asarray(rewards, jnp.float32), jnp.asarray(values, jnp.float32),
                     jnp.asarray(dones), jnp.asarray(last, jnp.float32), 0.97, 0.9)
  ref_adv, ref_ret = gae_reference(rewards, values, dones, last, 0.97, 0.9)
  np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ret, ref_ret, rtol=1e-5, atol=1e-5)


# -- the recurrent policy -------------------------------------------------------------------

def nav_obs(rng, t, b):
  return {"rgb": rng.integers(0, 256, (t, b, 8, 8, 3), dtype=np.uint8),
          "depth": rng.random((t, b, 8, 8, 1), dtype=np.float32),
          "goal_rgb": rng.integers(0, 256, (t, b, 8, 8, 3), dtype=np.uint8),
          "gps_compass": rng.normal(size=(t, b, 2)).astype(np.float32),
          "objectgoal": rng.integers(0, 7, (t, b), dtype=np.int32)}


@pytest.mark.parametrize("rnn", ["lstm", "gru"])
def test_sequence_path_equals_stepping_with_resets(rnn):
  t, b = 7, 3
  rng = np.random.default_rng(1)
  obs = nav_obs(rng, t, b)
  prev_action = rng.integers(0, 4, (t, b), dtype=np.int32)
  start = rng.random((t, b)) < 0.3
  start[2, 1] = True
  policy = NavPolicy(num_actions=4, hidden=16, rnn=rnn, rnn_layers=2)
  # A non-zero carry before step 0, so a missed reset would show.
  carry0 = jax.tree.map(lambda z: z + 0.5, policy.initial_carry(b))
  variables = jax.jit(policy.init)(jax.random.key(0), obs, carry0, prev_action, start)
  seq_carry, seq_logits, seq_value = jax.jit(policy.apply)(variables, obs, carry0, prev_action,
                                                           start)
  step = jax.jit(lambda *a: policy.apply(variables, *a, method=NavPolicy.step))
  carry = carry0
  for i in range(t):
    carry, logits, value = step(jax.tree.map(lambda x: x[i], obs), carry, prev_action[i],
                                start[i])
    np.testing.assert_allclose(logits, seq_logits[i], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, seq_value[i], rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), carry,
               seq_carry)
  # From a start on, env 1's outputs do not depend on what came before.
  tail = jax.tree.map(lambda x: x[2:], obs)
  _, tail_logits, _ = policy.apply(variables, tail, policy.initial_carry(b), prev_action[2:],
                                   start[2:])
  np.testing.assert_allclose(tail_logits[:, 1], seq_logits[2:, 1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_prev_action", [True, False])
def test_previous_action_input_can_be_switched_off(use_prev_action):
  t, b = 3, 2
  rng = np.random.default_rng(2)
  obs = nav_obs(rng, t, b)
  start = np.zeros((t, b), bool)
  policy = NavPolicy(num_actions=4, hidden=16, rnn_layers=1, use_prev_action=use_prev_action)
  carry = policy.initial_carry(b)
  acts = [np.full((t, b), a, np.int32) for a in (0, 2)]
  variables = policy.init(jax.random.key(0), obs, carry, acts[0], start)
  assert ("prev_action_embed" in variables["params"]) == use_prev_action
  logits = [policy.apply(variables, obs, carry, a, start)[1] for a in acts]
  assert (np.abs(np.asarray(logits[0] - logits[1])).max() > 1e-6) == use_prev_action


def test_fourier_features_are_the_vector_then_its_sines_and_cosines():
  x = np.array([[0.2, -1.5], [0.05, 3.0]], np.float32)
  k = np.pi * 2.0 ** np.arange(3)
  want = np.concatenate([x, np.sin(x[..., None] * k).reshape(2, -1),
                         np.cos(x[..., None] * k).reshape(2, -1)], axis=-1)
  np.testing.assert_allclose(fourier_features(jnp.asarray(x), 3), want, rtol=1e-5, atol=1e-6)
  assert fourier_features(jnp.asarray(x), 0) is not None and fourier_features(x, 0).shape == (2, 2)


@pytest.mark.parametrize("octaves", [0, 4])
def test_the_goal_embedding_reads_the_fourier_features(octaves):
  t, b = 2, 3
  obs = nav_obs(np.random.default_rng(4), t, b)
  start, prev = np.ones((t, b), bool), np.zeros((t, b), np.int32)
  policy = NavPolicy(num_actions=4, hidden=16, rnn_layers=1, vector_fourier=octaves)
  carry = policy.initial_carry(b)
  variables = policy.init(jax.random.key(0), obs, carry, prev, start)
  assert variables["params"]["gps_compass_embed"]["kernel"].shape == (2 * (1 + 2 * octaves), 32)
  # With the rows that read the raw vector zeroed, the goal reaches the logits only through
  # the Fourier features.
  params = jax.tree_util.tree_map_with_path(
      lambda path, x: x.at[:2].set(0) if "gps_compass_embed" in jax.tree_util.keystr(path)
      and x.ndim == 2 else x, variables)
  moved = {**obs, "gps_compass": obs["gps_compass"] + np.float32(0.01)}
  delta = np.abs(np.asarray(policy.apply(params, moved, carry, prev, start)[1]
                            - policy.apply(params, obs, carry, prev, start)[1])).max()
  assert (delta > 1e-7) == (octaves > 0), delta


def test_visual_norm_makes_the_policy_invariant_to_the_feature_scale():
  t, b = 2, 3
  obs = nav_obs(np.random.default_rng(3), t, b)
  start = np.ones((t, b), bool)
  prev = np.zeros((t, b), np.int32)
  for norm in (True, False):
    policy = NavPolicy(num_actions=4, hidden=16, rnn_layers=1, visual_norm=norm)
    carry = policy.initial_carry(b)
    variables = policy.init(jax.random.key(0), obs, carry, prev, start)
    # Blow the visual features up 50x, as imitation did without the norm.
    scaled = jax.tree_util.tree_map_with_path(
        lambda path, x: x * 50 if "Dense_0" in jax.tree_util.keystr(path) else x, variables)
    same = [policy.apply(v, obs, carry, prev, start)[1] for v in (variables, scaled)]
    close = np.allclose(same[0], same[1], atol=1e-3)
    assert close == norm, norm


def test_unsupported_observations_are_named():
  spec = {"rgb": jax.ShapeDtypeStruct((8, 8, 3), jnp.uint8),
          "semantic": jax.ShapeDtypeStruct((8, 8, 1), jnp.int32),
          "gps_compass": jax.ShapeDtypeStruct((2,), jnp.float32)}
  assert nav_policy.unsupported_obs(spec) == ["semantic (8, 8, 1) int32"]


# -- training -------------------------------------------------------------------------------

LEARN_UPDATES = 40


@pytest.fixture(scope="module")
def learned():
  """One compiled trainer, trained from seed 0 with a log callback every 10 updates."""
  config = small_config(num_updates=LEARN_UPDATES, anneal_lr=True, log_every=10)
  logged = []
  trainer = ppo.make_train(config, make_env(), log_fn=lambda m: logged.append(int(m["update"])))
  state, metrics = trainer.train(jax.random.key(config.seed))
  jax.effects_barrier()
  return config, trainer, jax.device_get(state), jax.device_get(metrics), logged


def test_ppo_learns_the_toy_task(learned):
  _, _, _, m, _ = learned
  first, last = np.nanmean(m["episode_return"][:5]), np.nanmean(m["episode_return"][-5:])
  # A random walk scores about 0.2 (success about 0.2); 40 updates take it to about 0.8.
  assert last > first + 0.4, (first, last)
  assert np.nanmean(m["success"][-5:]) > 0.5
  assert m["episode_return"].shape == (LEARN_UPDATES,) and m["episodes"].sum() > 0
  for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm"):
    assert np.all(np.isfinite(m[key])), key
  assert m["lr"][0] == pytest.approx(3e-3) and m["lr"][-1] < m["lr"][0]   # annealed.


def test_logging_callback_every_log_every_updates(learned, capsys):
  assert learned[4] == [10, 20, 30, 40]
  logger = recurrent.PrintLogger(256, ppo.PPO.log_line)
  logger({**{k: 0.5 for k in recurrent.EPISODE_METRICS}, "episodes": 3, "update": 2,
          "policy_loss": 0.1, "value_loss": 0.2, "entropy": 1.0, "approx_kl": 0.01})
  assert "update 2 | env steps 512 | return 0.500" in capsys.readouterr().out


def test_same_seed_same_run_other_seed_other_run(learned):
  config, trainer, state, metrics, _ = learned
  again_state, again = trainer.train(jax.random.key(config.seed))
  assert_trees_equal((state.params, metrics), (again_state.params, again))
  _, other = trainer.train(jax.random.key(config.seed + 1))
  assert not np.array_equal(metrics["policy_loss"], other["policy_loss"])


def test_resume_from_checkpoint_is_bit_identical(learned, tmp_path):
  config, _, straight_state, straight, _ = learned
  env, half = make_env(), LEARN_UPDATES // 2
  run = lambda c, **kw: runner.run(ppo.make_train(c, env, log_fn=False), tmp_path, half, **kw)
  # A run stopped (as if killed) halfway, then restarted: new Checkpointer, new trainer.
  _, first = run(config, stop_at=half)
  assert first["policy_loss"].shape == (half,)
  state, resumed = run(config)
  assert_trees_equal(straight, resumed)
  assert_trees_equal(straight_state, state)
  # A finished run is not trained further; a changed config is refused.
  _, again = run(config)
  assert_trees_equal(straight, again)
  changed = config.copy_and_resolve_references()
  changed.lr = 1e-3
  with pytest.raises(ValueError, match=r"another config \(lr: 0.003 -> 0.001\)"):
    run(changed)


@pytest.mark.parametrize("overrides, message", [
    (dict(num_envs=6, num_minibatches=4), "num_envs = 6 is not divisible by "
                                          "config.num_minibatches = 4"),
    (dict(num_envs=0), "config.num_envs: expected a positive int, got 0"),
    (dict(gamma=1.5), "config.gamma"),
    (dict(num_updates=0, total_env_steps=100), "no PPO update to run"),
])
def test_config_errors_name_the_numbers(overrides, message):
  with pytest.raises(ConfigError, match=message):
    ppo.make_train(small_config(**overrides), make_env())


def test_config_errors_device_count_and_names():
  with pytest.raises(ConfigError, match="minibatches of 2 envs, which must split evenly over "
                                        "the 4 devices.*multiple of .* = 16"):
    ppo.check_config(small_config(num_envs=8, num_minibatches=4), num_devices=4)
  config = small_config()
  config.policy.rnn = "lsmt"
  with pytest.raises(ConfigError, match="did you mean lstm"):
    ppo.check_config(config)
  config = small_config()
  config.policy.encoder = "vc1_vitz"
  with pytest.raises(ConfigError, match="policy.encoder"):
    ppo.check_config(config)
  config = small_config()
  config.unknown_field = 1
  with pytest.raises(ConfigError, match="unknown key config.unknown_field"):
    ppo.check_config(config)


# -- frozen PVR -----------------------------------------------------------------------------

def test_frozen_pvr_is_not_trained_and_compression_shapes():
  # The smallest zoo encoder: ViT-Ti at 32 px (patch 16: a 2 x 2 grid of width-192 tokens).
  config = small_config(num_envs=4, rollout_len=4, num_updates=1)
  config.policy.update(encoder="random_vit_ti", img_size=32, encoder_seed=3, hidden=16)
  trainer = ppo.make_train(config, make_env())
  frozen_before = jax.device_get(trainer.frozen)
  assert_trees_equal(frozen_before, zoo.load("random_vit_ti", img_size=32, seed=3).params)
  state = trainer.init(jax.random.key(0))
  params_before = jax.device_get(state.params)
  # Only the policy's own layers are trainable; no encoder weight is in params or Adam state.
  assert "blocks_0" not in str(jax.tree_util.tree_structure((state.params, state.opt_state)))
  channels = nav_policy.compression_channels(2)                # round(2048 / 2^2) = 512.
  compression = params_before["rgb_visual"]["CompressionLayer_0"]
  assert compression["Conv_0"]["kernel"].shape == (3, 3, 192, channels) == (3, 3, 192, 512)
  assert params_before["rgb_visual"]["Dense_0"]["kernel"].shape == (2 * 2 * 512, 16)
  tokens = jax.random.normal(jax.random.key(1), (3, 4, 192))
  compressed = nav_policy.CompressionLayer().apply({"params": compression}, tokens)
  assert compressed.shape == (3, 2048)

  state, _ = trainer.train_chunk(state, 1)
  assert_trees_equal(frozen_before, jax.device_get(trainer.frozen))
  after = jax.device_get(state.params)
  assert not np.array_equal(after["rgb_visual"]["Dense_0"]["kernel"],
                            params_before["rgb_visual"]["Dense_0"]["kernel"])


def test_a_loaded_encoder_can_be_passed_in():
  module = ViT(width=32, depth=1, heads=2, patch=8, img_size=32)
  variables = jax.jit(module.init)(jax.random.key(7), jnp.zeros((1, 32, 32, 3)))
  tiny = zoo.Encoder(module, variables, Preprocess(32, 32, "bilinear"))
  config = small_config()
  config.policy.encoder = "random_vit_l"     # not loaded: the given encoder wins.
  trainer = ppo.make_train(config, make_env(), encoder=tiny)
  assert_trees_equal(jax.device_get(trainer.frozen), variables)
  tokens = jax.jit(trainer.policy.pvr)(trainer.frozen, np.zeros((2, 8, 8, 3), np.uint8))
  assert tokens.shape == (2, 16, 32)


def test_init_from_starts_from_given_params_without_consuming_them():
  env = make_env()
  trainer = ppo.make_train(small_config(), env, log_fn=False)
  params = trainer.init(jax.random.key(0)).params
  state = trainer.init_from(jax.random.key(1), params)
  assert_trees_equal(state.params, params)
  trainer.train_chunk(state, 1)                       # donates `state`
  jax.tree.map(np.asarray, params)                    # the caller's params are still alive


def test_fine_tuning_a_trained_policy_keeps_its_success(learned):
  """PPO from `init_from` (fresh envs and Adam, the run's lr annealed anew) on the task the
  policy was trained on: its success must not fall (a fine-tuning collapse would)."""
  config, trainer, state, metrics, _ = learned
  before = np.nanmean(metrics["success"][-5:])
  tuned = ppo.make_train(small_config(num_updates=LEARN_UPDATES, anneal_lr=True), make_env(),
                         log_fn=False)
  _, after = tuned.train_chunk(tuned.init_from(jax.random.key(7), state.params), LEARN_UPDATES)
  first, last = np.nanmean(after["success"][:5]), np.nanmean(after["success"][-5:])
  assert first > before - 0.15, (before, first)        # init_from starts where training ended
  assert last > before - 0.1, (before, last)


def test_goal_vectors_are_embedded_or_passed_raw():
  env = make_env()
  for embed in (True, False):
    config = small_config()
    config.policy.embed_vectors = embed
    params = ppo.make_train(config, env, log_fn=False).init(jax.random.key(0)).params
    assert ("gps_compass_embed" in params) == embed
