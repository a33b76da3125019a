"""The ray caster against a brute-force reference: every pixel's 3-D ray marched in 5 mm steps
through the voxelised scene (walls floor to ceiling, objects as boxes of their category's
height), in numpy. The caster resolves rows in closed form from one DDA per column, so this
checks the whole geometry: which surface each pixel sees and at what depth."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vcbench  # noqa: F401
from vcbench.envs.nav import render as R
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import scenes, sprites, textures

STEP = 0.005  # metres of horizontal travel per march step.


def reference(scene, pos, heading, cam, atlas):
  """(semantic [H, W], z-depth [H, W]) by marching each pixel's ray until it enters a solid.

  A box object is solid up to its category's height. A sprite object is decided where the
  ray first enters its footprint: solid if the ray's height there lies in the sprite's
  opaque run of that column (the fraction across the face the ray enters by), otherwise
  the ray passes it and every object behind it (the caster draws the first object run of a
  column only)."""
  offsets = R._column_offsets(cam).astype(np.float64)
  k = R._row_slopes(cam).astype(np.float64)
  ang = heading + offsets[None, :] + 0 * k[:, None]
  # A pinhole camera: row slopes are rise per metre of z-depth, and z = s * cos(offset).
  slope = k[:, None] * np.cos(offsets)[None, :]
  g = scene.grid_size
  heights = np.asarray(sc.CATEGORY_HEIGHT)[scene.inst_cat]
  spans = sprites.column_spans(np.asarray(atlas)[..., 3])
  t = spans.shape[1]
  sem = np.full(ang.shape, -1)
  dist = np.zeros(ang.shape)
  entered, passed = np.zeros(ang.shape, bool), np.zeros(ang.shape, bool)
  px = np.clip((pos[0] / sc.CELL).astype(int), 0, g - 1) + 0 * sem
  py = np.clip((pos[1] / sc.CELL).astype(int), 0, g - 1) + 0 * sem
  for s in np.arange(STEP, 3 * g * sc.CELL, STEP):
    todo = sem < 0
    if not todo.any():
      break
    x = pos[0] + s * np.cos(ang)
    y = pos[1] + s * np.sin(ang)
    h = sc.CAMERA_HEIGHT + s * slope
    cx = np.clip((x / sc.CELL).astype(int), 0, g - 1)
    cy = np.clip((y / sc.CELL).astype(int), 0, g - 1)
    inst = scene.obj_inst[cy, cx]
    safe = np.maximum(inst, 0)
    sprite = np.where(inst >= 0, scene.inst_sprite[safe], 0)
    entry = todo & ~entered & (inst >= 0)
    # The face crossed on entry: normal to x if the column index changed, else normal to y;
    # the entry point is put back on that face (the march overshoots it by up to a step).
    across_y = cx != px
    with np.errstate(divide="ignore", invalid="ignore"):
      s_x = (np.maximum(cx, px) * sc.CELL - pos[0]) / np.cos(ang)
      s_y = (np.maximum(cy, py) * sc.CELL - pos[1]) / np.sin(ang)
    s_in = np.where(across_y, s_x, s_y)
    along = np.where(across_y, pos[1] + s_in * np.sin(ang), pos[0] + s_in * np.cos(ang))
    box = scene.inst_box[safe]
    lo = np.where(across_y, box[..., 1], box[..., 0])
    hi = np.where(across_y, box[..., 3], box[..., 2])
    u = np.clip(((along - lo) / np.maximum(hi - lo, 1e-6) * t).astype(int), 0, t - 1)
    first, last = spans[sprite, u, 0], spans[sprite, u, 1]
    height = heights[safe]
    h_in = sc.CAMERA_HEIGHT + s_in * slope
    opaque = (h_in >= height * (1 - (last + 1) / t)) & (h_in <= height * (1 - first / t))
    sprite_hit = entry & (sprite > 0) & opaque
    passed |= entry & (sprite > 0) & ~opaque
    entered |= entry
    in_box = (inst >= 0) & (sprite == 0) & ~passed & (h <= height)
    label = np.select(
        [h <= 0, h >= sc.WALL_HEIGHT, scene.wall[cy, cx] > 0, in_box | sprite_hit],
        [sc.SEM_FLOOR, sc.SEM_CEILING, sc.SEM_WALL,
         sc.SEM_OBJECT0 + scene.inst_cat[safe] - 1], -1)
    hit = todo & (label >= 0)
    sem[hit] = label[hit]
    dist[hit] = s
    px, py = cx, cy
  return sem, dist * np.cos(offsets)[None, :]


def _free_poses(scene, num, seed):
  rng = np.random.default_rng(seed)
  cells = np.argwhere(scene.navigable)
  picks = cells[rng.choice(len(cells), num, replace=False)]
  return [(np.array([(c + 0.5) * sc.CELL, (r + 0.5) * sc.CELL]), rng.uniform(-math.pi, math.pi))
          for r, c in picks]


@pytest.mark.parametrize("seed, objects", [(3, "sprites"), (11, "sprites"), (3, "boxes")])
def test_caster_matches_brute_force_march(seed, objects):
  scene = scenes.generate(seed, objects=objects)
  jscene = jax.tree.map(jnp.asarray, scene)
  cam = R.Camera(24, 32)
  atlas = textures.atlas(16)
  agree, errors = [], []
  for pos, heading in _free_poses(scene, 4, seed):
    out = R.render(jscene, atlas, jnp.asarray(pos, jnp.float32), jnp.float32(heading), cam)
    ref_sem, ref_z = reference(scene, pos, heading, cam, atlas)
    got = np.asarray(out["semantic"])
    same = got == ref_sem
    agree.append(same.mean())
    errors.append(np.abs(np.asarray(out["depth"])[..., 0] - np.minimum(ref_z, cam.max_depth))[same])
  errors = np.concatenate(errors)
  # Disagreements are pixels on a boundary (the march overshoots by up to 5 mm) and the
  # documented approximation: only the first object run along a column is drawn.
  assert np.mean(agree) >= 0.99, agree
  assert np.median(errors) < 0.01 and np.quantile(errors, 0.99) < 0.02, (
      np.median(errors), np.quantile(errors, 0.99))
