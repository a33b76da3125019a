"""Dynamics corruptions: RobustNav's parameters, per-episode seeding, and their effect in the env."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.envs import nav
from vcbench.robustness import dynamics

MOVE, LEFT, RIGHT, END = range(4)


def motions(name, action, episodes=200, steps=1, seed=0):
  d = dynamics.Dynamics(name, seed)
  ep, st = np.meshgrid(np.arange(episodes), np.arange(steps), indexing="ij")
  f = jax.jit(jax.vmap(lambda e, s: d.motion(e, s, action)))
  m = f(jnp.asarray(ep.ravel()), jnp.asarray(st.ravel()))
  return jax.tree.map(lambda x: np.asarray(x).reshape(episodes, steps), m)


def test_registry_and_unknown_name():
  assert set(dynamics.DYNAMICS.names()) == {"motion_bias_constant", "motion_bias_stochastic",
                                    "motion_drift", "motor_failure", "pyrobot_noise"}
  with pytest.raises(KeyError, match="unknown dynamics corruption 'friction'.*motion_drift"):
    dynamics.Dynamics("friction")


def test_motion_bias_constant_is_per_episode_and_from_robustnav_sets():
  fwd = motions("motion_bias_constant", MOVE, steps=3).forward
  turn = motions("motion_bias_constant", RIGHT, steps=3).turn
  assert np.all(fwd == fwd[:, :1]) and np.all(turn == turn[:, :1])     # constant per episode
  np.testing.assert_allclose(sorted(set(np.round(fwd[:, 0], 4))), [0.1, 0.15, 0.2, 0.3, 0.35, 0.4])
  degrees = sorted(set(np.round(np.degrees(turn[:, 0]), 3)))
  np.testing.assert_allclose(degrees, [15, 20, 25, 35, 40, 45])
  # One friction mode per episode for both: a short move comes with a short turn.
  m_fwd, m_turn = fwd[:, 0] < 0.25, turn[:, 0] < math.radians(30)
  np.testing.assert_array_equal(m_fwd, m_turn)


def test_motion_bias_stochastic_statistics():
  fwd = motions("motion_bias_stochastic", MOVE, episodes=100, steps=40).forward
  turn = motions("motion_bias_stochastic", LEFT, episodes=100, steps=40).turn
  assert abs(fwd.mean() - 0.25) < 0.01 and abs(fwd.std() - 0.1) < 0.01
  assert abs(np.degrees(-turn).mean() - 30) < 1.0 and abs(np.degrees(turn).std() - 10) < 1.0


def test_drift_motor_failure_and_pyrobot():
  m = motions("motion_drift", MOVE, steps=2)
  np.testing.assert_allclose(np.hypot(m.forward, m.lateral), 0.25, rtol=1e-6)
  np.testing.assert_allclose(np.abs(m.lateral), 0.25 * math.sin(math.radians(10)), rtol=1e-5)
  assert np.all(m.lateral == m.lateral[:, :1]) and 0.3 < np.mean(m.lateral > 0) < 0.7
  left, right = motions("motor_failure", LEFT).turn[:, 0], motions("motor_failure", RIGHT).turn[:, 0]
  assert np.all((left == 0) != (right == 0))                  # exactly one motor fails
  assert np.all(motions("motor_failure", MOVE).forward == 0.25)
  py = motions("pyrobot_noise", MOVE, episodes=50, steps=40)
  # habitat-sim's LoCoBot ILQR linear model: mean (0.014, 0.009) m, variance (0.006, 0.005).
  assert abs(py.forward.mean() - 0.264) < 0.006 and abs(py.lateral.mean() - 0.009) < 0.006
  assert py.forward.min() >= 0.25 - 3 * math.sqrt(0.006) - 1e-6
  assert np.all(motions("pyrobot_noise", END).forward == 0)


def test_clean_env_unchanged_and_drift_moves_sideways():
  env = nav.make("pointnav", "val", num_scenes=2, num_episodes=8, height=8, width=8,
                 sensors=("depth",))
  drifting = dynamics.corrupt(env, "motion_drift", seed=3)
  idx = jnp.arange(8)
  step = jax.jit(jax.vmap(lambda e, s, a: e.step(s, a), in_axes=(None, 0, None)))
  s0 = jax.vmap(env.reset_to)(idx)
  clean, drift = step(env, s0, MOVE), step(drifting, jax.vmap(drifting.reset_to)(idx), MOVE)
  moved = np.asarray(clean.sim.failed_actions == 0) & np.asarray(drift.sim.failed_actions == 0)
  assert moved.any()
  h = np.asarray(s0.sim.heading)
  d_clean = np.asarray(clean.sim.pos - s0.sim.pos)
  np.testing.assert_allclose(d_clean[moved], 0.25 * np.stack([np.cos(h), np.sin(h)], -1)[moved],
                             atol=1e-6)
  d = np.asarray(drift.sim.pos - s0.sim.pos)
  side = d[:, 0] * -np.sin(h) + d[:, 1] * np.cos(h)          # right of the heading
  np.testing.assert_allclose(np.abs(side[moved]), 0.0434, atol=1e-3)
  # The same episode always drifts the same way (seeded by episode, not by call).
  again = step(drifting, jax.vmap(drifting.reset_to)(idx), MOVE)
  np.testing.assert_array_equal(np.asarray(again.sim.pos), np.asarray(drift.sim.pos))


def test_motor_failure_turn_is_a_noop_not_a_collision():
  env = dynamics.corrupt(nav.make("pointnav", "val", num_scenes=1, num_episodes=16, height=8,
                                  width=8, sensors=("depth",)), "motor_failure")
  s0 = jax.vmap(env.reset_to)(jnp.arange(16))
  step = jax.jit(jax.vmap(env.step, in_axes=(0, None)))
  left, right = step(s0, LEFT), step(s0, RIGHT)
  same_l = np.isclose(np.asarray(left.sim.heading), np.asarray(s0.sim.heading))
  same_r = np.isclose(np.asarray(right.sim.heading), np.asarray(s0.sim.heading))
  assert np.all(same_l != same_r)
  assert int(left.sim.failed_actions.sum() + right.sim.failed_actions.sum()) == 0
