"""vcbench-nav: a pure-JAX indoor navigation simulator (PointNav, ObjectNav, ImageNav).

habitat-sim and AI2-THOR do not install on these machines; vcbench-nav runs their navigation
protocols (CortexBench ImageNav/ObjectNav, RobustNav PointNav/ObjectNav) in procedural
apartments, rendered by a grid ray caster, all inside jit. Layout:
  scene.py     the scene format (grids of walls, floors, rooms, objects)
  scenes.py    procedural apartments from seeds; train/val/test scene splits
  furniture.py furniture placement (plausible rooms, reachable, not in doorways)
  textures.py  the material atlas (bundled photographs and procedural textures)
  sprites.py   object sprites: a cut-out shape per category, with variants
  render.py    RGB / depth / semantics ray caster
  geodesic.py  shortest-path fields on the navigable grid
  tasks.py     goals, success rules, step limits, difficulty bins
  episodes.py  seeded episode sets with their geodesic fields
  env.py       the agent and the functional env
  expert.py    the shortest-path expert (ObjectNav imitation)
  viewpoints.py  viewpoint graphs and their panoramas (vision-language navigation)
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from vcbench.envs.nav import episodes as ep
from vcbench.envs.nav import render as rd
from vcbench.envs.nav import scenes as scene_gen
from vcbench.envs.nav import tasks as tk
from vcbench.envs.nav import textures
from vcbench.envs.nav.env import ACTIONS, NavEnv

_SPLIT_EPISODE_SEED = {"train": 0, "val": 1, "test": 2}


def make(task: str, split: str = "train", *, num_scenes: int = 100, num_episodes: int = 1000,
         grid_size: int = 32, height: int = 64, width: int = 64, hfov: float = 79.0,
         sensors: tuple[str, ...] = ("rgb", "depth"), balanced: bool | None = None,
         auto_reset: bool | None = None, max_steps: int = 0, seed: int = 0,
         texture_size: int = 64, objects: str = "sprites", odometry: bool = False) -> NavEnv:
  """A NavEnv over `num_scenes` apartments of `split` and `num_episodes` episodes.

  balanced: episodes spread evenly over RobustNav's difficulty bins (default: for val/test).
  auto_reset: start a new episode inside `step` when one ends (default: for train).
  max_steps: 0 = the task's limit (300 PointNav, 500 otherwise).
  seed: offsets the episode seed (scenes come from the split's own seeds).
  objects: 'sprites' (each object a cut-out of its category, `sprites.py`) or 'boxes'.
  odometry: also observe 'odometry' (habitat's GPS + compass sensors: the pose relative to the
    episode's start, `env.odometry`), which ObjectNav / ImageNav agents need to remember where
    they have searched.
  """
  t = tk.get(task)
  bad = set(sensors) - set(rd.SENSORS)
  if bad or not sensors:
    raise ValueError(f"nav.make: sensors must be a non-empty subset of {rd.SENSORS}, got "
                     f"{tuple(sensors)}.")
  if split not in _SPLIT_EPISODE_SEED:
    raise ValueError(f"nav.make: unknown split {split!r}; valid splits: "
                     f"{sorted(_SPLIT_EPISODE_SEED)}.")
  camera = rd.Camera(height=height, width=width, hfov=hfov)
  scenes = scene_pool(split, num_scenes, grid_size, objects)
  balanced = split != "train" if balanced is None else balanced
  episodes = ep.generate(scenes, task, num_episodes,
                         seed=1000 * seed + _SPLIT_EPISODE_SEED[split], balanced=balanced)
  atlas = jnp.asarray(textures.atlas(texture_size))
  scenes = jax.tree.map(jnp.asarray, scenes)
  episodes = jax.tree.map(jnp.asarray, episodes)
  goal_images = (goal_views(scenes, episodes, atlas, camera) if task == "imagenav"
                 else jnp.zeros((len(episodes), 0, 0, 3), jnp.uint8))
  return NavEnv(scenes=scenes, episodes=episodes, atlas=atlas, goal_images=goal_images,
                task=task, camera=camera, sensors=tuple(sensors),
                max_steps=max_steps or t.max_steps,
                auto_reset=split == "train" if auto_reset is None else auto_reset,
                odometry=odometry)


@functools.lru_cache(maxsize=8)
def _scene_pool_cached(split: str, num: int, grid_size: int, objects: str):
  return scene_gen.scene_pool(split, num, grid_size, objects)


def scene_pool(split: str, num: int, grid_size: int = 32, objects: str = "sprites"):
  """The first `num` apartments of `split` (cached: several envs share one pool)."""
  return _scene_pool_cached(split, int(num), int(grid_size), objects)


def goal_views(scenes, episodes, atlas, camera: rd.Camera, batch: int = 256) -> jax.Array:
  """ImageNav goal images: the RGB view at each episode's goal pose."""
  @jax.jit
  def views(idx):
    def one(i):
      s = jax.tree.map(lambda a: a[episodes.scene[i]], scenes)
      return rd.render(s, atlas, episodes.goal[i], episodes.goal_heading[i], camera, ("rgb",))["rgb"]
    return jax.vmap(one)(idx)
  n = len(episodes)
  out = [views(jnp.arange(i, i + batch) % n) for i in range(0, n, batch)]
  return jnp.concatenate(out)[:n]


__all__ = ["make", "NavEnv", "ACTIONS", "scene_pool", "goal_views"]
