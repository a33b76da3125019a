"""The exploring teacher: the shortest-path expert once the goal has been seen, frontier
exploration before.

The shortest-path expert (`expert.py`) walks straight to an object or a goal pose it has never
seen; a policy without a map cannot imitate that, so imitation of it teaches ObjectNav and
ImageNav agents little (3% SR). This teacher only uses what a camera and a memory of the
episode could give it: a map of the cells it has seen (cast from its pose over the camera's
field of view, up to `SIGHT` metres, stopped by walls and objects), and the goal once one of
its cells is in that map (ObjectNav: a cell of an instance of the goal category; ImageNav: the
goal pose's cell). Until then it descends the geodesic field to the nearest frontier (a
navigable seen cell next to an unseen free one); after, it is the expert. Its map is the
teacher's own state (`update` it after every env step; it resets itself when a new episode
starts), not the env's. Pure JAX: `vmap` it over a batch.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from vcbench.envs.core import EnvState
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import episodes as ep
from vcbench.envs.nav import expert
from vcbench.envs.nav import geodesic
from vcbench.envs.nav.scene import CELL

SIGHT = 3.0      # metres: a 0.9 m object spans ~8 of 64 columns there (79 degree FOV)
RAYS = 33        # across the field of view
_SAMPLES = jnp.arange(int(SIGHT / (CELL / 2))) * (CELL / 2) + CELL / 4   # along a ray, metres


def empty(env: nav_env.NavEnv) -> jax.Array:
  """A map with nothing seen: bool [G, G]."""
  g = env.scenes.wall.shape[-1]
  return jnp.zeros((g, g), bool)


def visible_cells(scene, pos, heading, hfov_degrees: float) -> tuple[jax.Array, jax.Array]:
  """(cells int32 [RAYS * S, 2], visible bool [RAYS * S]): the ray samples from `pos` over the
  field of view and whether each is in sight (no wall or object cell before it on its ray)."""
  half = jnp.deg2rad(hfov_degrees) / 2
  angles = heading + jnp.linspace(-half, half, RAYS)
  dirs = jnp.stack([jnp.cos(angles), jnp.sin(angles)], -1)
  points = pos + _SAMPLES[None, :, None] * dirs[:, None, :]        # [RAYS, S, 2]
  g = scene.wall.shape[-1]
  cells = jnp.clip(geodesic.point_cell(points), 0, g - 1)
  solid = (scene.wall[cells[..., 0], cells[..., 1]] > 0) | (
      scene.obj_inst[cells[..., 0], cells[..., 1]] >= 0)
  # A solid cell is seen itself, but hides what lies behind it.
  blocked_before = jnp.cumsum(solid, axis=1) - solid > 0
  return cells.reshape(-1, 2), ~blocked_before.reshape(-1)


def update(env: nav_env.NavEnv, sim, seen: jax.Array) -> jax.Array:
  """The map after the observation at `sim`'s pose (cleared first when the episode starts)."""
  seen = jnp.where(sim.steps == 0, False, seen)
  scene = env.scene(env.episode(sim).scene)
  cells, visible = visible_cells(scene, sim.pos, sim.heading, env.camera.hfov)
  return seen.at[cells[:, 0], cells[:, 1]].max(visible)


def goal_seen(env: nav_env.NavEnv, sim, seen: jax.Array) -> jax.Array:
  """Whether the map holds the goal (always, for PointNav: its goal is given)."""
  e = env.episode(sim)
  if env.task == "objectnav":
    return jnp.any(seen & ep.category_mask(env.scene(e.scene), e.category))
  if env.task == "imagenav":
    rc = geodesic.point_cell(e.goal)
    return seen[rc[0], rc[1]]
  return jnp.ones((), bool)


def frontier(scene, seen: jax.Array) -> jax.Array:
  """bool [G, G]: navigable seen cells with an unseen free cell among their 4 neighbours."""
  free_unseen = ~seen & (scene.wall == 0) & (scene.obj_inst < 0)
  near = jnp.zeros_like(seen)
  for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
    near = near | geodesic.shift(free_unseen, dy, dx, False)
  return scene.navigable & seen & near


def action(env: nav_env.NavEnv, state: EnvState, seen: jax.Array) -> jax.Array:
  """The teacher's action (int32) for one env state and its map of the episode so far."""
  sim = state.sim
  scene = env.scene(env.episode(sim).scene)
  todo = frontier(scene, seen)
  field = geodesic.field(scene.navigable, jnp.where(todo, 0.0, geodesic.UNREACHABLE))
  explore = expert.toward(env, sim, field)
  reachable = geodesic.distance_at(field, scene.navigable, sim.pos) < geodesic.UNREACHABLE
  # With nothing left to explore (or none of it reachable) it falls back on the expert.
  known = goal_seen(env, sim, seen) | ~reachable
  return jnp.where(known, expert.action(env, state), explore).astype(jnp.int32)


@struct.dataclass
class MapSim:
  """The sim of a `WithMap` env: the NavSim and the teacher's map of the episode so far."""
  nav: Any
  seen: jax.Array


@struct.dataclass
class WithMap:
  """`env` whose states also carry the exploring teacher's map (`state.sim` is a `MapSim`), so
  that a learner can ask `label` for the teacher's action; anything else is `env`'s."""
  env: nav_env.NavEnv

  def __getattr__(self, name):
    if name == "env":   # not set yet (while the dataclass is being built or unpickled)
      raise AttributeError(name)
    return getattr(self.env, name)

  def reset(self, key: jax.Array) -> EnvState:
    return self._mapped(self.env.reset(key), empty(self.env))

  def reset_to(self, index, key=None) -> EnvState:
    return self._mapped(self.env.reset_to(index, key), empty(self.env))

  def step(self, state: EnvState, action: jax.Array) -> EnvState:
    return self._mapped(self.env.step(unmapped(state), action), state.sim.seen)

  def _mapped(self, state: EnvState, seen: jax.Array) -> EnvState:
    return state.replace(sim=MapSim(state.sim, update(self.env, state.sim, seen)))

  def label(self, state: EnvState) -> jax.Array:
    """The teacher's action for one state of this env."""
    return action(self.env, unmapped(state), state.sim.seen)


def unmapped(state: EnvState) -> EnvState:
  """A `WithMap` state as its inner env's."""
  return state.replace(sim=state.sim.nav)
