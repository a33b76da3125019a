"""Camera views of vcbench-nav apartments, and what each one shows, for the G-VUE generators.

The G-VUE tasks generated from vcbench-nav (`nav_tasks.py`) all start here: a `World` is a set of
apartments (by their generator seeds) with a camera; `pose_stream` draws camera poses in them,
`render_views` renders poses in batches (one jitted, vmapped call per `CHUNK` views) and
`view_facts` reads, on the host, what a view shows: every object instance with its visible
pixels, box, category, material and room, the room type most of the visible floor belongs to,
and whether the view is informative at all. The task builders turn these facts into targets and
text, so every label is a function of the renderer's own instance and semantic maps.

Definitions every task shares:
  informative   at most MAX_NEAR_FRACTION of the pixels are wall nearer than NEAR_METRES (a
                camera facing a wall from close by sees nothing but a texture).
  visible       an instance with at least `min_pixels(size)` pixels in the instance map.
  glimpsed      an instance with some pixels but fewer than that; text tasks reject views with
                a glimpsed instance, since whether it "is there" would be a matter of opinion.
  view room     the room type of at least ROOM_SHARE of the visible floor pixels (each pixel
                projected to its floor cell), else none (-1: the view straddles rooms).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.envs import nav
from vcbench.envs.nav import render as rd
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import textures

GRID_SIZE = 32            # apartment grid side in cells (8 m), as the nav benchmarks use.
# G-VUE's views keep the textured boxes its published numbers were measured with (vcbench-nav's
# own tasks draw objects as category sprites).
OBJECTS = "boxes"
MAX_DEPTH = 10.0          # metres: the depth clip (G-VUE's NYUv2 range ends there too).
CHUNK = 64                # views per jitted render call (a fixed shape: one compile per size).
NEAR_METRES = 1.0
MAX_NEAR_FRACTION = 0.5
MIN_PIXEL_FRACTION = 0.01  # of the image, for an instance to count as visible ...
MIN_PIXELS = 4             # ... and never fewer pixels than this.
ROOM_SHARE = 0.7
AIM_PROBABILITY = 0.75    # share of poses aimed at an object (the rest look anywhere).
AIM_RANGE = (0.75, 4.0)   # metres from the camera to the aimed-at object's centre.
AIM_JITTER = 0.6          # of half the field of view: the object need not sit in the centre.
POSITION_JITTER = 0.1     # metres around a navigable cell centre (inside the free cell).
WALK_STEP = 0.15          # metres a trajectory moves per frame ...
WALK_TURN = 0.12          # ... and the standard deviation of its heading change (radians).


@dataclasses.dataclass(frozen=True)
class Thing:
  """One visible object instance in a view."""
  inst: int                  # instance index in its apartment.
  category: int              # scene.CATEGORIES index (1..6).
  material: int              # texture atlas id.
  room_type: int             # scene.ROOM_TYPES index of the room it stands in.
  pixels: int
  box: tuple[float, float, float, float]   # (x0, y0, x1, y1) in [0, 1], pixel edges.
  centre_x: float            # mean column of its pixels, in [0, 1].
  depth: float               # its nearest visible pixel, metres.


@dataclasses.dataclass(frozen=True)
class View:
  """One rendered view and its facts (arrays are the renderer's, at the world's size)."""
  scene: str
  apartment: int             # index into the world's apartments.
  position: np.ndarray       # float32 [2] (x, y) metres.
  heading: float             # radians, the renderer's convention.
  rgb: np.ndarray            # uint8 [H, W, 3]
  depth: np.ndarray          # float32 [H, W] z-depth metres, clipped at the camera's max depth.
  semantic: np.ndarray       # int32 [H, W] scene.SEM_* labels.
  instance: np.ndarray       # int32 [H, W] instance index or -1.
  things: tuple[Thing, ...]  # visible instances, left to right by centre.
  glimpsed: bool
  room_type: int             # the view room, -1 if none.
  informative: bool


@dataclasses.dataclass(frozen=True, eq=False)
class World:
  """Apartments, the atlas and the camera one generator renders with,
  and per-apartment tables the pose sampler and the facts read (lists by apartment)."""
  seeds: tuple[int, ...]
  scenes: sc.Scene           # numpy, stacked on a leading axis.
  atlas: jax.Array
  camera: rd.Camera
  free: tuple[np.ndarray, ...]        # [F, 2] navigable cell centres (x, y) metres.
  centres: tuple[np.ndarray, ...]     # [K, 2] object footprint centres (x, y) metres.
  inst_room: tuple[np.ndarray, ...]   # [K] room type each object stands in.


def scene_name(seed: int) -> str:
  return f"vcbench-nav/apartment-{int(seed)}"


def make_world(split: str, count: int, size: int) -> World:
  """The first `count` apartments of the nav generator's `split` seed range, at `size` pixels.

  The nav generator's split seed ranges are disjoint, so worlds of different splits share no
  apartment.
  """
  scenes = nav.scene_pool(split, count, GRID_SIZE, OBJECTS)
  one = lambda a: jax.tree.map(lambda x: x[a], scenes)
  return World(seeds=tuple(int(s) for s in nav.scene_gen.split_seeds(split, count)),
               scenes=scenes,
               atlas=jnp.asarray(textures.atlas(_texture_size(size))),
               camera=rd.Camera(height=size, width=size, max_depth=MAX_DEPTH),
               free=tuple(_navigable_centres(one(a).navigable) for a in range(count)),
               centres=tuple(_instance_centres(one(a).obj_inst, one(a).inst_cat)
                             for a in range(count)),
               inst_room=tuple(_instance_room_types(one(a)) for a in range(count)))


def _texture_size(size: int) -> int:
  # About one texel per pixel at a metre's distance; larger atlases only cost memory.
  return 64 if size <= 128 else 128


def min_pixels(size: int) -> int:
  return max(MIN_PIXELS, int(math.ceil(MIN_PIXEL_FRACTION * size * size)))


# ---------------------------------------------------------------------------------------------
# Poses.

def _navigable_centres(scene_nav: np.ndarray) -> np.ndarray:
  rows, cols = np.nonzero(scene_nav)
  return np.stack([cols + 0.5, rows + 0.5], -1).astype(np.float64) * sc.CELL


def _instance_room_types(scene: sc.Scene) -> np.ndarray:
  """Room type of the room holding most of each used instance's cells, [K]."""
  used = int((scene.inst_cat > 0).sum())
  rooms = [np.bincount(scene.room[scene.obj_inst == k]).argmax() for k in range(used)]
  return scene.room_type[np.asarray(rooms, int)].astype(int)


def _instance_centres(obj_inst: np.ndarray, inst_cat: np.ndarray) -> np.ndarray:
  """Footprint centre (x, y) metres of each used instance slot, [K, 2] (K = used slots)."""
  used = int((inst_cat > 0).sum())
  centres = np.zeros((used, 2))
  for k in range(used):
    rows, cols = np.nonzero(obj_inst == k)
    centres[k] = ((cols.mean() + 0.5) * sc.CELL, (rows.mean() + 0.5) * sc.CELL)
  return centres


def _one_pose(rng: np.random.Generator, world: World, apt: int) -> tuple[np.ndarray, float]:
  """A free camera position in apartment `apt` and a heading, aimed at an object mostly."""
  free = world.free[apt]
  if rng.random() < AIM_PROBABILITY:
    centres = world.centres[apt]
    target = centres[rng.integers(len(centres))]
    dist = np.hypot(*(free - target).T)
    near = np.nonzero((dist >= AIM_RANGE[0]) & (dist <= AIM_RANGE[1]))[0]
    if len(near):
      pos = free[near[rng.integers(len(near))]] + rng.uniform(-1, 1, 2) * POSITION_JITTER
      dx, dy = target - pos
      half_fov = math.radians(world.camera.hfov) / 2
      return pos, math.atan2(dy, dx) + rng.uniform(-1, 1) * AIM_JITTER * half_fov
  pos = free[rng.integers(len(free))] + rng.uniform(-1, 1, 2) * POSITION_JITTER
  return pos, rng.uniform(-math.pi, math.pi)


def pose_stream(rng: np.random.Generator, world: World) -> Iterator[tuple[int, np.ndarray, float]]:
  """Endless (apartment, position, heading) candidates, the apartments in turn."""
  count = len(world.seeds)
  i = 0
  while True:
    apt = i % count
    pos, heading = _one_pose(rng, world, apt)
    yield apt, pos, heading
    i += 1


def walk(rng: np.random.Generator, world: World, apt: int,
         frames: int) -> tuple[np.ndarray, np.ndarray]:
  """A camera trajectory in apartment `apt`: positions [frames, 2] and headings [frames].

  Like a hand-held camera carried through the flat: WALK_STEP forward per frame with a
  wandering heading; where the next step would leave the navigable cells the walker stays and
  turns away by 90..180 degrees.
  """
  navigable = world.scenes.navigable[apt]
  free = world.free[apt]
  pos = free[rng.integers(len(free))].copy()
  heading = rng.uniform(-math.pi, math.pi)
  positions, headings = np.zeros((frames, 2)), np.zeros(frames)
  for f in range(frames):
    positions[f], headings[f] = pos, heading
    heading += rng.normal(0.0, WALK_TURN)
    step = pos + WALK_STEP * np.array([math.cos(heading), math.sin(heading)])
    row, col = (step[::-1] / sc.CELL).astype(int)
    if navigable[row, col]:
      pos = step
    else:
      heading += rng.choice([-1.0, 1.0]) * rng.uniform(math.pi / 2, math.pi)
  headings = (headings + math.pi) % (2 * math.pi) - math.pi
  return positions.astype(np.float32), headings.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Rendering.

@functools.partial(jax.jit, static_argnums=0)
def _render_batch(camera: rd.Camera, scenes: sc.Scene, atlas: jax.Array, pos: jax.Array,
                  heading: jax.Array) -> dict[str, jax.Array]:
  # One scene per view (gathered on the host), so the shapes, and the compile, do not depend
  # on how many apartments a world has.
  render = lambda scene, p, h: rd.render(scene, atlas, p, h, camera, ("rgb", "depth", "semantic"))
  return jax.vmap(render)(scenes, pos, heading)


def render_views(world: World, apt: Sequence[int], pos: np.ndarray,
                 heading: Sequence[float]) -> list[View]:
  """Renders the poses (in CHUNK batches, the last padded) and reads each view's facts."""
  apt = np.asarray(apt, np.int32)
  pos = np.asarray(pos, np.float32).reshape(-1, 2)
  heading = np.asarray(heading, np.float32)
  views = []
  for start in range(0, len(apt), CHUNK):
    idx = np.arange(start, start + CHUNK) % len(apt)   # pads with repeats, dropped below.
    scenes = jax.tree.map(lambda x: x[apt[idx]], world.scenes)
    out = jax.device_get(_render_batch(world.camera, scenes, world.atlas, pos[idx],
                                       heading[idx]))
    for j in range(min(CHUNK, len(apt) - start)):
      i = start + j
      views.append(view_facts(world, int(apt[i]), pos[i], float(heading[i]), out["rgb"][j],
                              out["depth"][j, ..., 0], out["semantic"][j], out["instance"][j]))
  return views


def view_stream(rng: np.random.Generator, world: World) -> Iterator[View]:
  """Endless informative views from `pose_stream`, rendered CHUNK at a time."""
  poses = pose_stream(rng, world)
  while True:
    batch = [next(poses) for _ in range(CHUNK)]
    apt, pos, heading = zip(*batch)
    for view in render_views(world, apt, np.stack(pos), heading):
      if view.informative:
        yield view


# ---------------------------------------------------------------------------------------------
# Facts.

def column_angles(camera: rd.Camera) -> np.ndarray:
  """Angle of each image column's ray from the optical axis (radians, left negative)."""
  x = np.arange(camera.width) + 0.5 - camera.width / 2.0
  return np.arctan(x / camera.focal)


def floor_cells(camera: rd.Camera, pos: np.ndarray, heading: float, depth: np.ndarray,
                floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(row, col) grid cell under each floor pixel, from its z-depth and its column's ray."""
  rows, cols = np.nonzero(floor)
  angle = column_angles(camera)[cols]
  reach = depth[rows, cols] / np.cos(angle)        # z-depth -> horizontal distance.
  x = pos[0] + reach * np.cos(heading + angle)
  y = pos[1] + reach * np.sin(heading + angle)
  return (np.floor(y / sc.CELL).astype(int), np.floor(x / sc.CELL).astype(int))


def _view_room(world: World, apt: int, pos, heading, depth, semantic) -> int:
  scene_room = world.scenes.room[apt]
  g = scene_room.shape[0]
  r, c = floor_cells(world.camera, pos, heading, depth, semantic == sc.SEM_FLOOR)
  room = scene_room[np.clip(r, 0, g - 1), np.clip(c, 0, g - 1)]
  room = room[room >= 0]
  if room.size == 0:
    return -1
  types = np.bincount(world.scenes.room_type[apt][room], minlength=len(sc.ROOM_TYPES))
  best = int(np.argmax(types))
  return best if types[best] >= ROOM_SHARE * room.size else -1


def _informative(depth: np.ndarray, semantic: np.ndarray) -> bool:
  near_wall = (semantic == sc.SEM_WALL) & (depth < NEAR_METRES)
  return bool(near_wall.mean() <= MAX_NEAR_FRACTION)


def view_facts(world: World, apt: int, pos, heading: float, rgb, depth, semantic,
               instance) -> View:
  """The `View` of one rendering: its visible things, glimpsed flag, room and informativeness."""
  h, w = instance.shape
  ids, counts = np.unique(instance[instance >= 0], return_counts=True)
  threshold = min_pixels(w)
  things = []
  for inst, pixels in zip(ids.tolist(), counts.tolist()):
    if pixels < threshold:
      continue
    rows, cols = np.nonzero(instance == inst)
    things.append(Thing(
        inst=inst, category=int(world.scenes.inst_cat[apt][inst]),
        material=int(world.scenes.inst_mat[apt][inst]),
        room_type=int(world.inst_room[apt][inst]), pixels=pixels,
        box=(cols.min() / w, rows.min() / h, (cols.max() + 1) / w, (rows.max() + 1) / h),
        centre_x=float((cols.mean() + 0.5) / w), depth=float(depth[rows, cols].min())))
  things.sort(key=lambda t: t.centre_x)
  return View(scene=scene_name(world.seeds[apt]), apartment=apt,
              position=np.asarray(pos, np.float32), heading=float(heading), rgb=rgb,
              depth=depth, semantic=semantic, instance=instance, things=tuple(things),
              glimpsed=bool((counts < threshold).any()),
              room_type=_view_room(world, apt, pos, heading, depth, semantic),
              informative=_informative(depth, semantic))
