"""The scene format of vcbench-nav: an apartment as a few integer grids (one shared contract).

A scene is a G x G grid of square cells of `CELL` metres, indexed [row, col] = [y, x]; world
coordinates are metres with x along columns and y along rows, the origin at the grid's corner,
so cell (r, c) spans x in [c*CELL, (c+1)*CELL), y in [r*CELL, (r+1)*CELL). Every array has the
grid shape, except the per-instance and per-room tables; a batch of scenes stacks them on a
leading axis (the env keeps the scene pool this way).

The generator (`scenes.py`, numpy, from a seed) writes this format; the renderer, the agent's
collision test and the geodesic field read it.
"""
from __future__ import annotations

import jax
import numpy as np
from flax import struct

CELL = 0.25            # metres per grid cell.
WALL_HEIGHT = 2.5      # metres, floor to ceiling.
CAMERA_HEIGHT = 0.88   # metres (LoCoBot).
AGENT_RADIUS = 0.18    # metres (LoCoBot); < CELL, so the agent overlaps at most a 3x3 block.
MAX_OBJECTS = 32       # instance slots per scene.
MAX_ROOMS = 8

# Object categories (index 0 = no object). ObjectNav goals are categories 1..6.
CATEGORIES = ("none", "chair", "bed", "plant", "toilet", "tv", "sofa")
# Box height per category in metres (the renderer draws objects as textured boxes).
CATEGORY_HEIGHT = (0.0, 0.9, 0.6, 1.1, 0.75, 1.3, 0.8)
ROOM_TYPES = ("living", "bedroom", "kitchen", "bathroom", "corridor", "office")

# Per-pixel semantic labels (the `semantic` observation).
SEM_WALL, SEM_FLOOR, SEM_CEILING = 0, 1, 2
SEM_OBJECT0 = 3        # category k (1..6) is labelled SEM_OBJECT0 + k - 1.
NUM_SEMANTIC = SEM_OBJECT0 + len(CATEGORIES) - 1


@struct.dataclass
class Scene:
  """One apartment (or a stack of them on a leading axis).

  wall:      int32 [G, G]  0 = no wall; k > 0 = solid wall cell with texture-atlas material k.
             The grid's border cells are always walls, so rays and agents never leave it.
  floor:     int32 [G, G]  floor material (atlas index) of each cell (rooms differ).
  ceiling:   int32 []      ceiling material (atlas index).
  room:      int32 [G, G]  room index (0..MAX_ROOMS-1) of free cells; -1 on walls.
  room_type: int32 [MAX_ROOMS]  index into ROOM_TYPES; -1 for unused room slots.
  obj_inst:  int32 [G, G]  instance index (0..MAX_OBJECTS-1) occupying the cell, -1 none.
             Objects are solid (block the agent) boxes of CATEGORY_HEIGHT.
  inst_cat:  int32 [MAX_OBJECTS]  category (1..6) of each instance; 0 = unused slot.
  inst_mat:  int32 [MAX_OBJECTS]  atlas material of each instance (its box faces and top).
  inst_sprite: int32 [MAX_OBJECTS]  atlas id of the instance's cut-out sprite (`sprites.py`),
             drawn on its faces instead of the material, with no top; 0 = a textured box.
  inst_box:  float32 [MAX_OBJECTS, 4]  the instance's footprint (x0, y0, x1, y1) in metres
             (where a sprite's u runs across a face); zeros for unused slots.
  navigable: bool [G, G]   the cell centre is a legal agent position: the agent's disc there
             touches no wall or object cell (so the cell and its 8 neighbours are free).
  """
  wall: jax.Array
  floor: jax.Array
  ceiling: jax.Array
  room: jax.Array
  room_type: jax.Array
  obj_inst: jax.Array
  inst_cat: jax.Array
  inst_mat: jax.Array
  navigable: jax.Array
  inst_sprite: jax.Array
  inst_box: jax.Array

  @property
  def grid_size(self) -> int:
    return self.wall.shape[-1]


def footprints(obj_inst: np.ndarray) -> np.ndarray:
  """Each instance's bounding box (x0, y0, x1, y1) in metres from its cells, float32
  [MAX_OBJECTS, 4] (`Scene.inst_box`; zeros for unused slots). Host side, numpy."""
  obj_inst = np.asarray(obj_inst)
  boxes = np.zeros((MAX_OBJECTS, 4), np.float32)
  for k in np.unique(obj_inst[obj_inst >= 0]):
    rows, cols = np.nonzero(obj_inst == k)
    boxes[k] = (cols.min() * CELL, rows.min() * CELL, (cols.max() + 1) * CELL,
                (rows.max() + 1) * CELL)
  return boxes
