"""Episode streams: every episode is played exactly as a fixed batch of the same size plays it
(actions, rewards, success, length), with slots refilled and the halves overlapped; short and
empty queues; an error mid-stream leaves the stream usable."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.envs import host, pointmass, rollout, stream

SIZE, HORIZON = 3, 30


def _policy(carry, obs):
  """Greedy with a wobble that depends on the step within the episode: a slot whose memory is
  not restarted at a refill acts differently."""
  t = carry["t"]
  greedy = jnp.clip(3.0 * (obs["goal"] - obs["proprio"][:, :2]), -1, 1)
  wobble = 0.3 * jnp.sin(0.7 * t.astype(jnp.float32))[:, None]
  return {"t": t + 1}, greedy * 0.6 + wobble


def _restart(carry, first):
  return {"t": jnp.where(first, 0, carry["t"])}


def _carry(n):
  return {"t": jnp.zeros((n,), jnp.int32)}


def _batched(seeds, make_sim=pointmass.PointMass):
  """The reference: fixed batches of SIZE through `rollout.rollout`."""
  out = {"success": [], "length": [], "return": [], "actions": []}
  with host.SimBatch(make_sim, SIZE, horizon=HORIZON) as batch:
    env = host.HostEnv(batch)
    fn = jax.jit(lambda s: rollout.rollout(env, _policy, _carry(SIZE), s, HORIZON)[1])
    for start in range(0, len(seeds), SIZE):
      chunk = list(seeds[start:start + SIZE])
      keep = len(chunk)
      traj = fn(jnp.asarray(chunk + [-1] * (SIZE - keep), jnp.int32))
      active = np.asarray(traj.active)
      out["success"] += list(np.asarray(traj.success[-1])[:keep])
      out["length"] += list(active.sum(0)[:keep])
      out["return"] += list(np.asarray(traj.reward, np.float64).sum(0)[:keep])
      out["actions"] += [np.asarray(traj.action)[active[:, i], i] for i in range(keep)]
  return out


def _streamed(seeds, num_workers, make_sim=pointmass.PointMass):
  s = stream.EpisodeStream(stream.make_batches(make_sim, SIZE, horizon=HORIZON,
                                               num_workers=num_workers))
  try:
    program = jax.jit(s.program(_policy, _restart))
    return s.run(program, [_carry(n) for n in s.sizes], seeds, record_actions=True), s.sizes
  finally:
    s.close()


@pytest.mark.parametrize("num_workers,halves", [(0, 1), (2, 2)])
def test_stream_plays_every_episode_as_a_fixed_batch_does(num_workers, halves):
  seeds = [3, 1, 4, 15, 9, 26, 5, 35]
  want = _batched(seeds)
  got, sizes = _streamed(seeds, num_workers)
  assert sizes == (SIZE,) * halves
  # Episodes end at different steps (success), so slots are refilled mid-stream.
  assert 0 < np.mean(want["success"]) < 1 and len(set(want["length"])) > 2
  for key in ("success", "length", "return"):
    np.testing.assert_array_equal(got[key], np.asarray(want[key]), err_msg=key)
  for i, (a, b) in enumerate(zip(got["actions"], want["actions"])):
    np.testing.assert_array_equal(a, b, err_msg=f"episode {i}")
  assert np.isnan(got["score"]).all()   # The point mass reports no score.


def test_short_and_empty_queues():
  got, _ = _streamed([7], num_workers=2)    # One episode: three slots of six idle.
  want = _batched([7])
  np.testing.assert_array_equal(got["length"], want["length"])
  np.testing.assert_array_equal(got["actions"][0], want["actions"][0])
  got, _ = _streamed([], num_workers=0)
  assert got["success"].shape == (0,) and got["actions"] == []


class _Failing(pointmass.PointMass):
  """Raises at the 5th step of episode seed 13."""

  def reset(self, seed):
    self.seed, self.t = seed, 0
    return super().reset(seed)

  def step(self, action):
    self.t += 1
    if self.seed == 13 and self.t == 5:
      raise RuntimeError("simulator failure in episode 13")
    return super().step(action)


def test_an_error_mid_stream_is_raised_and_the_stream_still_works():
  s = stream.EpisodeStream(stream.make_batches(_Failing, SIZE, horizon=HORIZON, num_workers=2))
  try:
    program = jax.jit(s.program(_policy, _restart))
    carries = [_carry(n) for n in s.sizes]
    with pytest.raises(Exception, match="episode 13"):
      s.run(program, carries, [1, 2, 13, 4, 5, 6, 7])
    got = s.run(program, carries, [1, 2, 4])
  finally:
    s.close()
  want = _batched([1, 2, 4])
  for key in ("success", "length", "return"):
    np.testing.assert_array_equal(got[key], np.asarray(want[key]), err_msg=key)


def test_rebind_needs_the_same_slots_and_shapes():
  make = functools.partial(stream.make_batches, horizon=HORIZON)
  s = stream.EpisodeStream(make(pointmass.PointMass, SIZE))
  try:
    assert s.can_rebind(make(pointmass.PointMass, SIZE))
    assert not s.can_rebind(make(pointmass.PointMass, SIZE + 1))
    other = make(functools.partial(pointmass.PointMass, 8), SIZE)
    assert not s.can_rebind(other)
    with pytest.raises(ValueError, match="slots"):
      s.rebind(other)
  finally:
    s.close()
