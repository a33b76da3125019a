"""Object sprites of vcbench-nav: a silhouette and an appearance per category, with variants.

A box coloured by category lets a policy find a chair by looking up a colour, which tells
nothing about a pretrained representation's visual knowledge. Each ObjectNav category here has
a shape of its own, drawn procedurally as an RGBA tile that the renderer cuts out of the
object's faces (`render.py`): a chair is a back, a seat and four legs with the floor visible
between them; a bed a headboard, a mattress, a pillow and a blanket; a plant foliage of one of
three forms over a pot; a toilet a tank, a bowl and a pedestal; a TV a screen on legs or on a
cabinet; a sofa a back, two arms and seat cushions. `VARIANTS` tiles per category differ in
proportions, colours and fill textures (wood species, fabrics, leaves, ceramics from
`textures.py`, which builds the atlas with them), and every instance of a scene draws one of
them, so an agent must recognise the category across instances.

Tile conventions: u (columns) runs across the face the sprite is drawn on, v (rows) from the
object's top (its category height, `scene.CATEGORY_HEIGHT`) down to the floor. The alpha of
every column is one interval of rows (`column_spans`): the renderer resolves a whole column
from it in closed form, so cut-outs cost no extra texture lookup. Shapes are drawn that way
(a column through a chair leg meets leg, seat and back as one run); `_close_columns` fills any
gap left in a column with the darkened fill, so the rule always holds.

Sprites are drawn at 256 texels and box-filtered to the atlas' tile size (`textures.atlas`,
whose ids for them `textures.sprite_id` gives), from a seed fixed per sprite name: the same on
every machine and run.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np

from vcbench.envs.nav.scene import CATEGORIES

VARIANTS = 6            # sprite tiles per category.
_SEED = 20261206


def _uv(n: int):
  y, x = np.mgrid[0:n, 0:n].astype(np.float64)
  return (x + 0.5) / n, (y + 0.5) / n


def _rect(u, v, u0, u1, v0, v1):
  return (u >= u0) & (u < u1) & (v >= v0) & (v < v1)


def _ellipse(u, v, cu, cv, ru, rv):
  return ((u - cu) / ru) ** 2 + ((v - cv) / rv) ** 2 < 1.0


class _Canvas:
  """Layers painted back to front: colour [n, n, 3] and coverage [n, n]."""

  def __init__(self, n: int):
    self.n, self.rgb, self.alpha = n, np.zeros((n, n, 3)), np.zeros((n, n), bool)
    self.u, self.v = _uv(n)

  def paint(self, mask, fill, shade: float = 1.0):
    """Paints `fill` (a colour or an [n, n, 3] texture) where `mask`, times `shade`."""
    fill = np.broadcast_to(np.asarray(fill, np.float64), (self.n, self.n, 3))
    self.rgb = np.where(mask[..., None], fill * shade, self.rgb)
    self.alpha = self.alpha | mask

  def rgba(self) -> np.ndarray:
    _close_columns(self.rgb, self.alpha)
    return np.concatenate([self.rgb, 255.0 * self.alpha[..., None]], axis=-1)


def _close_columns(rgb, alpha) -> None:
  """Makes each column's coverage one run of rows (in place), the gaps darkened fill."""
  rows = np.arange(alpha.shape[0])[:, None]
  spans = column_spans(alpha)
  gap = (rows >= spans[:, 0]) & (rows <= spans[:, 1]) & ~alpha
  if gap.any():
    above = np.maximum.accumulate(np.where(alpha, rows, 0), axis=0)   # last covered row above
    rgb[gap] = 0.6 * rgb[above, np.arange(alpha.shape[1])[None, :]][gap]
    alpha |= gap


def column_spans(alpha: np.ndarray) -> np.ndarray:
  """(first, last) covered row of every column, int32 [..., T, 2]; (T, -1) when empty.
  `alpha`: bool coverage, or uint8 alpha (covered above 127)."""
  alpha = np.asarray(alpha)
  alpha = alpha if alpha.dtype == bool else alpha > 127
  t = alpha.shape[-2]
  covered = alpha.any(axis=-2)
  first = np.where(covered, alpha.argmax(axis=-2), t)
  last = np.where(covered, t - 1 - np.flip(alpha, axis=-2).argmax(axis=-2), -1)
  return np.stack([first, last], axis=-1).astype(np.int32)


def _tex(builder, rng, n):
  return np.clip(builder(rng, n), 0, 255)


def _tint(rng, lo=0.8, hi=1.15):
  return rng.uniform(lo, hi, size=3)


# -- one drawer per category: (rng, n) -> RGBA float [n, n, 4] ----------------------------------

_WOODS = (((196, 142, 84), (150, 98, 52)), ((120, 74, 44), (74, 44, 26)),
          ((222, 196, 150), (184, 150, 104)), ((60, 58, 56), (34, 32, 30)))
_FABRICS = ((44, 60, 122), (142, 40, 50), (96, 120, 84), (180, 170, 150), (70, 70, 76),
            (204, 124, 136), (214, 172, 62), (84, 140, 170))


def _chair(rng, n, f):
  c = _Canvas(n)
  wood = _tex(f.wood(*_WOODS[rng.integers(len(_WOODS))]), rng, n) * _tint(rng, 0.9, 1.1)
  back_top = rng.uniform(0.0, 0.15)
  seat = rng.uniform(0.48, 0.56)
  leg = rng.uniform(0.06, 0.1)
  inset = rng.uniform(0.04, 0.12)
  for u0 in (inset, 1.0 - inset - leg):
    c.paint(_rect(c.u, c.v, u0, u0 + leg, seat, 1.0), wood, 0.8)
  c.paint(_rect(c.u, c.v, inset, 1.0 - inset, back_top, seat), wood)
  if rng.random() < 0.5:   # a slatted back: darker gaps between the slats.
    slats = rng.integers(3, 6)
    gaps = ((c.u - inset) * slats / (1.0 - 2 * inset)) % 1.0 < 0.3
    c.paint(_rect(c.u, c.v, inset + leg, 1.0 - inset - leg, back_top + 0.08, seat - 0.04)
            & gaps, wood, 0.45)
  cushion = (_tex(f.fabric(_FABRICS[rng.integers(len(_FABRICS))]), rng, n)
             if rng.random() < 0.5 else wood)
  c.paint(_rect(c.u, c.v, inset * 0.5, 1.0 - inset * 0.5, seat, seat + 0.08), cushion, 1.1)
  return c.rgba()


def _bed(rng, n, f):
  c = _Canvas(n)
  wood = _tex(f.wood(*_WOODS[rng.integers(len(_WOODS))]), rng, n)
  blanket = _tex(f.fabric(_FABRICS[rng.integers(len(_FABRICS))]), rng, n)
  head = rng.uniform(0.1, 0.16)
  mattress = rng.uniform(0.3, 0.45)
  c.paint(_rect(c.u, c.v, 0.0, 1.0, 0.72, 0.9), wood, 0.7)                        # frame
  for u0 in (0.0, 0.94):
    c.paint(_rect(c.u, c.v, u0, u0 + 0.06, 0.72, 1.0), wood, 0.6)                 # feet
  c.paint(_rect(c.u, c.v, 0.0, 1.0, mattress, 0.72), (236, 234, 228), 0.95)        # sheet
  c.paint(_rect(c.u, c.v, head + rng.uniform(0.2, 0.35), 1.0, mattress - 0.02, 0.7), blanket)
  c.paint(_ellipse(c.u, c.v, head + 0.12, mattress - 0.02, 0.1, 0.07), (245, 244, 240))
  top = rng.uniform(0.0, 0.1)
  board = _rect(c.u, c.v, 0.0, head, top, 1.0)
  if rng.random() < 0.5:   # a rounded headboard
    board &= _ellipse(c.u, c.v, head / 2, top + 0.15, head, 0.2) | (c.v > top + 0.15)
  c.paint(board, wood)
  if rng.random() < 0.5:
    c.rgb, c.alpha = c.rgb[:, ::-1], c.alpha[:, ::-1]   # headboard on the right
  return c.rgba()


@functools.lru_cache(maxsize=4)
def _leaf_texture(n: int, leaves) -> np.ndarray:
  rng = np.random.default_rng([_SEED, zlib.crc32(b"leaves")])
  return _tex(leaves((24, 52, 22), ((70, 140, 52), (96, 160, 60), (50, 112, 44))), rng, n)


def _plant(rng, n, f):
  c = _Canvas(n)
  pots = ((178, 92, 62), (236, 234, 228), (44, 44, 48), (120, 150, 170))
  pot_top = rng.uniform(0.62, 0.75)
  pw = rng.uniform(0.16, 0.24)
  taper = (c.v - pot_top) / (1.0 - pot_top)
  pot = (np.abs(c.u - 0.5) < pw * (1.0 - 0.25 * taper)) & (c.v >= pot_top)
  c.paint(pot, np.asarray(pots[rng.integers(len(pots))], float) * _tint(rng, 0.9, 1.1),
          1.0)
  c.paint(_rect(c.u, c.v, 0.5 - pw - 0.02, 0.5 + pw + 0.02, pot_top, pot_top + 0.05),
          np.asarray(pots[rng.integers(len(pots))], float), 0.8)                   # rim
  shift = rng.integers(0, n, size=2)   # one leaf texture, shifted and tinted per variant
  leaves = np.roll(_leaf_texture(n, f.leaves), tuple(shift), axis=(0, 1)) * _tint(rng, 0.8, 1.2)
  form = rng.integers(3)
  if form == 0:      # a round bush
    foliage = _ellipse(c.u, c.v, 0.5, pot_top * 0.55, rng.uniform(0.35, 0.48), pot_top * 0.55)
  elif form == 1:    # tall and narrow
    foliage = _ellipse(c.u, c.v, 0.5, pot_top * 0.5, rng.uniform(0.18, 0.26), pot_top * 0.52)
  else:              # a fan of fronds (widest at the top)
    spread = (pot_top - c.v) / pot_top
    wave = 0.05 * np.sin(c.u * rng.uniform(18, 30))
    foliage = (np.abs(c.u - 0.5) < 0.08 + 0.4 * spread) & (c.v < pot_top) & (c.v > wave + 0.05)
  c.paint(foliage | _rect(c.u, c.v, 0.47, 0.53, pot_top * 0.5, pot_top), leaves)
  return c.rgba()


def _toilet(rng, n, f):
  c = _Canvas(n)
  white = _tex(f.ceramic((240, 240, 236)), rng, n) * _tint(rng, 0.95, 1.03)
  tank_w = rng.uniform(0.25, 0.35)
  tank_top = rng.uniform(0.0, 0.12)
  bowl_top = rng.uniform(0.42, 0.5)
  c.paint(_rect(c.u, c.v, 0.5 - tank_w, 0.5 + tank_w, tank_top, bowl_top), white, 0.97)
  c.paint(_rect(c.u, c.v, 0.5 - tank_w - 0.02, 0.5 + tank_w + 0.02, tank_top, tank_top + 0.05),
          white, 1.05)                                                             # lid
  c.paint(_ellipse(c.u, c.v, 0.5, bowl_top + 0.05, rng.uniform(0.34, 0.42), 0.28)
          & (c.v >= bowl_top), white)
  c.paint(_rect(c.u, c.v, 0.36, 0.64, 0.7, 1.0), white, 0.9)                       # pedestal
  seats = ((240, 240, 236), (30, 30, 32), (150, 104, 62))
  c.paint(_rect(c.u, c.v, 0.12, 0.88, bowl_top, bowl_top + 0.05),
          np.asarray(seats[rng.integers(len(seats))], float))
  return c.rgba()


def _tv(rng, n, f):
  c = _Canvas(n)
  screen = _tex(f.screen((36, 36, 40) if rng.random() < 0.6 else (172, 174, 178)), rng, n)
  top = rng.uniform(0.02, 0.12)
  bottom = top + rng.uniform(0.4, 0.5)
  margin = rng.uniform(0.06, 0.14)
  if rng.random() < 0.5:   # on a low cabinet
    wood = _tex(f.wood(*_WOODS[rng.integers(len(_WOODS))]), rng, n)
    c.paint(_rect(c.u, c.v, 0.0, 1.0, bottom + 0.02, 1.0), wood)
    c.paint(_rect(c.u, c.v, 0.4, 0.6, bottom, bottom + 0.02), (30, 30, 32))
    c.paint(_rect(c.u, c.v, 0.05, 0.95, bottom + 0.3, bottom + 0.32), wood, 0.5)  # drawer
  else:                    # on two legs
    metal = np.asarray((60, 60, 64) if rng.random() < 0.5 else (170, 170, 174), float)
    for u0 in (margin + 0.08, 1.0 - margin - 0.12):
      c.paint(_rect(c.u, c.v, u0, u0 + 0.04, bottom, 1.0), metal)
  c.paint(_rect(c.u, c.v, margin, 1.0 - margin, top, bottom), screen)
  return c.rgba()


def _sofa(rng, n, f):
  c = _Canvas(n)
  fabric = _tex(f.fabric(_FABRICS[rng.integers(len(_FABRICS))]), rng, n) * _tint(rng)
  back_top = rng.uniform(0.0, 0.15)
  arm = rng.uniform(0.08, 0.14)
  arm_top = rng.uniform(0.28, 0.4)
  seat = rng.uniform(0.45, 0.55)
  c.paint(_rect(c.u, c.v, arm * 0.6, 1.0 - arm * 0.6, back_top, seat), fabric, 0.85)
  cushions = rng.integers(2, 4)
  inner = (c.u - arm) / (1.0 - 2 * arm)
  seam = np.abs((inner * cushions) % 1.0 - 0.5) > 0.47
  c.paint(_rect(c.u, c.v, arm, 1.0 - arm, seat, 0.85), fabric)
  c.paint(_rect(c.u, c.v, arm, 1.0 - arm, seat, 0.85) & seam, fabric, 0.6)
  for u0 in (0.0, 1.0 - arm):
    c.paint(_rect(c.u, c.v, u0, u0 + arm, arm_top, 0.88), fabric, 0.95)
  feet = np.asarray((40, 30, 24), float)
  for u0 in (0.04, 0.92):
    c.paint(_rect(c.u, c.v, u0, u0 + 0.04, 0.88, 1.0), feet)
  return c.rgba()


_DRAW = {"chair": _chair, "bed": _bed, "plant": _plant, "toilet": _toilet, "tv": _tv,
         "sofa": _sofa}
NAMES: tuple[str, ...] = tuple(f"{cat}_{k}" for cat in CATEGORIES[1:] for k in range(VARIANTS))


def draw(name: str, n: int, fills) -> np.ndarray:
  """The sprite `name` ('<category>_<variant>'), float RGBA [n, n, 4] in [0, 255].

  fills: the material families it paints with, `textures.SPRITE_FILLS` (attributes wood,
  fabric, leaves, ceramic, screen: `(colours...) -> (rng, n) -> float RGB [n, n, 3]`)."""
  cat = name.rsplit("_", 1)[0]
  rng = np.random.default_rng([_SEED, zlib.crc32(name.encode())])
  return np.clip(_DRAW[cat](rng, n, fills), 0.0, 255.0)


def variants(category: int) -> tuple[str, ...]:
  """The sprite names of a category (CATEGORIES index 1..6)."""
  return tuple(f"{CATEGORIES[category]}_{k}" for k in range(VARIANTS))

