"""A tiny pure-JAX "go to the goal" grid task with the vcbench-nav env interface.

The agent and the goal sit on a G x G grid; actions 0-3 move up, down, left, right (walls
clip). Reaching the goal is a success and ends the episode; so does the step limit.
Observations: 'rgb' uint8 [8, 8, 3] (the grid drawn one pixel per cell inside a border: agent
red, goal green) and 'gps_compass' float32 [2] (goal minus agent, over G). Reward: +1 on
success, +0.1 per cell of distance gained, -0.01 per step. Episodes (start and goal cells) are
drawn from the key carried in the state, and `step` auto-resets, so PPO learns it in seconds.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from vcbench.envs.core import EnvState

MOVES = jnp.array([[-1, 0], [1, 0], [0, -1], [0, 1]], jnp.int32)   # up, down, left, right


@struct.dataclass
class ToyNavEnv:
  """Data fields are pytree leaves (the env is a jit argument); sizes are static."""
  palette: jax.Array   # uint8 [4, 3]: border, floor, agent, goal colours.
  grid_size: int = struct.field(pytree_node=False, default=6)
  max_steps: int = struct.field(pytree_node=False, default=16)
  img_size: int = struct.field(pytree_node=False, default=8)

  @property
  def num_actions(self) -> int:
    return 4

  def observation_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    s = self.img_size
    return {"rgb": jax.ShapeDtypeStruct((s, s, 3), jnp.uint8),
            "gps_compass": jax.ShapeDtypeStruct((2,), jnp.float32)}

  def reset(self, key: jax.Array) -> EnvState:
    sim = self._new_episode(key)
    zero = jnp.zeros((), jnp.float32)
    metrics = {"success": zero, "spl": zero, "episode_return": zero, "episode_length": zero}
    return EnvState(obs=self._observe(sim), reward=zero, done=jnp.zeros((), bool),
                    metrics=metrics, handle=jnp.zeros((), jnp.int32), sim=sim)

  def step(self, state: EnvState, action: jax.Array) -> EnvState:
    sim = state.sim
    agent = jnp.clip(sim["agent"] + MOVES[action], 0, self.grid_size - 1)
    before, after = _distance(sim["agent"], sim["goal"]), _distance(agent, sim["goal"])
    success = jnp.all(agent == sim["goal"])
    reward = 1.0 * success + 0.1 * (before - after) - 0.01
    steps = sim["steps"] + 1
    path = sim["path"] + jnp.any(agent != sim["agent"]).astype(jnp.float32)
    ret = sim["return"] + reward
    done = success | (steps >= self.max_steps)
    spl = success * sim["shortest"] / jnp.maximum(path, sim["shortest"])
    metrics = {"success": success.astype(jnp.float32), "spl": spl, "episode_return": ret,
               "episode_length": steps.astype(jnp.float32)}
    moved = {**sim, "agent": agent, "steps": steps, "path": path, "return": ret}
    # Auto-reset: a finished episode is replaced by a new one drawn from the carried key.
    fresh = self._new_episode(sim["key"])
    sim = jax.tree.map(lambda f, m: jnp.where(done, f, m), fresh, moved)
    return EnvState(obs=self._observe(sim), reward=reward.astype(jnp.float32), done=done,
                    metrics=metrics, handle=state.handle, sim=sim)

  def _new_episode(self, key):
    key, k_agent, k_offset = jax.random.split(key, 3)
    cells = self.grid_size ** 2
    a = jax.random.randint(k_agent, (), 0, cells)
    g = (a + jax.random.randint(k_offset, (), 1, cells)) % cells   # never the start cell.
    agent = jnp.stack([a // self.grid_size, a % self.grid_size]).astype(jnp.int32)
    goal = jnp.stack([g // self.grid_size, g % self.grid_size]).astype(jnp.int32)
    zero = jnp.zeros((), jnp.float32)
    return {"key": key, "agent": agent, "goal": goal, "steps": jnp.zeros((), jnp.int32),
            "path": zero, "return": zero,
            "shortest": _distance(agent, goal).astype(jnp.float32)}

  def _observe(self, sim):
    s, g = self.img_size, self.grid_size
    rows, cols = jnp.arange(s)[:, None] - 1, jnp.arange(s)[None, :] - 1
    inside = (rows >= 0) & (rows < g) & (cols >= 0) & (cols < g)
    at = lambda p: (rows == p[0]) & (cols == p[1])
    index = jnp.where(at(sim["agent"]), 2, jnp.where(at(sim["goal"]), 3, inside.astype(jnp.int32)))
    rgb = self.palette[index]
    gps = (sim["goal"] - sim["agent"]).astype(jnp.float32) / g
    return {"rgb": rgb, "gps_compass": gps}


def _distance(a, b):
  return jnp.sum(jnp.abs(a - b))


def make_env(grid_size: int = 6, max_steps: int = 16) -> ToyNavEnv:
  palette = jnp.array([[40, 40, 40], [200, 200, 200], [255, 0, 0], [0, 255, 0]], jnp.uint8)
  return ToyNavEnv(palette=palette, grid_size=grid_size, max_steps=max_steps,
                   img_size=max(8, grid_size + 2))
