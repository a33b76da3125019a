"""Procedural apartments for vcbench-nav (host side, numpy, deterministic from a seed).

`generate(seed)` draws one apartment in the `Scene` format of `scene.py`: a rectangular
footprint (outside it, and on the border, all wall); a BSP split into 3..MAX_ROOMS rooms with
one-cell walls, sometimes around a corridor; 1 m doors along a random spanning tree of the room
adjacency graph (plus maybe one more); room types by size (living largest, bathroom smallest);
wall and floor materials by type; furniture of the six ObjectNav categories in plausible rooms
(placed by `furniture.py`), each placement kept only if the navigable cells stay one 4-connected
component, every room stays navigable and every object keeps a navigable cell within
REACH_DISTANCE. A failed attempt is retried from the next sub-seed of the seed's SeedSequence, so
a scene is a function of its seed.
"""
from __future__ import annotations

import jax
import numpy as np
from scipy import ndimage

from vcbench.envs.nav import sprites, textures
from vcbench.envs.nav.furniture import _T, _accepts, _furnish, _Layout
# Re-exported: callers read the furniture rules and grid helpers through the generator.
from vcbench.envs.nav.furniture import (  # noqa: F401
    CATEGORY_ROOMS, MAX_INSTANCES, MIN_INSTANCES, MIN_ROOM_NAV, REACH_DISTANCE, largest_component,
    navigable_cells, reach_mask)
from vcbench.envs.nav.scene import CELL, MAX_OBJECTS, MAX_ROOMS, Scene, footprints

OBJECT_STYLES = ("sprites", "boxes")

MIN_GRID, MAX_GRID = 16, 128
DOOR_WIDTH = 4            # cells (1 m).
MIN_ROOM_SIDE = 6         # cells of free floor (1.5 m) along each side of a room.
CORRIDOR_WIDTHS = (5, 6)  # cells of free floor across a corridor.
MIN_NAV_FRACTION = 0.25   # of the apartment's free (non-wall) cells.
MAX_ATTEMPTS = 32

SPLIT_SIZE = 100_000
SPLITS = {"train": 0, "val": SPLIT_SIZE, "test": 2 * SPLIT_SIZE}  # disjoint seed ranges.


class _Failed(Exception):
  """One generation attempt failed; the message says why (reported if every attempt fails)."""


# ---------------------------------------------------------------------------------------------
# Rooms: footprint, BSP, corridor.

def _side(rect, axis):
  return rect[axis + 2] - rect[axis]


def _cut(rect, axis, at):
  """Split a rect by a one-cell wall at index `at` along `axis`: the two sides."""
  lo, hi = list(rect), list(rect)
  lo[axis + 2], hi[axis] = at, at + 1
  return tuple(lo), tuple(hi)


def _footprint(rng, g):
  """The apartment's free interior rect (r0, c0, r1, c1); the ring around it is its outer wall."""
  inner = g - 2
  lo = max(2 * MIN_ROOM_SIDE + 1, int(round(0.72 * inner)))
  h, w = rng.integers(lo, inner + 1, size=2)
  r0, c0 = 1 + rng.integers(0, inner - h + 1), 1 + rng.integers(0, inner - w + 1)
  return (int(r0), int(c0), int(r0 + h), int(c0 + w))


def _corridor_leaves(rng, rect):
  """A corridor along the long axis, rooms on one or both sides, maybe a room across its end."""
  long_axis = int(_side(rect, 1) >= _side(rect, 0))
  short_axis = 1 - long_axis
  leaves = []
  end_len = int(rng.integers(MIN_ROOM_SIDE + 2, MIN_ROOM_SIDE + 6))
  if rng.random() < 0.5 and _side(rect, long_axis) - end_len - 1 >= 2 * MIN_ROOM_SIDE + 1:
    rect, end = _cut(rect, long_axis, rect[long_axis + 2] - end_len - 1)
    leaves.append(dict(rect=end, axes=(0, 1), corridor=False))
  width = int(rng.choice(CORRIDOR_WIDTHS))
  span = _side(rect, short_axis)
  two_sided = span >= 2 * MIN_ROOM_SIDE + width + 2
  if two_sided:
    start = rect[short_axis] + int(rng.integers(MIN_ROOM_SIDE + 1, span - MIN_ROOM_SIDE - width))
    side_a, rest = _cut(rect, short_axis, start - 1)
    corridor, side_b = _cut(rest, short_axis, start + width)
    sides = (side_a, side_b)
  elif rng.random() < 0.5:
    corridor, side = _cut(rect, short_axis, rect[short_axis] + width)
    sides = (side,)
  else:
    side, corridor = _cut(rect, short_axis, rect[short_axis + 2] - width - 1)
    sides = (side,)
  leaves.append(dict(rect=corridor, axes=(), corridor=True))
  # Rooms along the corridor split across it, so each keeps a wall on the corridor.
  leaves += [dict(rect=s, axes=(long_axis,), corridor=False) for s in sides]
  return leaves


def _bsp(rng, rect, target, corridor):
  """Leaves (dicts: rect, axes, corridor) of a BSP of `rect` into about `target` rooms."""
  leaves = _corridor_leaves(rng, rect) if corridor else [dict(rect=rect, axes=(0, 1),
                                                              corridor=False)]
  while len(leaves) < target:
    options = [(i, a) for i, leaf in enumerate(leaves) for a in leaf["axes"]
               if _side(leaf["rect"], a) >= 2 * MIN_ROOM_SIDE + 1]
    if not options:
      break
    area = np.array([_side(leaves[i]["rect"], 0) * _side(leaves[i]["rect"], 1)
                     for i, _ in options], float)
    # Split big rooms first, mostly across their longer side.
    weight = area ** 2 * np.array([1.0 + 3.0 * (_side(leaves[i]["rect"], a) >=
                                                 _side(leaves[i]["rect"], 1 - a))
                                   for i, a in options])
    i, axis = options[rng.choice(len(options), p=weight / weight.sum())]
    leaf = leaves.pop(i)
    r = leaf["rect"]
    at = int(rng.integers(r[axis] + MIN_ROOM_SIDE, r[axis + 2] - MIN_ROOM_SIDE))
    if len(leaves) == target - 2:  # the last split cuts off a small room (a bathroom).
      small = MIN_ROOM_SIDE + int(rng.integers(0, 3))
      at = min(r[axis] + small, at) if rng.random() < 0.5 else max(r[axis + 2] - small - 1, at)
    leaves += [dict(leaf, rect=part) for part in _cut(r, axis, at)]
  return leaves


def _room_types(rng, leaves):
  """Types by size: corridor as built, largest living, smallest bathroom, then bed/kitchen/..."""
  types = [_T["corridor"] if leaf["corridor"] else -1 for leaf in leaves]
  rooms = sorted((i for i, leaf in enumerate(leaves) if not leaf["corridor"]),
                 key=lambda i: -_side(leaves[i]["rect"], 0) * _side(leaves[i]["rect"], 1))
  if len(rooms) < 3:
    raise _Failed(f"only {len(rooms)} non-corridor rooms")
  middle = [_T["bedroom"], _T["kitchen"]]
  middle += [int(rng.choice([_T["bedroom"], _T["office"]])) for _ in rooms[3:]]
  for i, t in zip(rooms, [_T["living"], *middle[:len(rooms) - 2], _T["bathroom"]]):
    types[i] = t
  return types


# ---------------------------------------------------------------------------------------------
# Doors.

def _shared_wall(a, b):
  """(axis, line, lo, hi) of the wall between two rects if they face each other over >= a door."""
  for axis in (0, 1):  # axis 0: a wall row between rooms stacked in rows.
    if a[axis + 2] + 1 == b[axis] or b[axis + 2] + 1 == a[axis]:
      line = a[axis + 2] if a[axis + 2] + 1 == b[axis] else b[axis + 2]
      other = 1 - axis
      lo, hi = max(a[other], b[other]), min(a[other + 2], b[other + 2])
      if hi - lo >= DOOR_WIDTH:
        return axis, line, lo, hi
  return None


def _door_edges(rng, leaves, types):
  """Room pairs that get a door: a random spanning tree (corridor first, bathrooms as leaves)."""
  n = len(leaves)
  edges = []
  for i in range(n):
    for j in range(i + 1, n):
      wall = _shared_wall(leaves[i]["rect"], leaves[j]["rect"])
      if wall is not None:
        cost = rng.random()
        cost *= 0.3 if _T["corridor"] in (types[i], types[j]) else 1.0
        cost += 1.0 if _T["bathroom"] in (types[i], types[j]) else 0.0
        edges.append((cost, i, j, wall))
  edges.sort(key=lambda e: e[0])
  component = list(range(n))  # Kruskal with plain relabelling: n <= MAX_ROOMS.
  tree, spare = [], []
  for edge in edges:
    ci, cj = component[edge[1]], component[edge[2]]
    if ci != cj:
      component = [ci if c == cj else c for c in component]
      tree.append(edge)
    elif _T["bathroom"] not in (types[edge[1]], types[edge[2]]):
      spare.append(edge)
  if len(tree) != n - 1:
    raise _Failed("rooms not connected by walls wide enough for a door")
  if spare and rng.random() < 0.35:
    tree.append(spare[rng.integers(len(spare))])
  return tree


def _carve_doors(rng, wall, room, edges):
  """Open each door (DOOR_WIDTH wall cells, away from corners when there is room)."""
  doors = np.zeros_like(wall)
  for _, i, _, (axis, line, lo, hi) in edges:
    margin = 1 if hi - lo >= DOOR_WIDTH + 2 else 0
    start = int(rng.integers(lo + margin, hi - margin - DOOR_WIDTH + 1))
    cells = (line, slice(start, start + DOOR_WIDTH)) if axis == 0 else (
        slice(start, start + DOOR_WIDTH), line)
    doors[cells] = True
    room[cells] = i
  wall &= ~doors
  return doors


# ---------------------------------------------------------------------------------------------
# Materials and assembly.

def _wall_owner(rng, room, wall, num_rooms):
  """Room whose paint each wall cell shows: its one neighbour room, or per shared wall a coin."""
  g = room.shape[0]
  padded = np.pad(room, 1, constant_values=-1)
  shifts = ((0, 1), (2, 1), (1, 0), (1, 2), (0, 0), (0, 2), (2, 0), (2, 2))  # 4-nbrs first.
  nbrs = np.stack([padded[dy:dy + g, dx:dx + g] for dy, dx in shifts])
  first = nbrs[np.argmax(nbrs >= 0, axis=0), np.arange(g)[:, None], np.arange(g)[None, :]]
  side = nbrs[:4]
  other = np.where((side >= 0) & (side != first), side, -1).max(axis=0)
  coin = rng.random((num_rooms, num_rooms)) < 0.5
  coin = np.triu(coin, 1) | np.tril(~coin.T, -1)  # owner[a, b] == a iff owner[b, a] == b.
  pair_owner = np.where(coin, np.arange(num_rooms)[:, None], np.arange(num_rooms)[None, :])
  owner = np.where(other >= 0, pair_owner[np.maximum(first, 0), np.maximum(other, 0)], first)
  return np.where(wall, owner, room)


def _attempt(rng, g: int, objects: str) -> Scene:
  """One try at an apartment; raises _Failed with the reason."""
  rect = _footprint(rng, g)
  area = _side(rect, 0) * _side(rect, 1)
  most = int(np.clip(area // 110, 3, MAX_ROOMS))
  target = int(rng.integers(min(4, most), most + 1))
  corridor = target >= 4 and rng.random() < 0.4
  leaves = _bsp(rng, rect, target, corridor)
  if not 3 <= len(leaves) <= MAX_ROOMS:
    raise _Failed(f"BSP made {len(leaves)} rooms, need 3..{MAX_ROOMS}")
  types = _room_types(rng, leaves)
  wall = np.ones((g, g), bool)
  room = np.full((g, g), -1, np.int32)
  for k, leaf in enumerate(leaves):
    r0, c0, r1, c1 = leaf["rect"]
    wall[r0:r1, c0:c1] = False
    room[r0:r1, c0:c1] = k
  doors = _carve_doors(rng, wall, room, _door_edges(rng, leaves, types))
  keepout = ndimage.binary_dilation(doors, np.ones((5, 5), bool))
  layout = _Layout(wall=wall, room=room, keepout=keepout, num_rooms=len(leaves))
  if not _accepts(layout, layout.occ):
    raise _Failed("the empty apartment is not one navigable component")
  _furnish(rng, layout, types)
  if not layout.cats:
    raise _Failed("no object fitted")
  nav = largest_component(navigable_cells(wall | (layout.occ >= 0)))
  if nav.sum() < MIN_NAV_FRACTION * (~wall).sum():
    raise _Failed(f"only {nav.sum()} navigable of {(~wall).sum()} free cells")
  return _assemble(rng, layout, types, nav, objects)


def _assemble(rng, layout: _Layout, types, nav, objects: str) -> Scene:
  """Draw materials (and sprites) and pack the arrays in the contract's dtypes."""
  n = layout.num_rooms
  wall_mat = np.array([rng.choice(textures.WALL_MATERIALS[t]) for t in types], np.int32)
  floor_mat = np.array([rng.choice(textures.FLOOR_MATERIALS[t]) for t in types], np.int32)
  owner = _wall_owner(rng, layout.room, layout.wall, n)
  exterior = owner < 0
  safe = np.maximum(owner, 0)
  wall = np.where(layout.wall, np.where(exterior, textures.EXTERIOR_WALL, wall_mat[safe]), 0)
  floor = np.where(exterior, floor_mat[types.index(_T["living"])], floor_mat[safe])
  room_type = np.full(MAX_ROOMS, -1, np.int32)
  room_type[:n] = types
  inst_cat = np.zeros(MAX_OBJECTS, np.int32)
  inst_mat = np.zeros(MAX_OBJECTS, np.int32)
  inst_cat[:len(layout.cats)] = layout.cats
  inst_mat[:len(layout.cats)] = [rng.choice(textures.OBJECT_MATERIALS[c]) for c in layout.cats]
  ceiling = np.asarray(rng.choice(textures.CEILING_MATERIALS), np.int32)
  # Drawn last, so a scene's layout and materials are the same with sprites or boxes.
  inst_sprite = np.zeros(MAX_OBJECTS, np.int32)
  if objects == "sprites":
    inst_sprite[:len(layout.cats)] = [textures.sprite_id(rng.choice(sprites.variants(c)))
                                      for c in layout.cats]
  return Scene(
      wall=wall.astype(np.int32), floor=floor.astype(np.int32), ceiling=ceiling,
      room=layout.room.astype(np.int32), room_type=room_type, obj_inst=layout.occ,
      inst_cat=inst_cat, inst_mat=inst_mat, navigable=nav.astype(bool),
      inst_sprite=inst_sprite, inst_box=footprints(layout.occ))


def generate(seed: int, grid_size: int = 32, objects: str = "sprites") -> Scene:
  """One apartment as a `Scene` of numpy arrays, a function of (seed, grid_size, objects).

  Args:
    seed: non-negative integer scene seed (see `split_seeds`).
    grid_size: G, the grid side in cells of CELL metres, MIN_GRID..MAX_GRID.
    objects: 'sprites' (each instance a cut-out sprite of its category, `sprites.py`) or
      'boxes' (textured boxes, the look G-VUE's and the MAE data's published numbers were
      measured with); the layout and every material are the same either way.

  Raises:
    ValueError: for an invalid seed or grid_size, or if MAX_ATTEMPTS attempts all fail.
  """
  if not isinstance(grid_size, (int, np.integer)) or not MIN_GRID <= grid_size <= MAX_GRID:
    raise ValueError(f"generate: grid_size must be an int in [{MIN_GRID}, {MAX_GRID}] "
                     f"(cells of {CELL} m), got {grid_size!r} (seed {seed})")
  if not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"generate: seed must be a non-negative int, got {seed!r}")
  if objects not in OBJECT_STYLES:
    raise ValueError(f"generate: objects must be one of {OBJECT_STYLES}, got {objects!r}")
  reason = ""
  for attempt in range(MAX_ATTEMPTS):
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(attempt,)))
    try:
      return _attempt(rng, int(grid_size), objects)
    except _Failed as failure:
      reason = str(failure)
  raise ValueError(f"generate: no valid apartment for seed {seed}, grid_size {grid_size} after "
                   f"{MAX_ATTEMPTS} attempts; last failure: {reason}")


def split_seeds(split: str, num: int) -> np.ndarray:
  """The first `num` scene seeds of a split, int64 [num]; the splits' ranges are disjoint."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
  if not isinstance(num, (int, np.integer)) or not 1 <= num <= SPLIT_SIZE:
    raise ValueError(f"num scenes for split {split!r} must be an int in [1, {SPLIT_SIZE}], "
                     f"got {num!r}")
  return np.arange(SPLITS[split], SPLITS[split] + num, dtype=np.int64)


def scene_pool(split: str, num: int, grid_size: int = 32, objects: str = "sprites") -> Scene:
  """`num` scenes of a split stacked on a leading axis (numpy arrays)."""
  scenes = [generate(int(s), grid_size, objects) for s in split_seeds(split, num)]
  return jax.tree.map(lambda *xs: np.stack(xs), *scenes)
