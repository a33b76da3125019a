"""The texture atlas of vcbench-nav: one square RGB tile per material, indexed by atlas id.

A scene stores materials as atlas ids (`scene.py`): walls, floors, the ceiling and every object
instance name one tile here. Id 0 is reserved (a flat mid-grey) because `wall == 0` means "no
wall". The tiles are built on the host with numpy from a fixed seed, so the atlas is the same on
every machine and every run:

* real-image materials come from photographs bundled with scikit-image and matplotlib (both
  declared dependencies), so nothing is downloaded: scikit-image's brick, gravel and grass
  samples give a brick wall, a gravel-stone floor and plant leaves; matplotlib's Jacksboro
  fault elevation model, hill-shaded, gives stone and slate; the sky behind Grace Hopper's
  portrait gives a painted wall with real photographic grain;
* the rest are procedural: wood planks, ceramic tiles, carpet, painted plaster, wallpaper,
  brick, ceiling plaster and panels, and one look per object category (wood chairs, fabric
  beds and sofas, leafy plants, white ceramic toilets, dark glossy TVs with a bezel).

Procedural noise is periodic (built in the Fourier domain), so most tiles repeat seamlessly.
The name tables below are plain data, available without building the atlas.
"""
from __future__ import annotations

import functools
import types
import zlib

import numpy as np
from PIL import Image

from vcbench.envs.nav import sprites
from vcbench.envs.nav.scene import CATEGORIES, ROOM_TYPES

_SEED = 20250601   # fixed: the atlas must never change between runs.
_BASE = 256        # tiles are drawn at this resolution, then box-filtered down to `size`.


# ---------------------------------------------------------------------------------------------
# Building blocks.

def _noise(rng: np.random.Generator, n: int, beta: float = 2.0,
           stretch: tuple[float, float] = (1.0, 1.0)) -> np.ndarray:
  """Periodic fractal noise with power spectrum 1/f^beta, zero mean and unit std, [n, n].

  `stretch` scales the (row, column) frequencies: a large column stretch suppresses variation
  along x, which gives streaks along x (wood grain).
  """
  fy = np.fft.fftfreq(n)[:, None] * stretch[0]
  fx = np.fft.rfftfreq(n)[None, :] * stretch[1]
  f = np.sqrt(fy ** 2 + fx ** 2)
  f[0, 0] = 1.0
  amp = f ** (-beta / 2.0)
  amp[0, 0] = 0.0  # no DC: the base colour alone sets the mean.
  spec = amp * (rng.normal(size=amp.shape) + 1j * rng.normal(size=amp.shape))
  img = np.fft.irfft2(spec, s=(n, n))
  return (img - img.mean()) / (img.std() + 1e-8)


def _shade(base, field: np.ndarray, amount: float) -> np.ndarray:
  """Base colour modulated multiplicatively by a zero-mean field, [n, n, 3] floats."""
  return np.asarray(base, np.float64) * (1.0 + amount * field)[..., None]


def _mix(t: np.ndarray, c0, c1) -> np.ndarray:
  """Per-pixel blend between two colours by t in [0, 1]."""
  t = np.clip(t, 0.0, 1.0)[..., None]
  return (1.0 - t) * np.asarray(c0, np.float64) + t * np.asarray(c1, np.float64)


def _coords(n: int) -> tuple[np.ndarray, np.ndarray]:
  """Pixel row and column index grids, [n, n] floats."""
  y, x = np.mgrid[0:n, 0:n]
  return y.astype(np.float64), x.astype(np.float64)


def _grout(n: int, tiles: int, width: int) -> np.ndarray:
  """Bool mask of the grout lines of a tiles x tiles grid (periodic: lines at tile starts)."""
  y, x = _coords(n)
  period = n / tiles
  return ((y % period) < width) | ((x % period) < width)


def _tile_ids(n: int, tiles: int) -> np.ndarray:
  """Integer id of the tile each pixel falls in, [n, n]."""
  y, x = _coords(n)
  return (y // (n / tiles)).astype(int) * tiles + (x // (n / tiles)).astype(int)


def _weave(n: int, period: int) -> np.ndarray:
  """Plain-weave fabric relief in [-1, 1]: threads alternate over and under in a checker."""
  y, x = _coords(n)
  over = ((y // period + x // period) % 2) == 0
  across = np.sin(np.pi * (y % period) / period)
  along = np.sin(np.pi * (x % period) / period)
  return 2.0 * np.where(over, across, along) - 1.0


def _sample_path(name: str):
  import matplotlib.cbook  # deferred: only the real-image materials need it.
  return matplotlib.cbook.get_sample_data(name, asfileobj=False)


@functools.lru_cache(maxsize=None)
def _hillshade() -> np.ndarray:
  """Hill-shaded Jacksboro fault elevation model (ships with matplotlib), [256, 256] in [0, 1]."""
  elev = np.load(_sample_path("jacksboro_fault_dem.npz"))["elevation"].astype(np.float64)
  gy, gx = np.gradient(elev)
  # Light from the upper left; the relief reads as rough stone once tinted.
  shade = (-gx - gy) / np.sqrt(1.0 + gx ** 2 + gy ** 2)
  crop = shade[40:296, 60:316]
  return (crop - crop.min()) / (crop.max() - crop.min())


def _resize(img: np.ndarray, n: int) -> np.ndarray:
  """Resize a float [h, w, 3] or [h, w] image to [n, n] (bicubic), floats."""
  if img.ndim == 2:
    return np.asarray(Image.fromarray(img.astype(np.float32)).resize(
        (n, n), Image.Resampling.BICUBIC), np.float64)
  return np.stack([_resize(img[..., k], n) for k in range(3)], axis=-1)


# ---------------------------------------------------------------------------------------------
# Material families. Each builder maps (rng, n) to a float RGB image [n, n, 3] in ~[0, 255].

def _flat(color):
  return lambda rng, n: np.broadcast_to(np.asarray(color, np.float64), (n, n, 3)).copy()


def _plaster(color):
  def build(rng, n):
    return _shade(color, 0.8 * _noise(rng, n, 2.4) + 0.3 * _noise(rng, n, 0.0), 0.04)
  return build


def _sky_plaster(rng, n):
  """The blue sky behind Grace Hopper (matplotlib sample): a real photographic gradient."""
  photo = np.asarray(Image.open(_sample_path("grace_hopper.jpg")), np.float64)
  sky = _resize(photo[20:220, 400:512], n)
  return 0.55 * sky + 0.45 * np.array([205.0, 200.0, 190.0])  # paler: read as paint.


def _skimage_photo(sample: str, dark, light):
  """A grayscale scikit-image sample photograph (bundled, no download), tinted dark->light."""
  def build(rng, n):
    import skimage.data  # deferred: only these materials need it.
    gray = getattr(skimage.data, sample)().astype(np.float64) / 255.0
    return _mix(_resize(gray, n), dark, light)
  return build


def _stripes(c0, c1, accent, stripes: int = 8):
  def build(rng, n):
    y, x = _coords(n)
    phase = (x * stripes / n) % 1.0
    img = np.where((phase < 0.5)[..., None], np.asarray(c0, float), np.asarray(c1, float))
    img = np.where((np.abs(phase - 0.5) < 0.03)[..., None], np.asarray(accent, float), img)
    return img * (1.0 + 0.025 * _noise(rng, n, 1.0))[..., None]
  return build


def _brick(color, mortar=(200, 195, 185)):
  def build(rng, n):
    y, x = _coords(n)
    rows, per_row = 8, 4
    h, w = n / rows, n / per_row
    row = (y // h).astype(int)
    xs = (x + (row % 2) * w / 2) % n  # every other course is offset by half a brick.
    brick = row * per_row + (xs // w).astype(int)
    jitter = rng.uniform(0.8, 1.15, size=rows * per_row)[brick]
    img = _shade(color, 0.5 * _noise(rng, n, 1.2), 0.12) * jitter[..., None]
    joint = ((y % h) < 3) | ((xs % w) < 3)
    return np.where(joint[..., None], np.asarray(mortar, float), img)
  return build


def _stone(dark, light):
  def build(rng, n):
    relief = _resize(_hillshade(), n)
    return _mix(relief, dark, light) * (1.0 + 0.04 * _noise(rng, n, 1.5))[..., None]
  return build


def _grain(rng, n, light, dark, rings: float = 10.0) -> np.ndarray:
  """Wood grain: bands across rows, warped by noise stretched along x."""
  y, _ = _coords(n)
  warp = _noise(rng, n, 2.5, stretch=(1.0, 6.0))
  t = 0.5 + 0.5 * np.sin(2 * np.pi * (rings * y / n + 0.35 * warp))
  fibre = _noise(rng, n, 0.8, stretch=(1.0, 12.0))
  return _mix(t ** 2, light, dark) * (1.0 + 0.05 * fibre)[..., None]


def _wood(light, dark):
  return lambda rng, n: _grain(rng, n, light, dark)


def _planks(light, dark, planks: int = 4):
  def build(rng, n):
    img = _grain(rng, n, light, dark, rings=3.0 * planks)
    y, x = _coords(n)
    h = n / planks
    row = (y // h).astype(int)
    joints = rng.uniform(0.1, 0.9, size=planks) * n  # one butt joint per plank row.
    board = row * 2 + (x >= joints[row]).astype(int)
    img = img * rng.uniform(0.85, 1.12, size=2 * planks)[board][..., None]
    seam = ((y % h) < 2) | (np.abs(x - joints[row]) < 1.0)
    return np.where(seam[..., None], img * 0.55, img)
  return build


def _tiles(c0, c1=None, tiles: int = 4, grout=(150, 150, 145)):
  def build(rng, n):
    ids = _tile_ids(n, tiles)
    checker = (ids // tiles + ids % tiles) % 2 == 1
    base = np.where((checker & (c1 is not None))[..., None],
                    np.asarray(c1 if c1 is not None else c0, float), np.asarray(c0, float))
    jitter = rng.uniform(0.95, 1.04, size=tiles * tiles)[ids]
    img = base * jitter[..., None] * (1.0 + 0.025 * _noise(rng, n, 2.0))[..., None]
    return np.where(_grout(n, tiles, 3)[..., None], np.asarray(grout, float), img)
  return build


def _carpet(color):
  def build(rng, n):
    return _shade(color, 0.7 * _noise(rng, n, 0.2) + 0.5 * _noise(rng, n, 2.0), 0.1)
  return build


def _ceiling_panels(rng, n):
  img = _shade((228, 226, 220), _noise(rng, n, 0.0), 0.05)
  speck = rng.random((n, n)) < 0.02  # acoustic-tile pinholes.
  img = np.where(speck[..., None], img * 0.75, img)
  return np.where(_grout(n, 2, 3)[..., None], np.array([190.0, 188.0, 182.0]), img)


def _fabric(color, period: int = 16):
  def build(rng, n):
    relief = 0.6 * _weave(n, period * n // _BASE) + 0.4 * _noise(rng, n, 1.5)
    folds = _noise(rng, n, 3.0)  # soft shading of cushions and creases, kept when downscaled.
    return _shade(color, 0.12 * relief + 0.06 * folds, 1.0)
  return build


def _leaves(background, greens, count: int = 140):
  """Overlapping elliptic leaves with a darker midrib, in random greens (periodic)."""
  def build(rng, n):
    y, x = _coords(n)
    img = _shade(background, _noise(rng, n, 1.5), 0.15)
    for _ in range(count):
      cy, cx = rng.uniform(0, n, size=2)
      angle = rng.uniform(0, np.pi)
      length = rng.uniform(0.04, 0.09) * n
      dy = (y - cy + n / 2) % n - n / 2  # wrapped offsets keep the tile periodic.
      dx = (x - cx + n / 2) % n - n / 2
      u = dx * np.cos(angle) + dy * np.sin(angle)
      v = -dx * np.sin(angle) + dy * np.cos(angle)
      leaf = (u / length) ** 2 + (v / (0.4 * length)) ** 2 < 1.0
      color = np.asarray(greens[rng.integers(len(greens))], float) * rng.uniform(0.8, 1.15)
      lit = color * (1.1 - 0.3 * (u / length + 1.0) / 2.0)[..., None]  # light from one end.
      lit = np.where((np.abs(v) < 0.06 * length)[..., None], lit * 0.7, lit)  # midrib.
      img = np.where(leaf[..., None], lit, img)
    return img
  return build


def _ceramic(color):
  def build(rng, n):
    y, x = _coords(n)
    r2 = ((y - 0.3 * n) ** 2 + (x - 0.35 * n) ** 2) / n ** 2
    img = np.asarray(color, float) * (0.88 + 0.14 * np.exp(-r2 / 0.08))[..., None]
    img = img * (1.0 + 0.01 * _noise(rng, n, 1.0))[..., None]
    seam = np.abs(y - 0.35 * n) < 1.5  # the seat/lid line.
    return np.where(seam[..., None], img * 0.8, img)
  return build


def _screen(bezel_color):
  def build(rng, n):
    y, x = _coords(n)
    glare = np.clip(1.0 - (y + x) / (1.2 * n), 0.0, 1.0) ** 2  # glossy reflection.
    img = _mix(glare, (14, 15, 20), (62, 66, 78))
    border = 0.09 * n
    bezel = (y < border) | (y >= n - border) | (x < border) | (x >= n - border)
    bezel_img = _shade(bezel_color, _noise(rng, n, 1.0), 0.03)
    return np.where(bezel[..., None], bezel_img, img)
  return build


# ---------------------------------------------------------------------------------------------
# The registry: position = atlas id. Append only, so existing ids keep their meaning.

_REGISTRY = (
    ("reserved_grey", _flat((128, 128, 128))),
    # Walls.
    ("plaster_white", _plaster((236, 233, 225))),
    ("plaster_cream", _plaster((232, 218, 185))),
    ("plaster_sage", _plaster((172, 188, 160))),
    ("plaster_blue", _plaster((162, 184, 207))),
    ("plaster_terracotta", _plaster((204, 136, 104))),
    ("plaster_grey", _plaster((178, 178, 174))),
    ("plaster_sky_photo", _sky_plaster),
    ("wallpaper_sand_stripes", _stripes((226, 210, 176), (206, 186, 150), (170, 140, 100))),
    ("wallpaper_green_stripes", _stripes((170, 196, 170), (140, 170, 146), (230, 230, 210))),
    ("wallpaper_blue_pinstripe", _stripes((200, 212, 228), (200, 212, 228), (90, 110, 160), 12)),
    ("brick_red", _brick((160, 72, 52))),
    ("stone_photo", _stone((88, 82, 74), (196, 186, 170))),
    ("wall_tiles_white", _tiles((236, 238, 236), tiles=8, grout=(180, 182, 182))),
    # Floors.
    ("wood_oak", _planks((206, 160, 106), (160, 110, 64))),
    ("wood_walnut", _planks((128, 84, 54), (80, 50, 32))),
    ("wood_grey", _planks((176, 168, 156), (124, 116, 106))),
    ("tiles_white", _tiles((226, 224, 218))),
    ("tiles_checker", _tiles((232, 232, 228), (40, 40, 44), tiles=8, grout=(120, 120, 120))),
    ("tiles_terracotta", _tiles((178, 92, 62), tiles=4, grout=(190, 180, 165))),
    ("carpet_beige", _carpet((196, 178, 148))),
    ("carpet_blue", _carpet((74, 92, 134))),
    ("carpet_grey", _carpet((128, 126, 122))),
    ("slate_photo", _stone((46, 52, 60), (132, 140, 150))),
    # Ceilings.
    ("ceiling_plaster", _plaster((242, 241, 236))),
    ("ceiling_panels", _ceiling_panels),
    # Objects (category-distinct base colours, so the classes differ in appearance).
    ("chair_oak", _wood((196, 142, 84), (150, 98, 52))),
    ("chair_walnut", _wood((120, 74, 44), (74, 44, 26))),
    ("bed_rose", _fabric((204, 124, 136))),
    ("bed_mustard", _fabric((214, 172, 62))),
    ("plant_leaves", _leaves((24, 52, 22), ((70, 140, 52), (96, 160, 60), (50, 112, 44)))),
    ("plant_leaves_dark", _leaves((18, 40, 26), ((40, 104, 64), (56, 124, 70), (34, 88, 56)))),
    ("toilet_ceramic", _ceramic((240, 240, 236))),
    ("tv_black_bezel", _screen((36, 36, 40))),
    ("tv_silver_bezel", _screen((172, 174, 178))),
    ("sofa_navy", _fabric((44, 60, 122))),
    ("sofa_burgundy", _fabric((142, 40, 50))),
    # scikit-image photographs.
    ("brick_skimage_photo", _skimage_photo("brick", (70, 36, 28), (214, 150, 120))),
    ("gravel_skimage_photo", _skimage_photo("gravel", (60, 56, 50), (210, 200, 184))),
    ("plant_grass_skimage_photo", _skimage_photo("grass", (14, 40, 12), (120, 190, 80))),
)

MATERIAL_NAMES: tuple[str, ...] = tuple(name for name, _ in _REGISTRY)
NUM_MATERIALS = len(MATERIAL_NAMES)
_ID = {name: i for i, name in enumerate(MATERIAL_NAMES)}


def material_id(name: str) -> int:
  """Atlas id of a material name; ValueError naming the known materials if unknown."""
  if name not in _ID:
    raise ValueError(f"unknown material {name!r}; known: {', '.join(MATERIAL_NAMES)}")
  return _ID[name]


def _ids(*names: str) -> tuple[int, ...]:
  return tuple(material_id(n) for n in names)


def _by_room(**per_type: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
  """Key a per-room-type table by ROOM_TYPES index (as stored in Scene.room_type)."""
  return {ROOM_TYPES.index(t): ids for t, ids in per_type.items()}


_PAINT = _ids("plaster_white", "plaster_cream", "plaster_sage", "plaster_blue",
              "plaster_terracotta", "plaster_grey", "plaster_sky_photo")
_PAPER = _ids("wallpaper_sand_stripes", "wallpaper_green_stripes", "wallpaper_blue_pinstripe")

# Wall materials each room type may take (ROOM_TYPES index -> atlas ids).
WALL_MATERIALS: dict[int, tuple[int, ...]] = _by_room(
    living=_PAINT + _PAPER + _ids("brick_red", "stone_photo", "brick_skimage_photo"),
    bedroom=_PAINT + _PAPER,
    kitchen=_ids("wall_tiles_white", "plaster_white", "plaster_cream", "brick_red",
                 "brick_skimage_photo"),
    bathroom=_ids("wall_tiles_white", "plaster_white", "plaster_blue", "stone_photo"),
    corridor=_PAINT + _ids("wallpaper_sand_stripes"),
    office=_PAINT + _ids("wallpaper_blue_pinstripe", "brick_red", "brick_skimage_photo"),
)
# The unseen wall mass outside the apartment's footprint.
EXTERIOR_WALL = material_id("plaster_white")

# Floor materials each room type may take (ROOM_TYPES index -> atlas ids).
FLOOR_MATERIALS: dict[int, tuple[int, ...]] = _by_room(
    living=_ids("wood_oak", "wood_walnut", "wood_grey", "carpet_beige", "carpet_grey"),
    bedroom=_ids("wood_oak", "wood_grey", "carpet_beige", "carpet_blue", "carpet_grey"),
    kitchen=_ids("tiles_white", "tiles_checker", "tiles_terracotta", "slate_photo",
                 "gravel_skimage_photo"),
    bathroom=_ids("tiles_white", "tiles_checker", "slate_photo"),
    corridor=_ids("wood_oak", "wood_walnut", "slate_photo", "tiles_terracotta",
                  "gravel_skimage_photo"),
    office=_ids("wood_oak", "wood_walnut", "carpet_grey", "carpet_blue"),
)

CEILING_MATERIALS: tuple[int, ...] = _ids("ceiling_plaster", "ceiling_panels")

# Object materials per category (CATEGORIES index 1..6 -> atlas ids).
OBJECT_MATERIALS: dict[int, tuple[int, ...]] = {
    CATEGORIES.index("chair"): _ids("chair_oak", "chair_walnut"),
    CATEGORIES.index("bed"): _ids("bed_rose", "bed_mustard"),
    CATEGORIES.index("plant"): _ids("plant_leaves", "plant_leaves_dark",
                                    "plant_grass_skimage_photo"),
    CATEGORIES.index("toilet"): _ids("toilet_ceramic"),
    CATEGORIES.index("tv"): _ids("tv_black_bezel", "tv_silver_bezel"),
    CATEGORIES.index("sofa"): _ids("sofa_navy", "sofa_burgundy"),
}


def _build(index: int, size: int) -> np.ndarray:
  """One material tile, uint8 [size, size, 3]; its noise depends only on its own name."""
  name, builder = _REGISTRY[index]
  rng = np.random.default_rng([_SEED, zlib.crc32(name.encode())])
  n = max(_BASE, size)
  img = np.clip(builder(rng, n), 0, 255).astype(np.uint8)
  if n != size:
    img = np.asarray(Image.fromarray(img).resize((size, size), Image.Resampling.BOX))
  return img


def atlas(size: int = 64) -> np.ndarray:
  """The texture atlas, uint8 RGBA [NUM_MATERIALS + len(sprites.NAMES), size, size, 4],
  identical on every call: the materials (alpha 255), then the object sprites
  (`sprites.py`; alpha 0 or 255, their atlas ids `sprite_id`).

  Args:
    size: tile side in texels (the tiles are drawn at 256 and box-filtered down, or drawn at
      `size` directly when it is larger).

  Returns:
    A read-only array; index 0 is the reserved flat grey of "no material".
  """
  if not isinstance(size, (int, np.integer)) or size < 4:
    raise ValueError(f"atlas: size must be an int >= 4, got {size!r}")
  return _atlas(int(size))  # one cache key per size, however the size was passed.


def _downsized_rgba(img: np.ndarray, size: int) -> np.ndarray:
  """A float RGBA [n, n, 4] image box-filtered to uint8 [size, size, 4], colours weighted by
  coverage and the alpha cut at one half (the renderer's cut-outs are binary)."""
  n = img.shape[0]
  if n != size:
    f = n // size
    blocks = img.reshape(size, f, size, f, 4)
    a = blocks[..., 3:].mean(axis=(1, 3)) / 255.0
    rgb = (blocks[..., :3] * blocks[..., 3:]).mean(axis=(1, 3)) / np.maximum(255.0 * a, 1e-6)
    img = np.concatenate([rgb, 255.0 * a], axis=-1)
  alpha = np.where(img[..., 3] >= 127.5, 255.0, 0.0)
  return np.concatenate([np.clip(img[..., :3], 0, 255), alpha[..., None]], -1).astype(np.uint8)


# The material families the object sprites are painted with.
SPRITE_FILLS = types.SimpleNamespace(wood=_wood, fabric=_fabric, leaves=_leaves,
                                     ceramic=_ceramic, screen=_screen)


def sprite_id(name: str) -> int:
  """The atlas id of an object sprite (`sprites.NAMES`; after the materials)."""
  if name not in sprites.NAMES:
    raise ValueError(f"unknown sprite {name!r}; known: {', '.join(sprites.NAMES)}")
  return NUM_MATERIALS + sprites.NAMES.index(name)


@functools.lru_cache(maxsize=8)
def _atlas(size: int) -> np.ndarray:
  opaque = np.full((size, size, 1), 255, np.uint8)
  tiles = [np.concatenate([_build(i, size), opaque], -1) for i in range(NUM_MATERIALS)]
  n = max(_BASE, size)
  tiles += [_downsized_rgba(sprites.draw(name, n, SPRITE_FILLS), size)
            for name in sprites.NAMES]
  tiles = np.stack(tiles)
  tiles.flags.writeable = False  # shared through the cache: callers must not mutate it.
  return tiles
