"""Episode sets of vcbench-nav, generated from seeds (host side, fields computed in JAX).

An episode is a scene index, a start pose and a goal, plus the goal's geodesic field on that
scene (float32 [G, G], metres to the nearest way of succeeding) so that the env reads distances
with a gather instead of solving shortest paths per step, as habitat's episode datasets carry
their geodesic distances. Episodes are drawn by rejection: a candidate whose goal is
unreachable from the start, or whose distance falls outside the wanted difficulty bin, is never
kept. With `balanced=True` every RobustNav difficulty bin gets an equal share (evaluation sets);
training sets take whatever distance comes.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vcbench.envs.nav import geodesic
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import tasks as tk


@struct.dataclass
class Episodes:
  """N episodes (leading axis).

  scene: int32 [N] index into the env's scene pool.
  start: float32 [N, 2] metres; start_heading: float32 [N] radians.
  goal: float32 [N, 2] the point goal / ImageNav goal position (ObjectNav: the centre of the
    goal-category instance nearest the start in a straight line, for display only);
    goal_heading: float32 [N] (ImageNav).
  category: int32 [N] ObjectNav goal category (1..6), 0 for the other tasks.
  distance: float32 [N] geodesic start-to-goal distance in metres (SPL's shortest path).
  difficulty: int32 [N] RobustNav difficulty bin (0 easy, 1 medium, 2 hard).
  field: float32 [N, G, G] geodesic distance to the goal from every cell.
  """
  scene: jax.Array
  start: jax.Array
  start_heading: jax.Array
  goal: jax.Array
  goal_heading: jax.Array
  category: jax.Array
  distance: jax.Array
  difficulty: jax.Array
  field: jax.Array

  def __len__(self) -> int:
    return int(self.scene.shape[0])


def category_mask(scene: sc.Scene, category) -> jax.Array:
  """bool [G, G]: cells occupied by an instance of `category`."""
  inst = scene.obj_inst
  return (inst >= 0) & (scene.inst_cat[jnp.maximum(inst, 0)] == category)


# What ObjectNav's goal cells are (`category_source`); results of another definition differ.
VIEWPOINTS = "within success distance, line of sight"


def category_source(scene: sc.Scene, category, radius: float) -> jax.Array:
  """`geodesic.field` source for ObjectNav: 0 at the goal's viewpoints, the cells whose centre
  lies within `radius` metres of a cell of an instance of `category` with no wall or other
  object's cell on the straight line between them (a dilation by shifted copies of the mask).
  Without the line of sight, a cell behind a wall within 1 m of the object counted as arrived:
  the shortest-path expert stopped there and turned in place until the step limit (23% of val
  episodes)."""
  mask = category_mask(scene, category)
  wall = (scene.wall > 0) | ((scene.obj_inst >= 0) & ~mask)
  reach = int(np.ceil(radius / sc.CELL + 0.5))
  near = jnp.zeros_like(mask)
  for dy in range(-reach, reach + 1):
    for dx in range(-reach, reach + 1):
      gap = np.hypot(max(abs(dy) - 0.5, 0.0), max(abs(dx) - 0.5, 0.0)) * sc.CELL
      if gap <= radius:
        sees = geodesic.shift(mask, dy, dx, False)
        for oy, ox in _cells_between(dy, dx):
          sees = sees & ~geodesic.shift(wall, oy, ox, True)
        near = near | sees
  return jnp.where(near, 0.0, geodesic.UNREACHABLE)


def _cells_between(dy: int, dx: int) -> set[tuple[int, int]]:
  """Offsets of the cells the segment from a cell's centre to the centre of the cell at
  (dy, dx) crosses, both ends excluded (sampled finely enough not to skip one)."""
  n = 8 * max(abs(dy), abs(dx), 1)
  out = set()
  for t in (np.arange(1, n) / n):
    cell = (int(np.floor(dy * t + 0.5)), int(np.floor(dx * t + 0.5)))
    if cell not in ((0, 0), (dy, dx)):
      out.add(cell)
  return out


def point_category_distance(scene: sc.Scene, category, xy: jax.Array) -> jax.Array:
  """Straight-line distance (metres) from point `xy` to the nearest instance cell of
  `category` (inf when the scene has none)."""
  g = scene.grid_size
  lo = jnp.arange(g, dtype=jnp.float32) * sc.CELL
  gap = lambda p: jnp.maximum(jnp.maximum(lo - p, p - (lo + sc.CELL)), 0.0)
  d = jnp.sqrt(gap(xy[1])[:, None] ** 2 + gap(xy[0])[None, :] ** 2)
  return jnp.min(jnp.where(category_mask(scene, category), d, jnp.inf))


@functools.partial(jax.jit, static_argnames=("task",))
def _candidate_fields(scenes: sc.Scene, task: str, scene_idx, goal_xy, category):
  def one(i, xy, cat):
    s = jax.tree.map(lambda a: a[i], scenes)
    if task == "objectnav":
      src = category_source(s, cat, tk.get(task).success_distance)
    else:
      src = geodesic.point_source(s.navigable, xy)
    return geodesic.field(s.navigable, src)
  return jax.vmap(one)(scene_idx, goal_xy, category)


def _navigable_cells(scenes: sc.Scene) -> list[np.ndarray]:
  nav = np.asarray(scenes.navigable)
  return [np.argwhere(n) for n in nav]


def _categories_present(scenes: sc.Scene) -> list[np.ndarray]:
  inst_cat = np.asarray(scenes.inst_cat)
  return [np.unique(c[c > 0]) for c in inst_cat]


def generate(scenes: sc.Scene, task: str, num: int, seed: int, *, balanced: bool = False,
             batch: int = 256, max_batches: int = 200) -> Episodes:
  """`num` episodes of `task` on the scene pool `scenes` (stacked, numpy or jax), from `seed`.

  Raises:
    ValueError: unknown task, num < 1, or the scenes cannot supply enough solvable episodes
      (e.g. no instance of any category reachable, or a difficulty bin that the apartments
      are too small to fill), naming the bin and how many were found.
  """
  t = tk.get(task)
  if num < 1:
    raise ValueError(f"episodes.generate: num must be >= 1, got {num}.")
  scenes = jax.tree.map(np.asarray, scenes)
  n_scenes = scenes.wall.shape[0]
  cells = _navigable_cells(scenes)
  cats = _categories_present(scenes)
  for i, c in enumerate(cells):
    if len(c) < 2:
      raise ValueError(f"episodes.generate: scene {i} of the pool has {len(c)} navigable "
                       "cells; it cannot hold an episode.")
  n_bins = len(t.bins)
  want = np.full(n_bins, -1) if not balanced else np.diff(np.linspace(0, num, n_bins + 1).round())
  kept: list[dict] = []
  counts = np.zeros(n_bins, int)
  rng = np.random.default_rng([seed, list(tk.TASKS).index(task)])
  for _ in range(max_batches):
    cand = _draw_candidates(rng, t, cells, cats, np.asarray(scenes.obj_inst),
                            np.asarray(scenes.inst_cat), n_scenes, batch)
    fields = np.asarray(_candidate_fields(scenes, task, cand["scene"], cand["goal"],
                                          cand["category"]))
    rc = np.floor(cand["start"][:, ::-1] / sc.CELL).astype(int)
    dist = fields[np.arange(batch), rc[:, 0], rc[:, 1]]
    bins = tk.bin_index(t, dist)
    for j in np.flatnonzero((dist < geodesic.UNREACHABLE) & (bins >= 0)):
      b = bins[j]
      if balanced and counts[b] >= want[b]:
        continue
      counts[b] += 1
      kept.append({k: v[j] for k, v in cand.items()} | {"distance": dist[j], "difficulty": b,
                                                       "field": fields[j]})
      if len(kept) == num:
        return _stack(kept)
  found = ", ".join(f"{name}: {c}" for (name, _, _), c in zip(t.bins, counts))
  raise ValueError(
      f"episodes.generate: could only find {len(kept)} of {num} solvable {task} episodes "
      f"({'balanced over bins; ' if balanced else ''}found {found}) in {n_scenes} scenes after "
      f"{max_batches * batch} candidates; use more or larger scenes, or fewer episodes.")


def _nearest_instance_cell(obj_inst, inst_cat, category, rc) -> np.ndarray:
  """(row, col) of the centre cell of the `category` instance nearest to cell `rc`."""
  best, best_d = np.asarray(rc), np.inf
  for i in np.flatnonzero(inst_cat == category):
    cells = np.argwhere(obj_inst == i)
    centre = cells[np.argmin(np.abs(cells - cells.mean(0)).sum(1))]
    d = np.hypot(*(centre - rc))
    if d < best_d:
      best, best_d = centre, d
  return best


def _draw_candidates(rng, t: tk.Task, cells, cats, scenes_inst, scenes_cat, n_scenes,
                     batch) -> dict[str, np.ndarray]:
  scene = rng.integers(0, n_scenes, batch)
  start = np.stack([cells[s][rng.integers(len(cells[s]))] for s in scene])
  goal = np.stack([cells[s][rng.integers(len(cells[s]))] for s in scene])
  category = np.zeros(batch, np.int32)
  if t.name == "objectnav":
    category = np.array([rng.choice(cats[s]) if len(cats[s]) else 0 for s in scene], np.int32)
    goal = np.stack([_nearest_instance_cell(scenes_inst[s], scenes_cat[s], c, rc)
                     for s, c, rc in zip(scene, category, start)])
  to_xy = lambda rc: ((rc[:, ::-1] + 0.5) * sc.CELL).astype(np.float32)
  return dict(scene=scene.astype(np.int32), start=to_xy(start),
              start_heading=rng.uniform(-np.pi, np.pi, batch).astype(np.float32),
              goal=to_xy(goal), goal_heading=rng.uniform(-np.pi, np.pi, batch).astype(np.float32),
              category=category)


def _stack(kept):
  keys = ("scene", "start", "start_heading", "goal", "goal_heading", "category", "distance",
          "difficulty", "field")
  arrays = {k: np.stack([e[k] for e in kept]) for k in keys}
  arrays["distance"] = arrays["distance"].astype(np.float32)
  arrays["difficulty"] = arrays["difficulty"].astype(np.int32)
  arrays["field"] = arrays["field"].astype(np.float32)
  return Episodes(**arrays)
