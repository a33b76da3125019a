"""The vcbench-nav renderer: a pure-JAX grid ray caster (RGB, depth, semantics).

Walls are the scene's wall cells, extruded from floor to ceiling; objects are boxes of their
category's height standing on their cells. For every image column one ray is marched through
the grid by DDA (one cell boundary per step, a fixed number of steps so the loop is a plain
`fori_loop`); it records the first wall it hits and the first object run it crosses (entry and
exit distance). Every pixel row then solves for what its ray meets first -- object front face,
object top, wall, floor or ceiling -- in closed form, and all textured pixels are fetched from
the material atlas with one gather. No Python runs per frame: `render` is jittable and vmaps
over agents.

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


@dataclasses.dataclass(frozen=True)
class Camera:
  """Static camera settings (hashable, so they can be jit-static).

  height, width: image size in pixels (4..1024).
  hfov: horizontal field of view in degrees (0 < hfov < 180); the default is RoboTHOR's 79.
  max_depth: depth is clipped to this many metres.
  max_steps: DDA cell steps per ray; 0 = enough to cross the grid diagonally.
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
  zeros_f = jnp.zeros_like(angles)
  zeros_i = jnp.zeros_like(angles, jnp.int32)
  far = jnp.full_like(angles, float(steps + 1))
  init = dict(mx=mx, my=my, sx=side_x, sy=side_y, hit=jnp.zeros_like(angles, bool),
              wall_t=far, wall_mat=zeros_i + 1, wall_side=zeros_i,
              obj_state=zeros_i, obj_inst=zeros_i - 1, obj_t0=far, obj_t1=far, obj_side=zeros_i)

  def body(_, c):
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

  c = jax.lax.fori_loop(0, steps, body, init)
  m = lambda t: t * sc.CELL
  return dict(wall_t=m(c["wall_t"]), wall_mat=c["wall_mat"], wall_side=c["wall_side"],
              obj_inst=c["obj_inst"], obj_t0=m(c["obj_t0"]), obj_t1=m(c["obj_t1"]),
              obj_side=c["obj_side"])


def _frac(x):
  return x - jnp.floor(x)


def _face_u(pos, direction, t, side):
  """Texture u along a vertical face hit at horizontal distance t."""
  hit = pos + t[..., None] * direction
  return _frac(jnp.where(side == 0, hit[..., 1], hit[..., 0]) / _TEX_METRES)


def render(scene: sc.Scene, atlas: jax.Array, pos: jax.Array, heading: jax.Array,
           cam: Camera, sensors: tuple[str, ...] = SENSORS) -> dict[str, jax.Array]:
  """Renders one egocentric view.

  Args:
    scene: one Scene (no batch axis).
    atlas: uint8 [M, T, T, 3] material textures (`textures.atlas`).
    pos: float32 [2] camera (x, y) in metres; heading: float32 [] radians.
    cam: the static Camera.
    sensors: which of 'rgb' (uint8 [H, W, 3]), 'depth' (float32 [H, W, 1], metres),
      'semantic' (int32 [H, W], `scene.SEM_*` labels) to return; also always
      'instance' (int32 [H, W], object instance or -1) when 'semantic' is asked for.
  """
  unknown = set(sensors) - set(SENSORS)
  if unknown:
    raise ValueError(f"render: unknown sensors {sorted(unknown)}; valid: {SENSORS}.")
  offsets = jnp.asarray(_column_offsets(cam))                       # [W]
  angles = heading + offsets
  rays = cast_rays(scene, pos, angles, cam.steps(scene.grid_size))
  cos_off = jnp.cos(offsets)
  k = jnp.asarray(_row_slopes(cam))[:, None]                       # [H, 1]
  h0 = sc.CAMERA_HEIGHT
  obj = jnp.maximum(rays["obj_inst"], 0)
  has_obj = rays["obj_inst"] >= 0
  obj_h = jnp.where(has_obj, jnp.asarray(sc.CATEGORY_HEIGHT, jnp.float32)[scene.inst_cat[obj]], 0.0)
  # z-depth of each column's hits, then the height each row's ray has when it gets there.
  zw, z0, z1 = (rays[n] * cos_off for n in ("wall_t", "obj_t0", "obj_t1"))
  at_wall = h0 + zw * k
  at_front = h0 + z0 * k
  z_floor = h0 / jnp.maximum(-k, 1e-6)
  z_ceil = (sc.WALL_HEIGHT - h0) / jnp.maximum(k, 1e-6)
  z_top = (h0 - obj_h) / jnp.maximum(-k, 1e-6)
  front = has_obj & (at_front >= 0.0) & (at_front <= obj_h)
  top = has_obj & (k < 0) & (obj_h < h0) & (z_top >= z0) & (z_top <= z1)
  wall = (at_wall >= 0.0) & (at_wall <= sc.WALL_HEIGHT)
  region = jnp.where(front, _FRONT, jnp.where(top, _TOP, jnp.where(
      wall, _WALL, jnp.where(k < 0, _FLOOR, _CEIL))))
  z = jnp.select([region == _FRONT, region == _TOP, region == _WALL, region == _FLOOR],
                 [z0 + 0 * k, z_top, zw + 0 * k, z_floor + 0 * zw], z_ceil + 0 * zw)
  out = {}
  if "depth" in sensors:
    out["depth"] = jnp.clip(z, 0.0, cam.max_depth)[..., None].astype(jnp.float32)
  if "semantic" in sensors:
    cat = scene.inst_cat[obj]
    is_obj = (region == _FRONT) | (region == _TOP)
    out["semantic"] = jnp.select(
        [is_obj, region == _WALL, region == _FLOOR],
        [sc.SEM_OBJECT0 + cat - 1 + 0 * region, sc.SEM_WALL, sc.SEM_FLOOR],
        sc.SEM_CEILING).astype(jnp.int32)
    out["instance"] = jnp.where(is_obj, rays["obj_inst"] + 0 * region, -1).astype(jnp.int32)
  if "rgb" in sensors:
    out["rgb"] = _shade(scene, atlas, pos, angles, cos_off, rays, region, z, k, obj)
  return out


def _shade(scene, atlas, pos, angles, cos_off, rays, region, z, k, obj):
  """Texture lookup (one gather) and distance / face shading."""
  direction = jnp.stack([jnp.cos(angles), jnp.sin(angles)], -1)     # [W, 2]
  h0 = sc.CAMERA_HEIGHT
  # Horizontal point each pixel's ray reaches, for floor, ceiling and object tops.
  t = z / cos_off
  xy = pos + t[..., None] * direction                                # [H, W, 2]
  g = scene.grid_size
  cell = jnp.clip(jnp.floor(xy / sc.CELL).astype(jnp.int32), 0, g - 1)
  floor_mat = scene.floor[cell[..., 1], cell[..., 0]]
  height = h0 + z * k
  u_wall = _face_u(pos, direction, rays["wall_t"], rays["wall_side"])
  u_obj = _face_u(pos, direction, rays["obj_t0"], rays["obj_side"])
  u_flat, v_flat = _frac(xy[..., 0] / _TEX_METRES), _frac(xy[..., 1] / _TEX_METRES)
  v_face = 1.0 - _frac(height / _TEX_METRES)
  is_front, is_top, is_wall = region == _FRONT, region == _TOP, region == _WALL
  inst_mat = scene.inst_mat[obj]
  mat = jnp.select([is_front | is_top, is_wall, region == _FLOOR],
                   [inst_mat + 0 * region, rays["wall_mat"] + 0 * region, floor_mat],
                   scene.ceiling + 0 * region)
  u = jnp.select([is_front, is_wall], [u_obj + 0 * v_face, u_wall + 0 * v_face], u_flat)
  # An object's texture spans its whole height (a TV's bezel frames the box), walls repeat.
  obj_h = jnp.asarray(sc.CATEGORY_HEIGHT, jnp.float32)[scene.inst_cat[obj]]
  v_obj = jnp.clip(1.0 - height / jnp.maximum(obj_h, 1e-3), 0.0, 1.0)
  v = jnp.where(is_front, v_obj, jnp.where(is_wall, v_face, v_flat))
  atlas = jnp.asarray(atlas)
  size = atlas.shape[1]
  iu = jnp.clip((u * size).astype(jnp.int32), 0, size - 1)
  iv = jnp.clip((v * size).astype(jnp.int32), 0, size - 1)
  texel = atlas.reshape(-1, 3)[(mat * size + iv) * size + iu].astype(jnp.float32)
  side = jnp.where(is_front, rays["obj_side"], jnp.where(is_wall, rays["wall_side"], 0))
  light = (0.35 + 0.65 * jnp.exp(-z / 6.0)) * jnp.where(side == 1, 0.8, 1.0)
  light = light * jnp.where(is_top, 1.1, 1.0)
  return jnp.clip(texel * light[..., None], 0, 255).astype(jnp.uint8)
