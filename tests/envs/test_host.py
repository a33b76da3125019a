"""The host bridge: a scanned rollout equals a Python loop; callbacks are never dropped or
replayed; workers give the same trajectories as the main process."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.envs import host, pointmass, rollout


def _policy(carry, obs):
  return carry, jnp.clip(3.0 * (obs["goal"] - obs["proprio"][:, :2]), -1, 1) * carry


def _assert_same(a, b, keys=("proprio",)):
  for name in ("action", "reward", "success", "done", "active"):
    np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)),
                                  err_msg=name)
  for k in keys:
    np.testing.assert_array_equal(np.asarray(a.obs[k]), np.asarray(b.obs[k]), err_msg=k)


def _scan(env, seeds, horizon, gain=0.7):
  fn = jax.jit(lambda s: rollout.rollout(env, _policy, jnp.float32(gain), s, horizon,
                                         record=("proprio", "rgb")))
  return fn(jnp.asarray(seeds))


def test_scan_rollout_equals_python_loop():
  seeds = np.array([11, 12, 13, 14])
  with host.SimBatch(pointmass.PointMass, 4, horizon=40) as batch:
    env = host.HostEnv(batch)
    state, traj = _scan(env, seeds, 40)
    ref = rollout.python_rollout(batch, _policy, jnp.float32(0.7), seeds, 40,
                                 record=("proprio", "rgb"))
  _assert_same(traj, ref, ("proprio", "rgb"))
  # The process noise makes any dropped or replayed step visible in every later state.
  assert np.asarray(traj.success[-1]).all()
  np.testing.assert_array_equal(np.asarray(state.metrics["steps"]),
                                np.asarray(traj.active).sum(0))


def test_every_step_reaches_the_simulator_exactly_once():
  with host.SimBatch(pointmass.PointMass, 3, horizon=25, stop_on_success=False) as batch:
    env = host.HostEnv(batch)
    _, traj = _scan(env, [1, 2, 3], 25)
    assert batch._local.steps.tolist() == [25, 25, 25]  # pylint: disable=protected-access
    _, again = _scan(env, [1, 2, 3], 25)
  _assert_same(traj, again)


def test_done_envs_are_not_stepped_and_keep_their_last_obs():
  with host.SimBatch(pointmass.PointMass, 2, horizon=60) as batch:
    _, traj = _scan(host.HostEnv(batch), [5, 6], 60)
  active = np.asarray(traj.active)
  proprio = np.asarray(traj.obs["proprio"])
  for i in range(2):
    last = active[:, i].sum()
    assert last < 60  # Reached the goal early.
    assert not active[last:, i].any()
    np.testing.assert_array_equal(proprio[last:, i], np.repeat(proprio[last - 1:last, i],
                                                               60 - last, axis=0))
    assert (np.asarray(traj.reward)[last:, i] == 0).all()


def test_workers_match_the_main_process():
  seeds = np.array([3, 4, 5, 6, 7])
  with host.SimBatch(pointmass.PointMass, 5, horizon=30) as batch:
    _, local = _scan(host.HostEnv(batch), seeds, 30)
  with host.SimBatch(pointmass.PointMass, 5, horizon=30, num_workers=2) as batch:
    _, remote = _scan(host.HostEnv(batch), seeds, 30)
  _assert_same(local, remote, ("proprio", "rgb"))


def test_worker_failure_is_reported_with_its_traceback():
  bad = functools.partial(pointmass.PointMass, no_such_argument=1)
  with pytest.raises(RuntimeError, match="worker failed(.|\n)*no_such_argument"):
    host.SimBatch(bad, 2, horizon=5, num_workers=1)


def test_bad_calls_name_the_problem():
  with host.SimBatch(pointmass.PointMass, 2, horizon=5) as batch:
    with pytest.raises(ValueError, match="expected 2 seeds"):
      batch.reset(np.array([1, 2, 3]))
    batch.reset(np.array([1, 2]))
    with pytest.raises(ValueError, match=r"expected actions of shape \(2, 2\)"):
      batch.step(np.zeros((2, 3)))
    env = host.HostEnv(batch)
    state = env.reset(jnp.array([1, 2]))
    with pytest.raises(Exception, match="do not belong to this bridge"):
      env.step(state.replace(handle=jnp.array([7, 8], jnp.int32)), jnp.zeros((2, 2)))
  with pytest.raises(ValueError, match="num_envs"):
    host.SimBatch(pointmass.PointMass, 0, horizon=5)


def test_rebind_keeps_the_compiled_rollout_and_checks_shapes():
  traces = []

  def policy(carry, obs):
    traces.append(1)  # Runs only while tracing.
    return _policy(carry, obs)

  first = host.SimBatch(pointmass.PointMass, 2, horizon=15)
  env = host.HostEnv(first)
  fn = jax.jit(lambda s: rollout.rollout(env, policy, jnp.float32(0.7), s, 15,
                                         record=("proprio",))[1])
  fn(jnp.array([1, 2]))
  n_traces = len(traces)
  second = host.SimBatch(functools.partial(pointmass.PointMass, dt=0.2), 2, horizon=15)
  assert env.rebind(second) is first
  first.close()
  got = fn(jnp.array([1, 2]))
  assert len(traces) == n_traces  # No retrace, no recompile.
  with host.SimBatch(functools.partial(pointmass.PointMass, dt=0.2), 2, horizon=15) as ref:
    want = rollout.python_rollout(ref, _policy, jnp.float32(0.7), np.array([1, 2]), 15,
                                  record=("proprio",))
  _assert_same(got, want)
  with pytest.raises(ValueError, match="rebind.*expected"):
    env.rebind(host.SimBatch(functools.partial(pointmass.PointMass, image_size=8), 2,
                             horizon=15))
  second.close()


def test_negative_seeds_leave_slots_idle():
  with host.SimBatch(pointmass.PointMass, 3, horizon=10, stop_on_success=False) as batch:
    _, traj = _scan(host.HostEnv(batch), [4, -1, 5], 10)
    assert batch._local.steps.tolist() == [10, 0, 10]  # pylint: disable=protected-access
  active = np.asarray(traj.active)
  assert active[:, 0].all() and not active[:, 1].any() and active[:, 2].all()
  assert not np.asarray(traj.success)[:, 1].any()


def test_python_loop_matches_the_scan_when_every_slot_is_idle():
  with host.SimBatch(pointmass.PointMass, 2, horizon=4) as batch:
    _, traj = _scan(host.HostEnv(batch), [-1, -1], 4)
    ref = rollout.python_rollout(batch, _policy, jnp.float32(0.7), np.array([-1, -1]), 4,
                                 record=("proprio", "rgb"))
  _assert_same(traj, ref, ("proprio", "rgb"))
  assert not np.asarray(traj.active).any()
