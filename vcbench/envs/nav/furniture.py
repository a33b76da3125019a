"""Furniture placement for the procedural apartments of `scenes.py` (host side, numpy).

`_furnish` asks each room, by its type, for objects of the six ObjectNav categories, each only in
the room types where it is plausible (`CATEGORY_ROOMS`), and places them big-first as boxes with
their back flush against a wall (some chairs stand free), never in or next to a door gap; plants
prefer corners and a TV faces its room's sofa. A placement is kept only if the navigable cells
stay one 4-connected component, every room keeps MIN_ROOM_NAV navigable cells and every object
keeps a navigable cell within REACH_DISTANCE (so every object stays reachable); a short plan is
topped up with plants and chairs to MIN_INSTANCES, at most MAX_INSTANCES in all. The module also
holds what `scenes.py` shares with it (the grid helpers and the per-attempt `_Layout`), so
imports run one way: scenes -> furniture.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy import ndimage

from vcbench.envs.nav.scene import CATEGORIES, CELL, ROOM_TYPES

REACH_DISTANCE = 1.0      # metres from a navigable cell centre to an object's footprint.
MIN_ROOM_NAV = 4          # navigable cells every room must keep after furnishing.
MAX_INSTANCES = 14        # objects per scene (<= MAX_OBJECTS).
MIN_INSTANCES = 6         # topped up with plants and chairs when the plan falls short.
_TRIES_PER_OBJECT = 6

_T = {name: i for i, name in enumerate(ROOM_TYPES)}
_C = {name: i for i, name in enumerate(CATEGORIES)}

# Room types each category may stand in (ROOM_TYPES indices); the tests hold the generator to it.
CATEGORY_ROOMS: dict[int, tuple[int, ...]] = {
    _C["chair"]: (_T["living"], _T["kitchen"], _T["office"], _T["bedroom"]),
    _C["bed"]: (_T["bedroom"],),
    _C["plant"]: tuple(range(len(ROOM_TYPES))),
    _C["toilet"]: (_T["bathroom"],),
    _C["tv"]: (_T["living"], _T["bedroom"]),
    _C["sofa"]: (_T["living"],),
}
# Footprints as (depth out from the wall, width along it) in cells, largest first.
_FOOTPRINTS = {
    _C["chair"]: ((2, 2),), _C["bed"]: ((8, 6), (8, 4)), _C["plant"]: ((2, 2),),
    _C["toilet"]: ((3, 2),), _C["tv"]: ((1, 4),), _C["sofa"]: ((3, 7), (3, 5)),
}
# What each room type asks for: (category, counts to draw from uniformly).
_FURNISHING = {
    _T["living"]: ((_C["sofa"], (1,)), (_C["tv"], (1,)), (_C["chair"], (0, 1, 2)),
                   (_C["plant"], (1, 2))),
    _T["bedroom"]: ((_C["bed"], (1,)), (_C["tv"], (0, 0, 1)), (_C["chair"], (0, 1)),
                    (_C["plant"], (0, 1))),
    _T["kitchen"]: ((_C["chair"], (2, 3, 4)), (_C["plant"], (0, 1))),
    _T["bathroom"]: ((_C["toilet"], (1,)), (_C["plant"], (0, 0, 1))),
    _T["office"]: ((_C["chair"], (1, 2)), (_C["plant"], (0, 1))),
    _T["corridor"]: ((_C["plant"], (0, 1)),),
}
# Big pieces first, while the walls are still free.
_PLACE_ORDER = tuple(_C[n] for n in ("bed", "sofa", "toilet", "tv", "chair", "plant"))
_OPPOSITE = {"N": "S", "S": "N", "W": "E", "E": "W"}


@dataclasses.dataclass
class _Layout:
  """Mutable state of one attempt: rooms, doors and the furniture placed so far."""
  wall: np.ndarray                 # bool [G, G]
  room: np.ndarray                 # int [G, G], -1 on walls
  keepout: np.ndarray              # bool [G, G]: door gaps and their surroundings.
  num_rooms: int
  occ: np.ndarray = None           # int [G, G] instance index, -1 none.
  cats: list = dataclasses.field(default_factory=list)
  reach: list = dataclasses.field(default_factory=list)  # bool [G, G] per instance.

  def __post_init__(self):
    self.occ = np.full(self.wall.shape, -1, np.int32)


# ---------------------------------------------------------------------------------------------
# Grid helpers.

def navigable_cells(blocked: np.ndarray) -> np.ndarray:
  """Cells whose 3x3 neighbourhood holds no blocked cell (the agent disc fits), bool [G, G]."""
  free = ~blocked
  g = free.shape[0]
  core = free[1:-1, 1:-1].copy()
  for dy in (-1, 0, 1):
    for dx in (-1, 0, 1):
      core &= free[1 + dy:g - 1 + dy, 1 + dx:g - 1 + dx]
  out = np.zeros_like(free)
  out[1:-1, 1:-1] = core
  return out


def largest_component(mask: np.ndarray) -> np.ndarray:
  """The largest 4-connected component of a bool mask (all False if the mask is empty)."""
  labels, count = ndimage.label(mask)  # default structure: 4-connectivity.
  if count == 0:
    return np.zeros_like(mask)
  sizes = np.bincount(labels.ravel())[1:]
  return labels == 1 + int(np.argmax(sizes))


def reach_mask(shape: tuple[int, int], box: tuple[int, int, int, int]) -> np.ndarray:
  """Cells whose centre lies within REACH_DISTANCE of the cell box [r0, r1) x [c0, c1)."""
  r0, c0, r1, c1 = box
  centre_r = np.arange(shape[0]) + 0.5
  centre_c = np.arange(shape[1]) + 0.5
  dr = np.maximum(np.maximum(r0 - centre_r, centre_r - r1), 0.0)[:, None]
  dc = np.maximum(np.maximum(c0 - centre_c, centre_c - c1), 0.0)[None, :]
  return np.hypot(dr, dc) * CELL <= REACH_DISTANCE + 1e-9


def _window_sum(mask: np.ndarray, h: int, w: int) -> np.ndarray:
  """S[r, c] = mask[r:r+h, c:c+w].sum() for every window inside the grid (integral image)."""
  ii = np.pad(mask.astype(np.int32).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
  return ii[h:, w:] - ii[:-h, w:] - ii[h:, :-w] + ii[:-h, :-w]


def _against_wall(wall: np.ndarray, h: int, w: int, back: str) -> np.ndarray:
  """Top-left corners of h x w boxes whose `back` side (N/S/W/E) runs flush along wall cells."""
  g = wall.shape[0]
  out = np.zeros((g - h + 1, g - w + 1), bool)
  rows, cols = _window_sum(wall, 1, w) == w, _window_sum(wall, h, 1) == h
  if back == "N":
    out[1:] = rows[:g - h]
  elif back == "S":
    out[:g - h] = rows[h:]
  elif back == "W":
    out[:, 1:] = cols[:, :g - w]
  else:
    out[:, :g - w] = cols[:, w:]
  return out


# ---------------------------------------------------------------------------------------------
# Placement.

def _accepts(layout: _Layout, occ: np.ndarray) -> bool:
  """The furnishing stays legal: one nav component, every room and object still reachable."""
  nav = navigable_cells(layout.wall | (occ >= 0))
  if ndimage.label(nav)[1] != 1:
    return False
  per_room = np.bincount(layout.room[nav], minlength=layout.num_rooms)
  if per_room.min() < MIN_ROOM_NAV:
    return False
  return all((nav & reach).any() for reach in layout.reach)


def _place(rng, layout: _Layout, k: int, cat: int, prefer_back: str | None = None):
  """Place one `cat` object in room k; its back side (N/S/W/E) or None if nothing fitted."""
  forbidden = (layout.room != k) | layout.wall | layout.keepout | (layout.occ >= 0)
  free_standing = cat == _C["chair"] and rng.random() < 0.4
  for depth, width in _FOOTPRINTS[cat]:
    boxes, weights = [], []
    for back in ("N", "S", "W", "E"):
      h, w = (depth, width) if back in "NS" else (width, depth)
      ok = _window_sum(forbidden, h, w) == 0
      if not free_standing:
        ok &= _against_wall(layout.wall, h, w, back)
      weight = 4.0 if back == prefer_back else 1.0
      if cat == _C["plant"]:  # plants prefer corners.
        walls = sum(_against_wall(layout.wall, h, w, b) for b in "NSWE")
        weight = weight * (1.0 + 3.0 * (walls >= 2))
      rows, cols = np.nonzero(ok)
      boxes += [(int(r), int(c), h, w, back) for r, c in zip(rows, cols)]
      weights.append(np.broadcast_to(weight, ok.shape)[rows, cols])
      if free_standing:
        break  # a free-standing box has no back; one orientation covers every position.
    if not boxes:
      continue
    p = np.concatenate(weights)
    picks = rng.choice(len(boxes), size=min(_TRIES_PER_OBJECT, len(boxes)), replace=False,
                       p=p / p.sum())
    for pick in picks:
      r, c, h, w, back = boxes[pick]
      occ = layout.occ.copy()
      occ[r:r + h, c:c + w] = len(layout.cats)
      layout.reach.append(reach_mask(occ.shape, (r, c, r + h, c + w)))
      if _accepts(layout, occ):
        layout.occ = occ
        layout.cats.append(cat)
        return back
      layout.reach.pop()
  return None


def _furnish(rng, layout: _Layout, types):
  """Ask each room for its furniture, place it big-first, then top up with plants and chairs."""
  requests = []
  for k, t in enumerate(types):
    for cat, counts in _FURNISHING[t]:
      requests += [(cat, k)] * int(rng.choice(counts))
  rng.shuffle(requests)
  requests.sort(key=lambda req: _PLACE_ORDER.index(req[0]))
  sofa_back = {}
  for cat, k in requests:
    if len(layout.cats) >= MAX_INSTANCES:
      break
    prefer = _OPPOSITE.get(sofa_back.get(k)) if cat == _C["tv"] else None
    back = _place(rng, layout, k, cat, prefer)
    if cat == _C["sofa"] and back is not None:
      sofa_back[k] = back  # the TV faces the sofa.
  for _ in range(8):
    if len(layout.cats) >= min(MIN_INSTANCES, MAX_INSTANCES):
      break
    cat = int(rng.choice([_C["plant"], _C["chair"]]))
    rooms = [k for k, t in enumerate(types) if t in CATEGORY_ROOMS[cat]]
    _place(rng, layout, int(rng.choice(rooms)), cat)

