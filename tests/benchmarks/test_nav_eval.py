"""Evaluation loop and summary of vcbench-nav policies, with scripted policies whose outcome
is known in advance."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vcbench  # noqa: F401
from vcbench.benchmarks import nav as nav_bench
from vcbench.envs import nav
from vcbench.envs.nav import env as E


@pytest.fixture(scope="module")
def val_env():
  return nav.make("pointnav", "val", num_scenes=2, num_episodes=9, height=8, width=8,
                  sensors=("depth",), max_steps=12)


def constant(action):
  """A 'policy' that always takes `action` (hashable: a jit-static argument)."""
  return functools.partial(_constant_step, action)


def _constant_step(action, params, frozen, obs, carry, prev_action, start):
  n = prev_action.shape[0]
  return carry, jax.nn.one_hot(jnp.full((n,), action), 4) * 100.0, jnp.zeros((n,))


def _no_carry(n):
  return ()


def test_end_at_once_fails_every_episode_in_one_step(val_env):
  r = nav_bench.evaluate(constant(E.END), _no_carry, None, val_env, batch=4)
  assert len(r["success"]) == 9                        # 3 batches, the last padded and cut
  assert (r["success"] == 0).all() and (r["episode_length"] == 1).all()
  assert (r["stop_failure"] == 1).all()
  np.testing.assert_allclose(r["final_distance"], np.asarray(val_env.episodes.distance), atol=1e-5)


def test_turning_forever_runs_into_the_step_limit(val_env):
  r = nav_bench.evaluate(constant(E.ROTATE_LEFT), _no_carry, None, val_env, batch=9)
  assert (r["episode_length"] == 12).all() and (r["failed_actions"] == 0).all()
  s = nav_bench.summarize(r, "pointnav")
  assert s["success"] == 0.0 and s["episodes"] == 9.0
  assert {"success_easy", "success_medium", "success_hard"} <= set(s)   # balanced val set


def test_summary_is_in_percent_and_split_by_difficulty():
  r = {k: np.zeros(4) for k in E.METRICS}
  r["success"] = np.array([1.0, 1.0, 0.0, 0.0])
  r["spl"] = np.array([0.5, 1.0, 0.0, 0.0])
  r["difficulty"] = np.array([0, 0, 2, 2])
  s = nav_bench.summarize(r, "pointnav")
  assert s["success"] == 50.0 and s["spl"] == 37.5
  assert s["success_easy"] == 100.0 and s["success_hard"] == 0.0 and "success_medium" not in s
  # 95% half-widths: 1.96 * sample std / sqrt(n), in percent.
  assert s["success_ci95"] == pytest.approx(100 * 1.96 * np.std([1, 1, 0, 0], ddof=1) / 2)
  assert s["spl_ci95"] == pytest.approx(100 * 1.96 * np.std([0.5, 1, 0, 0], ddof=1) / 2)


def test_an_auto_reset_env_is_refused():
  env = nav.make("pointnav", "train", num_scenes=2, num_episodes=4, height=8, width=8,
                 sensors=("depth",))
  with pytest.raises(ValueError, match="auto_reset"):
    nav_bench.evaluate(constant(E.END), _no_carry, None, env)


def test_stop_failures_positive_and_negative():
  r = {k: np.zeros(4) for k in nav_bench.RESULTS}
  r["success"] = np.array([1.0, 0.0, 0.0, 0.0])
  r["stop_failure"] = np.array([0.0, 1.0, 1.0, 0.0])     # 3 END calls, 2 out of range
  r["in_range_steps"] = np.array([1.0, 0.0, 0.0, 3.0])   # in range 4 times, stopped once
  r["missed_stops"] = np.array([0.0, 0.0, 0.0, 3.0])
  s = nav_bench.summarize(r, "pointnav")
  assert s["stop_failure_pos"] == pytest.approx(200 / 3) and s["stop_failure_neg"] == 75.0
  r["in_range_steps"] = r["missed_stops"] = np.zeros(4)
  assert np.isnan(nav_bench.summarize(r, "pointnav")["stop_failure_neg"])


def test_in_range_steps_are_counted_by_the_loop(val_env):
  # Turning in place never calls END: every step in range is a missed stop, and a start pose
  # in range stays in range for the whole episode.
  r = nav_bench.evaluate(constant(E.ROTATE_LEFT), _no_carry, None, val_env, batch=9)
  np.testing.assert_array_equal(r["missed_stops"], r["in_range_steps"])
  start_in_range = np.asarray(val_env.episodes.distance) <= 0.2
  np.testing.assert_array_equal(r["in_range_steps"], np.where(start_in_range, 12, 0))
