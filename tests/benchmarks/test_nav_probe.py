"""vcbench.benchmarks.nav_probe: the expert-agreement and feature-scale measurements behind the
README's ObjectNav diagnosis, checked by construction on the tiny variant."""
import jax
import numpy as np

from configs import nav as nav_config
from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import nav_probe


def _tiny_trainer():
  config = nav_config.get_config("tiny")
  config.algo = "bc"
  trainer = nav_bench.make_trainer(config)
  return config, trainer, trainer.init(jax.random.key(0)).params


def test_agreement_of_the_four_constant_policies_sums_to_one():
  config, trainer, params = _tiny_trainer()
  env = nav_bench.make_env(config, "train")
  shares = []
  for action in range(4):
    # An actor bias this large makes the policy answer `action` whatever it sees.
    bias = params["actor"]["bias"].at[action].set(1e4)
    forced = {**params, "actor": {**params["actor"], "bias": bias}}
    shares.append(nav_probe.expert_agreement(trainer, forced, env, envs=4, steps=6))
  # The expert drives the same rollouts every time, so each of its labels is matched by
  # exactly one of the four constant policies.
  assert all(0.0 <= s <= 1.0 for s in shares)
  np.testing.assert_allclose(sum(shares), 1.0, atol=1e-6)


def test_feature_scale_is_measured_after_the_last_visual_layer():
  config, trainer, params = _tiny_trainer()
  val = nav_bench.make_env(config, "val", config.val_episodes)
  cnn = params["visual_cnn"]
  scaled = {**params, "visual_cnn": {**cnn, "Dense_0": jax.tree.map(lambda x: 10 * x,
                                                                   cnn["Dense_0"])}}
  magnitude, spread = nav_probe.visual_stats(trainer, params, val)
  magnitude10, _ = nav_probe.visual_stats(trainer, scaled, val)
  assert magnitude > 0 and spread >= 0
  np.testing.assert_allclose(magnitude10, 10 * magnitude, rtol=1e-4)   # ReLU is homogeneous
