"""The shortest-path expert: greedy descent of the episode's geodesic field.

For each of the 12 headings the agent can face (30-degree steps from its current one) the
expert looks at the geodesic distance one forward step would reach; it turns toward the best
heading the short way round and moves when it already faces it, and calls END as soon as the
task's success rule holds. ObjectNav's rule also needs the goal in view: at a viewpoint
(within range with a line of sight, `episodes.category_source`) but not seeing it, the expert
turns until it does. Pure JAX: `vmap` it over a batch of env states.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from vcbench.envs.core import EnvState
from vcbench.envs.nav import geodesic
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import tasks
from vcbench.envs.nav.scene import CELL

_TURNS = jnp.arange(-5, 7)        # multiples of TURN_ANGLE: left 5 .. right 6


def toward(env: nav_env.NavEnv, sim, dist_field: jax.Array) -> jax.Array:
  """The move (int32) that descends `dist_field` (a `geodesic.field` of the sim's scene) from
  the sim's pose: turn toward the best of the 12 headings, move when facing it."""
  scene = env.scene(env.episode(sim).scene)
  headings = sim.heading + _TURNS * nav_env.TURN_ANGLE
  targets = sim.pos + nav_env.FORWARD_STEP * jnp.stack([jnp.cos(headings), jnp.sin(headings)], -1)
  dist = jax.vmap(lambda xy: geodesic.distance_at(dist_field, scene.navigable, xy))(targets)
  blocked = jax.vmap(lambda xy: nav_env.collides(scene, xy))(targets)
  dist = jnp.where(blocked, geodesic.UNREACHABLE, dist)
  # Prefer fewer turns among near-equal options, so the expert does not dither.
  cost = dist + 1e-3 * jnp.abs(_TURNS)
  best = _TURNS[jnp.argmin(cost)]
  return jnp.where(best == 0, nav_env.MOVE_AHEAD,
                   jnp.where(best < 0, nav_env.ROTATE_LEFT, nav_env.ROTATE_RIGHT))


def action(env: nav_env.NavEnv, state: EnvState) -> jax.Array:
  """The expert's action (int32) for one env state."""
  sim = state.sim
  move = toward(env, sim, env.episode(sim).field)
  near = env.near_goal(sim)
  if tasks.get(env.task).needs_visible:
    # Within range (a straight line, maybe through a wall) is not enough: at a viewpoint (the
    # field's zero set: range and line of sight) it turns until the goal is in view.
    at_viewpoint = near & (sim.distance < CELL)
    move = jnp.where(at_viewpoint & ~sim.goal_visible, nav_env.ROTATE_RIGHT, move)
    near = near & sim.goal_visible
  return jnp.where(near, nav_env.END, move).astype(jnp.int32)
