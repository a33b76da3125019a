"""A hand-made 16x16 apartment (two rooms joined by a door, a chair and a sofa) whose geometry
the nav tests can reason about exactly."""
import numpy as np

from vcbench.envs.nav import scene as sc


def navigable_from(occupied: np.ndarray) -> np.ndarray:
  """Brute force: a cell is navigable when it and its 8 neighbours are free."""
  g = occupied.shape[0]
  nav = np.zeros_like(occupied)
  for r in range(g):
    for c in range(g):
      block = occupied[max(r - 1, 0):r + 2, max(c - 1, 0):c + 2]
      nav[r, c] = 0 < r < g - 1 and 0 < c < g - 1 and not block.any()
  return nav


def hand_scene(g: int = 16) -> sc.Scene:
  wall = np.zeros((g, g), np.int32)
  wall[0, :] = wall[-1, :] = wall[:, 0] = wall[:, -1] = 1
  wall[:, 8] = 2                 # the wall between the rooms (x in [2.0, 2.25) m) ...
  wall[6:10, 8] = 0              # ... with a 1 m door at rows 6-9
  inst = -np.ones((g, g), np.int32)
  inst[2:4, 3:5] = 0             # a chair, x in [0.75, 1.25), y in [0.5, 1.0)
  inst[12:14, 11:14] = 1         # a sofa
  inst_cat = np.zeros(sc.MAX_OBJECTS, np.int32)
  inst_cat[:2] = (sc.CATEGORIES.index("chair"), sc.CATEGORIES.index("sofa"))
  inst_mat = np.zeros(sc.MAX_OBJECTS, np.int32)
  inst_mat[:2] = (4, 5)
  room = np.where(wall > 0, -1, np.where(np.arange(g)[None, :] < 8, 0, 1)).astype(np.int32)
  room_type = np.full(sc.MAX_ROOMS, -1, np.int32)
  room_type[:2] = (0, 1)
  return sc.Scene(wall=wall, floor=np.full((g, g), 3, np.int32), ceiling=np.int32(6),
                  room=room, room_type=room_type, obj_inst=inst, inst_cat=inst_cat,
                  inst_mat=inst_mat, navigable=navigable_from((wall > 0) | (inst >= 0)),
                  inst_sprite=np.zeros(sc.MAX_OBJECTS, np.int32), inst_box=sc.footprints(inst))


def hand_atlas(size: int = 16) -> np.ndarray:
  """8 materials, each a distinct colour gradient, so every surface is identifiable."""
  yy, xx = np.mgrid[0:size, 0:size] * (255 // size)
  return np.stack([np.stack([xx, yy, np.full_like(xx, 30 * i)], -1)
                   for i in range(8)]).astype(np.uint8)
