"""RobustNav's dynamics corruptions: what an action actually does to the agent, seeded per episode.

    env = dynamics.corrupt(env, "motion_drift", seed=0)     # a NavEnv whose moves drift
    state = jax.vmap(env.step)(state, actions)               # still pure and jittable

A corruption is a pure function `motion(key_episode, key_step, action) -> Motion`: the forward
and sideways displacement (metres, agent frame) and the turn (radians) one action produces.
Episode-level draws (a bias's sign and size, a drift's side, the failed motor) come from
`key_episode` = fold_in(seed, episode index), so every agent meets the same corruption on the
same evaluation episode; per-step noise comes from `key_step` = fold_in(key_episode, step).
The env (`NavEnv._act`) then moves the agent, with the usual collision rule.

Parameters (RobustNav, `allenact_plugins/robothor_plugin/robothor_environment.py` and the
paper's Section 3; the ideal action is MOVE 0.25 m, ROTATE 30 degrees):
  motion_bias_constant    per episode, "high" or "low friction" (one draw for both): the move
                          becomes 0.25 -/+ {0.05, 0.10, 0.15} m and the turn 30 -/+ {5, 10, 15}
                          degrees (size drawn separately for each).
  motion_bias_stochastic  per step: move ~ N(0.25, 0.1) m, turn ~ N(30, 10) degrees
                          (AI2-THOR's movementGaussianSigma / rotateGaussianSigma).
  motion_drift            per episode a side; every move heads 10 degrees off towards it,
                          0.25 sin(10 deg) = 0.043 m sideways per step.
  motor_failure           per episode ROTATE_LEFT or ROTATE_RIGHT does nothing.
  pyrobot_noise           habitat-sim's PyRobot LoCoBot noise model (controller ILQR by
                          default, multiplier 1): truncated-Gaussian translation and rotation
                          noise on every action, rotation noise in radians as in habitat-sim
                          (RobustNav's port adds it to degrees, which makes it ~57x smaller).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp

from vcbench.envs.nav import env as nav_env
from vcbench.registry import Registry
from vcbench.envs.nav.env import END, MOVE_AHEAD, ROTATE_LEFT, ROTATE_RIGHT, Motion

FORWARD, TURN = nav_env.FORWARD_STEP, nav_env.TURN_ANGLE
ideal = nav_env.ideal_motion

MotionFn = Callable[[jax.Array, jax.Array, jax.Array], Motion]
DYNAMICS = Registry("dynamics corruption")   # name -> MotionFn
register, get = DYNAMICS.register, DYNAMICS.get


def _sign(key) -> jax.Array:
  return jnp.where(jax.random.bernoulli(key), 1.0, -1.0)


def _scaled(motion: Motion, action, move: jax.Array, turn: jax.Array) -> Motion:
  """`motion` with the move's length and the turns' magnitude replaced."""
  action = jnp.asarray(action, jnp.int32)
  forward = jnp.where(action == MOVE_AHEAD, move, motion.forward)
  return motion.replace(forward=forward, turn=jnp.sign(motion.turn) * turn)


@register("motion_bias_constant")
def motion_bias_constant(key_episode, key_step, action) -> Motion:
  del key_step
  k_mode, k_move, k_turn = jax.random.split(key_episode, 3)
  slip = _sign(k_mode)       # +1: low friction (overshoots), -1: high friction
  move = FORWARD + slip * jax.random.choice(k_move, jnp.array([0.05, 0.10, 0.15]))
  turn = TURN + slip * jnp.deg2rad(jax.random.choice(k_turn, jnp.array([5.0, 10.0, 15.0])))
  return _scaled(ideal(action), action, move, turn)


@register("motion_bias_stochastic")
def motion_bias_stochastic(key_episode, key_step, action) -> Motion:
  del key_episode
  k_move, k_turn = jax.random.split(key_step)
  move = FORWARD + 0.1 * jax.random.normal(k_move)
  turn = TURN + math.radians(10.0) * jax.random.normal(k_turn)
  return _scaled(ideal(action), action, move, turn)


@register("motion_drift")
def motion_drift(key_episode, key_step, action, degrees: float = 10.0) -> Motion:
  del key_step
  side = _sign(key_episode)
  m = ideal(action)
  angle = math.radians(degrees)
  return m.replace(forward=m.forward * math.cos(angle), lateral=side * m.forward * math.sin(angle))


@register("motor_failure")
def motor_failure(key_episode, key_step, action) -> Motion:
  del key_step
  failed = jnp.where(jax.random.bernoulli(key_episode), ROTATE_LEFT, ROTATE_RIGHT)
  m = ideal(action)
  return m.replace(turn=jnp.where(jnp.asarray(action) == failed, 0.0, m.turn))


# habitat-sim pyrobot_noisy_controls, robot "LoCoBot": controller -> (linear motion, rotational
# motion), each (translation mean [2], variance [2]; rotation mean [1], variance [1]).
PYROBOT_LOCOBOT = {
    "ILQR": ((((0.014, 0.009), (0.006, 0.005)), ((0.008,), (0.004,))),
             (((0.003, 0.003), (0.002, 0.003)), ((0.023,), (0.012,)))),
    "Proportional": ((((0.017, 0.042), (0.007, 0.023)), ((0.031,), (0.026,))),
                     (((0.001, 0.005), (0.001, 0.004)), ((0.043,), (0.017,)))),
    "Movebase": ((((0.074, 0.036), (0.019, 0.033)), ((0.189,), (0.038,))),
                 (((0.002, 0.003), (0.0, 0.002)), ((0.219,), (0.019,)))),
}


def _truncated(key, mean, variance, low=None) -> jax.Array:
  """habitat's _TruncatedMultivariateGaussian.sample: each dim within 3 std, and >= `low`."""
  mean, std = jnp.asarray(mean, jnp.float32), jnp.sqrt(jnp.asarray(variance, jnp.float32))
  lower = jnp.full_like(mean, -3.0)
  if low is not None:
    lower = jnp.maximum(lower, (low - mean) / jnp.maximum(std, 1e-12))
  z = jax.random.truncated_normal(key, lower, 3.0, mean.shape)
  return mean + std * z


def pyrobot_motion(key_step, action, controller: str = "ILQR", multiplier: float = 1.0) -> Motion:
  """One action under the PyRobot noise model (habitat-sim `_noisy_action_impl`)."""
  linear, rotational = PYROBOT_LOCOBOT[controller]
  ideal_m = ideal(action)
  is_turn = ideal_m.turn != 0.0
  k_lin, k_rot = jax.random.split(key_step)
  # Translation noise: the linear model for moves (a move never shrinks below 5% of its
  # length), the rotational model for turns; rotation noise likewise (a turn keeps >= 5%).
  lin_move = _truncated(k_lin, *linear[0], low=jnp.array([-0.95 * FORWARD, -jnp.inf]))
  lin_turn = _truncated(k_lin, *rotational[0])
  rot_move = _truncated(k_rot, *linear[1])
  rot_turn = _truncated(k_rot, *rotational[1], low=jnp.array([-0.95 * TURN]))
  trans = multiplier * jnp.where(is_turn, lin_turn, lin_move)
  rot = multiplier * jnp.where(is_turn, rot_turn, rot_move)[0]
  # habitat multiplies by the sign of the intended amount (+ eps): a turn over-rotates in its
  # own direction; a move (amount 0 of rotation) drifts clockwise on average.
  rot_sign = jnp.where(ideal_m.turn < 0, -1.0, 1.0)
  acts = jnp.asarray(action) != END
  return Motion(forward=ideal_m.forward + jnp.where(acts, trans[0], 0.0),
                lateral=jnp.where(acts, trans[1], 0.0),
                turn=ideal_m.turn + jnp.where(acts, rot_sign * rot, 0.0))


@register("pyrobot_noise")
def pyrobot_noise(key_episode, key_step, action) -> Motion:
  del key_episode
  return pyrobot_motion(key_step, action)


@dataclasses.dataclass(frozen=True)
class Dynamics:
  """A registered corruption bound to a seed: the `NavEnv.dynamics` hook (static, hashable)."""
  name: str
  seed: int = 0

  def __post_init__(self):
    get(self.name)

  def motion(self, episode, step, action) -> Motion:
    key_episode = jax.random.fold_in(jax.random.key(self.seed), episode)
    return get(self.name)(key_episode, jax.random.fold_in(key_episode, step), action)


def corrupt(env, name: str, seed: int = 0):
  """`env` (a NavEnv) whose actions move the agent as the corruption `name` says."""
  return env.replace(dynamics=Dynamics(name, seed))
