"""SAC: the squashed-Gaussian log-density, the replay buffer, learning on the point mass through
the host bridge, and resuming a killed run to the same parameters."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.algos import runner, sac
from vcbench.envs import host, pointmass

HORIZON = 40


def _config(**kw):
  c = sac.default_config()
  c.horizon, c.num_envs, c.hidden, c.batch_size, c.warmup = HORIZON, 4, (64, 64), 128, 400
  c.episodes = 12
  c.buffer_size = 20_000
  c.update(kw)
  return c


def _env(num_envs=4):
  return host.HostEnv(host.SimBatch(pointmass.make_sim("reach"), num_envs, horizon=HORIZON,
                                    stop_on_success=False))


def test_log_prob_is_the_density_of_the_squashed_gaussian():
  actor = sac.Actor((8,), 2)
  params = actor.init(jax.random.key(0), jnp.zeros((1, 3)))
  obs = jax.random.normal(jax.random.key(1), (5, 3))
  action, logp = sac.sample_action(actor, params, obs, jax.random.key(2))
  mean, log_std = actor.apply(params, obs)
  u = jnp.arctanh(jnp.clip(action, -1 + 1e-6, 1 - 1e-6))
  gauss = jax.scipy.stats.norm.logpdf(u, mean, jnp.exp(log_std)).sum(-1)
  expected = gauss - jnp.log(1 - action ** 2).sum(-1)   # Change of variables through tanh.
  np.testing.assert_allclose(logp, expected, rtol=1e-3, atol=1e-3)
  assert float(jnp.abs(action).max()) < 1


def test_buffer_wraps_around_and_samples_only_stored_rows():
  buf = sac.Buffer.empty(5, 1, 1)
  for i in range(3):
    x = jnp.full((2, 1), float(i + 1))
    buf = buf.add(x, x, jnp.full((2,), float(i + 1)), x)
  assert int(buf.size) == 5 and int(buf.ptr) == 1
  np.testing.assert_array_equal(buf.reward, [3, 1, 2, 2, 3])   # Row 0 overwritten by the third.
  small = sac.Buffer.empty(10, 1, 1).add(jnp.ones((2, 1)), jnp.ones((2, 1)), jnp.ones(2),
                                          jnp.ones((2, 1)))
  _, _, reward, _ = small.sample(jax.random.key(0), 64)
  np.testing.assert_array_equal(reward, 1.0)                    # Never an empty row.


def _eval(trainer, params, env, n=2):
  return float(np.mean(sac.evaluate(trainer.actor, params, env, 500 + jnp.arange(n), HORIZON)))


def _expert_return(n=2):
  sim = pointmass.make_sim("reach")()
  total = 0.0
  for seed in 500 + np.arange(n):
    obs = sim.reset(int(seed))
    for _ in range(HORIZON):
      obs, reward, _, _ = sim.step(pointmass.greedy_action(obs))
      total += reward
  return total / n


def test_sac_learns_to_reach_on_the_point_mass_through_the_host_bridge():
  env = _env(num_envs=2)
  try:
    trainer = sac.make_train(_config(num_envs=2, episodes=30, updates_per_step=2), env)
    state = trainer.init(jax.random.key(0))
    before = _eval(trainer, state.actor, env)
    state, metrics = trainer.train_chunk(state, trainer.num_updates)
    after = _eval(trainer, state.actor, env)
  finally:
    env.close()
  assert metrics["return"].shape == (30,) and np.isfinite(metrics["critic_loss"]).all()
  # Reward is -distance per step: the trained policy closes most of the gap between the
  # untrained one and the greedy expert on held-out seeds.
  expert = _expert_return()
  assert after - before > 0.6 * (expert - before), (before, after, expert)
  assert int(state.env_steps) == 30 * 2 * HORIZON


def test_a_killed_or_extended_run_resumes_to_the_same_parameters(tmp_path):
  env = _env()
  try:
    trainer = sac.make_train(_config(episodes=4, warmup=100), env)
    straight, _ = runner.run(trainer, None, 2)
    runner.run(trainer, tmp_path / "run", 1, stop_at=1)   # "Killed" after the first chunk.
    shorter = sac.make_train(_config(episodes=2, warmup=100), env)
    runner.run(shorter, tmp_path / "run", 1)              # A finished shorter run ...
    resumed, metrics = runner.run(trainer, tmp_path / "run", 2)   # ... trained on.
  finally:
    env.close()
  assert metrics["return"].shape == (4,)
  for a, b in zip(jax.tree.leaves(straight.actor), jax.tree.leaves(resumed.actor)):
    np.testing.assert_array_equal(a, b)


def test_env_batch_must_match_the_config():
  env = _env(num_envs=2)
  try:
    with pytest.raises(ValueError, match="num_envs is 4 but the env batches 2"):
      sac.make_train(_config(), env)
  finally:
    env.close()
