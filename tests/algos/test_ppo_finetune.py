"""PPO with the zoo encoder fine-tuned (config.policy.finetune_encoder): updates, lr split,
resume, config errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from test_ppo import assert_trees_equal, small_config
from toy_nav_env import make_env
from vcbench.algos import ppo, runner
from vcbench.config import ConfigError
from vcbench.models import nav_policy, zoo
from vcbench.models.preprocess import Preprocess
from vcbench.models.vit import ViT

ENCODER_LR = 1e-3


@pytest.fixture(scope="module")
def tiny():
  """A one-block ViT on the toy env's 8 x 8 frames (upsampled to 32: a 4 x 4 patch grid)."""
  module = ViT(width=32, depth=1, heads=2, patch=8, img_size=32)
  variables = jax.jit(module.init)(jax.random.key(7), jnp.zeros((1, 32, 32, 3)))
  return zoo.Encoder(module, variables, Preprocess(32, 32, "bilinear"))


def finetune_config(encoder_lr=ENCODER_LR, **overrides):
  config = small_config(num_envs=4, rollout_len=4, num_updates=2, **overrides)
  # The name is only validated: the encoder passed to make_train is used.
  # Chunks of 3 frames: the rollouts (4 envs) and the minibatches (2 envs x 4 steps) run the
  # encoder in chunks, one of them padded.
  config.policy.update(encoder="random_vit_ti", finetune_encoder=True, encoder_lr=encoder_lr,
                       encoder_chunk=3, hidden=16)
  return config


def split(params):
  """(the encoder's variables, the rest of the params)."""
  pvr = nav_policy.PVR_PARAM
  return params[pvr], {k: v for k, v in params.items() if k != pvr}


def max_change(a, b):
  return max(float(np.abs(x - y).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope="module")
def run(tiny):
  """One compiled trainer; the params at init and after each of two updates."""
  config = finetune_config()
  trainer = ppo.make_train(config, make_env(), encoder=tiny, log_fn=False)
  state = trainer.init(jax.random.key(config.seed))
  params = [jax.device_get(state.params)]
  for _ in range(2):
    state, _ = trainer.train_chunk(state, 1)
    params.append(jax.device_get(state.params))
  return config, trainer, params, jax.device_get(state)


def test_one_update_trains_the_encoder_at_its_lr(run, tiny):
  config, trainer, params, _ = run
  (enc_before, pol_before), (enc_after, pol_after) = split(params[0]), split(params[1])
  assert trainer.frozen is None                 # No frozen argument: the encoder is a param.
  assert_trees_equal(enc_before, tiny.params)   # Initialised from the loaded encoder.
  # Adam moves each parameter by at most ~lr per step (2 epochs x 2 minibatches).
  steps = config.update_epochs * config.num_minibatches
  assert 0 < max_change(enc_before, enc_after) <= steps * ENCODER_LR * 1.01
  assert max_change(pol_before, pol_after) > steps * ENCODER_LR * 1.5   # At lr = 3e-3.


def test_encoder_lr_zero_leaves_the_encoder_unchanged(tiny):
  # The optimiser alone (the gradients' path to the encoder is the test above's): one update
  # from the trainer's own transform, on gradients of ones.
  trainer = ppo.make_train(finetune_config(encoder_lr=0.0), make_env(), encoder=tiny,
                           log_fn=False)
  params = jax.tree.map(lambda s: jnp.ones(s.shape, s.dtype), trainer.abstract_state().params)
  updates, _ = jax.jit(trainer.tx.update)(params, trainer.tx.init(params), params)
  enc, policy = split(jax.device_get(updates))
  assert all(np.all(u == 0) for u in jax.tree.leaves(enc))
  assert all(np.all(u != 0) for u in jax.tree.leaves(policy))


def test_resume_restores_the_fine_tuned_encoder(run, tmp_path):
  # A run stopped after one update, then resumed from its checkpoint (abstract state, restore
  # and shardings include the encoder), equals the uninterrupted one.
  config, trainer, _, straight = run
  _, first = runner.run(trainer, tmp_path, 1, stop_at=1)
  state, metrics = runner.run(trainer, tmp_path, 1)
  assert nav_policy.PVR_PARAM in state.params
  assert_trees_equal(jax.device_get(state), straight)
  assert metrics["policy_loss"].shape == (2,)
  np.testing.assert_array_equal(metrics["policy_loss"][:1], first["policy_loss"])


@pytest.mark.parametrize("policy, message", [
    (dict(encoder="cnn", finetune_encoder=True), "encoder = 'cnn' is the SimpleCNN, which is "
                                                 "always trained"),
    (dict(encoder="random_vit_ti", finetune_encoder=True, encoder_lr=-1e-5),
     "config.policy.encoder_lr: expected a number >= 0"),
    (dict(encoder_chunk=-1), "config.policy.encoder_chunk: expected an int >= 0"),
    (dict(vector_fourier=-2), "config.policy.vector_fourier: expected an int in \\[0, 16\\]"),
])
def test_config_errors(policy, message):
  config = small_config()
  config.policy.update(policy)
  with pytest.raises(ConfigError, match=message):
    ppo.check_config(config)


def test_default_config_hashes_as_before_the_fine_tuning_fields():
  config = small_config()
  old = config.copy_and_resolve_references()
  for key in ("finetune_encoder", "encoder_lr", "encoder_chunk", "vector_fourier"):
    del old.policy[key]
  assert runner.fingerprint(config) == runner.fingerprint(old)
  config.policy.finetune_encoder = True
  assert runner.fingerprint(config) != runner.fingerprint(old)


def test_a_config_read_back_from_before_gets_the_added_fields():
  config = small_config()
  old = config.copy_and_resolve_references()
  del old.policy["vector_fourier"], old.policy["encoder_lr"]
  filled = runner.with_added_later(old, config)
  assert filled.policy.vector_fourier == 0 and filled.policy.encoder_lr == 1e-5
  assert runner.fingerprint(filled) == runner.fingerprint(config)
  assert "critic" not in filled    # only fields today's config of that kind has


def test_a_frozen_encoder_runs_once_per_frame_and_gives_the_same_policy(tiny):
  config = finetune_config()
  config.policy.finetune_encoder = False
  trainer = ppo.make_train(config, make_env(), encoder=tiny, log_fn=False)
  state = trainer.init(jax.random.key(0))
  obs = state.env_state.obs
  cached = trainer.obs(obs, trainer.frozen)
  assert "rgb" not in cached and cached["rgb_tokens"].shape[:2] == (4, 16)
  assert trainer.obs(cached, trainer.frozen).keys() == cached.keys()      # idempotent
  args = (state.carry, state.prev_action, state.start)
  raw = trainer.policy_step(state.params, trainer.frozen, obs, *args)
  pre = trainer.policy_step(state.params, trainer.frozen, cached, *args)
  for a, b in zip(jax.tree.leaves(raw), jax.tree.leaves(pre)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  # The rollout records the tokens, so the SGD epochs never see an image.
  _, traj, _ = ppo.PPO().collect(trainer, state, trainer.env, trainer.frozen,
                                 jax.random.key(1))
  assert "rgb" not in traj.obs and traj.obs["rgb_tokens"].shape[:2] == (config.rollout_len, 4)
  before = jax.device_get(state.params)
  new, _ = trainer.train_chunk(state, 1)     # (donates `state`)
  assert max_change(jax.device_get(new.params), before) > 0
