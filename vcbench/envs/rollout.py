"""Rollouts as one `lax.scan`: env (JAX-native or host-bridged) + policy in a single program.

`policy_step(carry, obs) -> (carry, action)` is pure; the carry holds whatever the policy
needs across steps (e.g. the frame-embedding history of CortexBench's BC policies). Once
every env is done the remaining scan steps skip both the policy and the simulator
(`lax.cond`), so early successes cost nothing.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vcbench.envs.core import Env

PolicyStep = Callable[[Any, dict], tuple[Any, jax.Array]]


@struct.dataclass
class Trajectory:
  """Per-step records [T, num_envs, ...]; steps after an env is done repeat its last values
  with `active` False."""
  action: jax.Array
  reward: jax.Array
  success: jax.Array
  done: jax.Array
  active: jax.Array
  obs: dict[str, jax.Array]


def rollout(env: Env, policy_step: PolicyStep, carry: Any, seeds: jax.Array, horizon: int,
            record: tuple[str, ...] = ()) -> tuple[Any, Trajectory]:
  """Runs one episode per env for at most `horizon` steps; jittable (close over `env`).

  Returns the final env state and the trajectory; `record` names observation keys to keep
  per step (the observation *after* each step).
  """
  state = env.reset(seeds)
  n, a_dim = env.num_envs, env.action_dim

  def live(c):
    state, carry = c
    carry, action = policy_step(carry, state.obs)
    active = ~state.done
    new = env.step(state, action)
    out = _record(action, new, active, record)
    return (new, carry), out

  def idle(c):
    state, _ = c
    still = state.replace(reward=jnp.zeros_like(state.reward))
    return c, _record(jnp.zeros((n, a_dim), jnp.float32), still, jnp.zeros((n,), bool), record)

  def body(c, _):
    return jax.lax.cond(jnp.all(c[0].done), idle, live, c)

  (state, carry), traj = jax.lax.scan(body, (state, carry), None, length=horizon)
  return state, traj


def _record(action, state, active, keys) -> Trajectory:
  return Trajectory(action=jnp.asarray(action, jnp.float32), reward=state.reward,
                    success=state.metrics["success"], done=state.done, active=active,
                    obs={k: state.obs[k] for k in keys})


def python_rollout(batch, policy_step: PolicyStep, carry: Any, seeds: np.ndarray,
                   horizon: int, record: tuple[str, ...] = ()) -> Trajectory:
  """The same episode as a plain Python loop over a `host.SimBatch` (the reference the
  scanned rollout is tested against, and a fallback for debugging)."""
  obs, _, done, success, _ = batch.reset(np.asarray(seeds))
  step_fn = jax.jit(policy_step)
  idle_action = np.zeros((batch.num_envs, batch.action_dim), np.float32)
  rows = []
  for _ in range(horizon):
    active = ~done
    action, reward = idle_action, np.zeros(batch.num_envs, np.float32)
    if active.any():  # Once every env is done, the scan's `idle` branch: nothing runs.
      carry, action = step_fn(carry, {k: jnp.asarray(v) for k, v in obs.items()})
      action = np.asarray(action, np.float32)
      obs, reward, done, success, _ = batch.step(action)
    rows.append((action, reward, success, done, active, {k: obs[k] for k in record}))
  cols = list(zip(*rows))
  return Trajectory(action=np.stack(cols[0]), reward=np.stack(cols[1]),
                    success=np.stack(cols[2]), done=np.stack(cols[3]),
                    active=np.stack(cols[4]),
                    obs={k: np.stack([o[k] for o in cols[5]]) for k in record})
