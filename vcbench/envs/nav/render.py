"""The vcbench-nav renderer: a pure-JAX grid ray caster (RGB, depth, semantics).

Walls are the scene's wall cells, extruded from floor to ceiling; objects stand on their cells
up to their category's height, either as textured boxes or, when the instance has a sprite
(`Scene.inst_sprite`, `sprites.py`), as its category's cut-out drawn on the faces the rays
enter: a column sees the sprite's one opaque run of texel rows there (the tile's alpha), and
through it, above and below, whatever lies behind (sprite objects have no top). For every
image column one ray is marched through the grid by DDA (one cell boundary per step, at most
`Camera.steps` of them, in a `while_loop`); it records the first wall it hits and the first
object run it crosses (entry and exit distance); the loop ends early once every column has hit a wall. Every pixel row then
solves for what its ray meets first -- object front face, object top, wall, floor or ceiling --
in closed form, and all textured pixels are fetched from the material atlas with one gather.
Light falls off with z-depth as exp(-z / 12 m); faces normal to y are 20% darker so corners
read, object tops 10% brighter. No Python runs per frame: `render` is jittable and vmaps over
agents.

Speed notes (XLA on CPU): per-column values are recomputed for every pixel they reach, so
per-column work is kept to products and selects (ray directions by the angle-sum rule, not
cos/sin); the texel is one packed uint32 per pixel so the per-pixel work does not run once per
colour channel; and the light is one exp per pixel, whose fusion XLA then keeps separate.

Conventions: world x along grid columns, y along rows (metres); heading 0 looks along +x and
positive turns are clockwise on the top-down map, i.e. to the agent's right, so image columns
run left to right with increasing angle. Depth is z-depth in metres (as habitat's depth
sensor), clipped to `max_depth`. The camera is level (no pitch): LOOK_UP / LOOK_DOWN are not
supported. Only the first object run along a column is drawn: an object hidden behind a
nearer, lower one in the same column is not shown above it (an approximation).
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.envs.nav import scene as sc

SENSORS = ("rgb", "depth", "semantic")
_TEX_METRES = 1.0          # one texture tile spans a metre of wall or floor.
_FRONT, _TOP, _WALL, _FLOOR, _CEIL = range(5)
_FALLOFF = 12.0            # metres for the light to fall to 1/e.
_LOG_SIDE = math.log(0.8)  # faces normal to y.
_LOG_TOP = math.log(1.1)   # object tops.


@dataclasses.dataclass(frozen=True)
class Camera:
  """Static camera settings (hashable, so they can be jit-static).

  height, width: image size in pixels (4..1024).
  hfov: horizontal field of view in degrees (0 < hfov < 180); the default is RoboTHOR's 79.
  max_depth: depth is clipped to this many metres.
  max_steps: at most this many DDA cell steps per ray; 0 = enough to cross the grid
    diagonally.
  """
  height: int = 64
  width: int = 64
  hfov: float = 79.0
  max_depth: float = 10.0
  max_steps: int = 0

  def __post_init__(self):
    for name in ("height", "width"):
      v = getattr(self, name)
      if not isinstance(v, (int, np.integer)) or not 4 <= v <= 1024:
        raise ValueError(f"Camera.{name} must be an int in [4, 1024] pixels, got {v!r}.")
    if not 0.0 < float(self.hfov) < 180.0:
      raise ValueError(f"Camera.hfov must be in (0, 180) degrees, got {self.hfov!r}.")
    if not float(self.max_depth) > 0.0:
      raise ValueError(f"Camera.max_depth must be > 0 metres, got {self.max_depth!r}.")

  @property
  def focal(self) -> float:
    """Focal length in pixels (square pixels)."""
    return (self.width / 2.0) / math.tan(math.radians(self.hfov) / 2.0)

  def steps(self, grid_size: int) -> int:
    return self.max_steps or 2 * grid_size + 2


def _column_offsets(cam: Camera) -> np.ndarray:
  x = np.arange(cam.width) + 0.5 - cam.width / 2.0
  return np.arctan(x / cam.focal).astype(np.float32)


def _row_slopes(cam: Camera) -> np.ndarray:
  """tan of each row's elevation angle (positive up)."""
  y = cam.height / 2.0 - (np.arange(cam.height) + 0.5)
  return (y / cam.focal).astype(np.float32)


def _cell_codes(scene: sc.Scene) -> jax.Array:
  """One int per cell: wall material (> 0), -(instance + 1) for objects (< 0), 0 free."""
  return jnp.where(scene.wall > 0, scene.wall, -(scene.obj_inst + 1))


def cast_rays(scene: sc.Scene, pos: jax.Array, angles: jax.Array, steps: int):
  """DDA through the grid from `pos` (metres) along `angles` [R] (radians).

  Returns a dict of [R] arrays: wall_t / obj_t0 / obj_t1 (horizontal distance in metres to the
  wall hit, object entry and exit), wall_mat, wall_side / obj_side (0: the hit face is normal
  to x, 1: normal to y), obj_inst (-1 when the ray crosses no object).
  """
  codes = _cell_codes(scene)
  g = codes.shape[-1]
  p = pos / sc.CELL
  dx, dy = jnp.cos(angles), jnp.sin(angles)
  inv_x = jnp.where(jnp.abs(dx) < 1e-9, 1e9, jnp.abs(1.0 / jnp.where(dx == 0, 1.0, dx)))
  inv_y = jnp.where(jnp.abs(dy) < 1e-9, 1e9, jnp.abs(1.0 / jnp.where(dy == 0, 1.0, dy)))
  mx = jnp.floor(p[0]).astype(jnp.int32) + jnp.zeros_like(angles, jnp.int32)
  my = jnp.floor(p[1]).astype(jnp.int32) + jnp.zeros_like(angles, jnp.int32)
  step_x = jnp.where(dx < 0, -1, 1)
  step_y = jnp.where(dy < 0, -1, 1)
  side_x = jnp.where(dx < 0, p[0] - mx, mx + 1.0 - p[0]) * inv_x
  side_y = jnp.where(dy < 0, p[1] - my, my + 1.0 - p[1]) * inv_y
  zeros_i = jnp.zeros_like(angles, jnp.int32)
  far = jnp.full_like(angles, float(steps + 1))
  init = dict(mx=mx, my=my, sx=side_x, sy=side_y, hit=jnp.zeros_like(angles, bool),
              wall_t=far, wall_mat=zeros_i + 1, wall_side=zeros_i,
              obj_state=zeros_i, obj_inst=zeros_i - 1, obj_t0=far, obj_t1=far, obj_side=zeros_i)

  def body(c):
    go_x = c["sx"] < c["sy"]
    t = jnp.where(go_x, c["sx"], c["sy"])       # distance (cells) to the boundary crossed now
    side = jnp.where(go_x, 0, 1)
    mx = jnp.clip(c["mx"] + jnp.where(go_x, step_x, 0), 0, g - 1)
    my = jnp.clip(c["my"] + jnp.where(go_x, 0, step_y), 0, g - 1)
    code = codes[my, mx]
    new_wall = ~c["hit"] & (code > 0)
    inst = jnp.where(code < 0, -code - 1, -1)
    enter = ~c["hit"] & (c["obj_state"] == 0) & (inst >= 0)
    leave = (c["obj_state"] == 1) & (new_wall | ((inst != c["obj_inst"]) & ~c["hit"]))
    return dict(
        mx=mx, my=my,
        sx=c["sx"] + jnp.where(go_x, inv_x, 0.0), sy=c["sy"] + jnp.where(go_x, 0.0, inv_y),
        hit=c["hit"] | new_wall,
        wall_t=jnp.where(new_wall, t, c["wall_t"]),
        wall_mat=jnp.where(new_wall, code, c["wall_mat"]),
        wall_side=jnp.where(new_wall, side, c["wall_side"]),
        obj_state=jnp.where(enter, 1, jnp.where(leave, 2, c["obj_state"])),
        obj_inst=jnp.where(enter, inst, c["obj_inst"]),
        obj_t0=jnp.where(enter, t, c["obj_t0"]),
        obj_t1=jnp.where(leave, t, c["obj_t1"]),
        obj_side=jnp.where(enter, side, c["obj_side"]))

  def unfinished(i_c):
    i, c = i_c
    return (i < steps) & ~jnp.all(c["hit"])   # steps after every wall hit change nothing.

  _, c = jax.lax.while_loop(unfinished, lambda i_c: (i_c[0] + 1, body(i_c[1])), (0, init))
  m = lambda t: t * sc.CELL
  return dict(wall_t=m(c["wall_t"]), wall_mat=c["wall_mat"], wall_side=c["wall_side"],
              obj_inst=c["obj_inst"], obj_t0=m(c["obj_t0"]), obj_t1=m(c["obj_t1"]),
              obj_side=c["obj_side"])


def _along_face(pos, direction, t, side):
  """Coordinate (metres) along a vertical face hit at horizontal distance t."""
  hit = pos + t[..., None] * direction
  return jnp.where(side == 0, hit[..., 1], hit[..., 0])


def render(scene: sc.Scene, atlas: jax.Array, pos: jax.Array, heading: jax.Array,
           cam: Camera, sensors: tuple[str, ...] = SENSORS) -> dict[str, jax.Array]:
  """Renders one egocentric view.

  Args:
    scene: one Scene (no batch axis).
    atlas: uint8 [M, T, T, 3] material textures (`textures.atlas`); T a power of two.
    pos: float32 [2] camera (x, y) in metres; heading: float32 [] radians.
    cam: the static Camera.
    sensors: which of 'rgb' (uint8 [H, W, 3]), 'depth' (float32 [H, W, 1], metres),
      'semantic' (int32 [H, W], `scene.SEM_*` labels) to return; also always
      'instance' (int32 [H, W], object instance or -1) when 'semantic' is asked for.
  """
  unknown = set(sensors) - set(SENSORS)
  if unknown:
    raise ValueError(f"render: unknown sensors {sorted(unknown)}; valid: {SENSORS}.")
  offsets = _column_offsets(cam)                                     # [W], host constants
  rays = cast_rays(scene, pos, heading + offsets, cam.steps(scene.grid_size))
  col = _columns(scene, atlas, pos, heading, rays, offsets)
  row = _rows(cam)
  region, z = _regions(col, row)
  out = {}
  if "depth" in sensors:
    out["depth"] = jnp.minimum(z, cam.max_depth)[..., None]
  if "semantic" in sensors:
    is_obj = region <= _TOP
    out["semantic"] = jnp.where(is_obj, col["obj_sem"], jnp.where(
        region == _WALL, sc.SEM_WALL, jnp.where(region == _FLOOR, sc.SEM_FLOOR, sc.SEM_CEILING)))
    out["instance"] = jnp.where(is_obj, rays["obj_inst"], -1)
  if "rgb" in sensors:
    out["rgb"] = _shade(scene, atlas, pos, rays, col, row, region, z)
  return out


def _columns(scene, atlas, pos, heading, rays, offsets):
  """Per-column [W] quantities: z-depths of the hits, the object's height, label, material,
  and the heights its face covers (all of it for a box; a sprite's span, `sprite_spans`)."""
  cos_off, sin_off = np.cos(offsets), np.sin(offsets)
  obj = jnp.maximum(rays["obj_inst"], 0)
  has_obj = rays["obj_inst"] >= 0
  cat = scene.inst_cat[obj]
  obj_h = jnp.where(has_obj, jnp.asarray(sc.CATEGORY_HEIGHT, jnp.float32)[cat], 0.0)
  log_shade = lambda side: jnp.where(side == 1, _LOG_SIDE, 0.0)
  col = dict(
      cos_off=cos_off, sin_off=sin_off, sec=1.0 / cos_off,
      zw=rays["wall_t"] * cos_off, z0=rays["obj_t0"] * cos_off, z1=rays["obj_t1"] * cos_off,
      has_obj=has_obj, obj_h=obj_h, inv_h=1.0 / jnp.maximum(obj_h, 1e-3),
      obj_sem=(sc.SEM_OBJECT0 + cat - 1).astype(jnp.int32), obj_mat=scene.inst_mat[obj],
      obj_shade=log_shade(rays["obj_side"]), wall_shade=log_shade(rays["wall_side"]))
  col["direction"] = _directions(heading, col)
  col["obj_along"] = _along_face(pos, col["direction"], rays["obj_t0"], rays["obj_side"])
  sprite = scene.inst_sprite[obj]
  shaped = has_obj & (sprite > 0)
  # Where the ray enters the face, as a fraction across the footprint: the sprite's column.
  box = scene.inst_box[obj]
  lo = jnp.where(rays["obj_side"] == 0, box[:, 1], box[:, 0])
  hi = jnp.where(rays["obj_side"] == 0, box[:, 3], box[:, 2])
  size = atlas.shape[1]
  u = jnp.clip(((col["obj_along"] - lo) / jnp.maximum(hi - lo, 1e-6) * size).astype(jnp.int32),
               0, size - 1)
  first, last = (sprite_spans(atlas)[sprite, u].T).astype(jnp.float32)
  col.update(
      shaped=shaped, sprite_texel=sprite * (size * size) + u,
      span_lo=jnp.where(shaped, obj_h * (1.0 - (last + 1.0) / size), 0.0),
      span_hi=jnp.where(shaped, obj_h * (1.0 - first / size), obj_h),
      top_ok=has_obj & ~shaped & (obj_h < sc.CAMERA_HEIGHT))  # only tops below the eye.
  return col


def sprite_spans(atlas) -> jax.Array:
  """(first, last) opaque texel row of every column of every tile, int32 [M, T, 2]: a tile
  without alpha is opaque everywhere. Computed inside the render: vmapped over a batch of
  views, it runs once per batch."""
  atlas = jnp.asarray(atlas)
  m, t = atlas.shape[:2]
  if atlas.shape[-1] != 4:
    return jnp.broadcast_to(jnp.array([0, t - 1], jnp.int32), (m, t, 2))
  opaque = atlas[..., 3] > 127                                  # [M, rows, cols]
  rows = jnp.arange(t, dtype=jnp.int32)[None, :, None]
  first = jnp.min(jnp.where(opaque, rows, t), axis=1)
  last = jnp.max(jnp.where(opaque, rows, -1), axis=1)
  return jnp.stack([first, last], axis=-1)


def _rows(cam):
  """Per-row [H, 1] constants of the level camera: slope, and floor / ceiling z-depth."""
  k = _row_slopes(cam)[:, None]
  h0 = sc.CAMERA_HEIGHT
  inv_down = np.where(k < 0, -1.0 / np.minimum(k, -1e-6), 1e6).astype(np.float32)
  inv_up = np.where(k > 0, 1.0 / np.maximum(k, 1e-6), 1e6).astype(np.float32)
  z_flat = np.where(k < 0, h0 * inv_down, (sc.WALL_HEIGHT - h0) * inv_up).astype(np.float32)
  return dict(k=k, down=k < 0, inv_down=inv_down, z_flat=z_flat)


def _regions(col, row):
  """What each pixel sees first (_FRONT/_TOP/_WALL/_FLOOR/_CEIL) and its z-depth, [H, W]."""
  h0, k = sc.CAMERA_HEIGHT, row["k"]
  at_wall = h0 + col["zw"] * k           # the height each row's ray has at the wall.
  at_front = h0 + col["z0"] * k
  z_top = (h0 - col["obj_h"]) * row["inv_down"]
  front = col["has_obj"] & (at_front >= col["span_lo"]) & (at_front <= col["span_hi"])
  top = col["top_ok"] & row["down"] & (z_top >= col["z0"]) & (z_top <= col["z1"])
  wall = (at_wall >= 0.0) & (at_wall <= sc.WALL_HEIGHT)
  flat = jnp.where(row["down"], _FLOOR, _CEIL)
  region = jnp.where(front, _FRONT, jnp.where(top, _TOP, jnp.where(wall, _WALL, flat)))
  z = jnp.where(front, col["z0"], jnp.where(top, z_top, jnp.where(wall, col["zw"], row["z_flat"])))
  return region, z


def _directions(heading, col):
  """Unit ray direction per column, [W, 2], by the angle-sum rule (no per-pixel cos/sin)."""
  c, s = jnp.cos(heading), jnp.sin(heading)
  return jnp.stack([c * col["cos_off"] - s * col["sin_off"],
                    s * col["cos_off"] + c * col["sin_off"]], -1)


def _shade(scene, atlas, pos, rays, col, row, region, z):
  """Texture lookup (one gather of packed texels) and distance / face shading."""
  h0, k = sc.CAMERA_HEIGHT, row["k"]
  size = atlas.shape[1]
  if size & (size - 1):
    raise ValueError(f"render: atlas tiles must be a power of two in size, got {size}.")
  texel = lambda metres: jnp.floor(metres * (size / _TEX_METRES)).astype(jnp.int32) & (size - 1)
  direction = col["direction"]
  # Vertical faces: the texel column is per image column, the texel row per pixel.
  wall_base = rays["wall_mat"] * (size * size) + texel(
      _along_face(pos, direction, rays["wall_t"], rays["wall_side"]))
  obj_base = jnp.where(col["shaped"], col["sprite_texel"],
                       col["obj_mat"] * (size * size) + texel(col["obj_along"]))
  v_wall = (size - 1) - texel(h0 + col["zw"] * k)                  # walls repeat upwards,
  v_obj = jnp.clip(((1.0 - (h0 + col["z0"] * k) * col["inv_h"]) * size).astype(jnp.int32),
                   0, size - 1)                                     # an object's spans it.
  # Floor, ceiling and object tops: the horizontal point each pixel's ray reaches.
  t = z * col["sec"]
  x, y = pos[0] + t * direction[:, 0], pos[1] + t * direction[:, 1]
  g = scene.grid_size
  cell = (jnp.clip((y * (1 / sc.CELL)).astype(jnp.int32), 0, g - 1) * g
          + jnp.clip((x * (1 / sc.CELL)).astype(jnp.int32), 0, g - 1))
  floor_mat = scene.floor.reshape(-1).at[cell].get(mode="promise_in_bounds")
  is_front, is_wall, is_top = region == _FRONT, region == _WALL, region == _TOP
  flat_mat = jnp.where(is_top, col["obj_mat"], jnp.where(region == _FLOOR, floor_mat,
                                                           scene.ceiling))
  flat = (flat_mat * size + texel(y)) * size + texel(x)
  idx = jnp.where(is_front, obj_base + v_obj * size,
                  jnp.where(is_wall, wall_base + v_wall * size, flat))
  log_shade = jnp.where(is_front, col["obj_shade"], jnp.where(
      is_wall, col["wall_shade"], jnp.where(is_top, _LOG_TOP, 0.0)))
  light = jnp.exp(log_shade - z / _FALLOFF)
  packed = _packed(atlas).at[idx].get(mode="promise_in_bounds")
  channels = (packed[..., None] >> jnp.array([0, 8, 16], jnp.uint32)) & 255
  return jnp.minimum(channels.astype(jnp.float32) * light[..., None], 255.0).astype(jnp.uint8)


def _packed(atlas):
  """The atlas as one uint32 per texel, R | G << 8 | B << 16 (alpha is in `sprite_spans`)."""
  atlas = jnp.asarray(atlas)
  a = atlas.reshape(-1, atlas.shape[-1]).astype(jnp.uint32)
  return a[:, 0] | (a[:, 1] << 8) | (a[:, 2] << 16)
