"""Object sprites: one opaque run per column, categories that differ in shape, scenes that keep
their layout with sprites or boxes, and a renderer that cuts the sprite out of the object."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from handscene import hand_atlas, hand_scene
from vcbench.envs.nav import render as R
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import scenes, sprites, textures


def _sprite_alpha(size):
  return textures.atlas(size)[textures.NUM_MATERIALS:, ..., 3] > 127


@pytest.mark.parametrize("size", [16, 64])
def test_every_sprite_column_is_one_opaque_run(size):
  alpha = _sprite_alpha(size)
  spans = sprites.column_spans(alpha.astype(np.uint8) * 255)
  rows = np.arange(size)[None, :, None]
  run = (rows >= spans[:, None, :, 0]) & (rows <= spans[:, None, :, 1])
  np.testing.assert_array_equal(run, alpha)
  cover = alpha.mean(axis=(1, 2))
  assert (cover > 0.25).all() and (cover < 0.95).all(), cover   # shapes, not boxes


def test_render_spans_equal_the_numpy_spans():
  atlas = textures.atlas(16)
  np.testing.assert_array_equal(np.asarray(R.sprite_spans(jnp.asarray(atlas))),
                                sprites.column_spans(atlas[..., 3]))
  opaque = np.asarray(R.sprite_spans(atlas[..., :3]))   # an atlas without alpha
  assert (opaque[..., 0] == 0).all() and (opaque[..., 1] == 15).all()


def test_categories_differ_in_silhouette_and_variants_differ():
  alpha = _sprite_alpha(64).reshape(len(sc.CATEGORIES) - 1, sprites.VARIANTS, 64, 64)
  mean = alpha.mean(axis=1) > 0.5
  for a, b in itertools.combinations(range(len(mean)), 2):
    iou = (mean[a] & mean[b]).sum() / (mean[a] | mean[b]).sum()
    assert iou < 0.8, (sc.CATEGORIES[a + 1], sc.CATEGORIES[b + 1], iou)
  rgb = textures.atlas(64)[textures.NUM_MATERIALS:, ..., :3].astype(float)
  rgb = rgb.reshape(len(mean), sprites.VARIANTS, -1)
  for cat in range(len(mean)):
    for i, j in itertools.combinations(range(sprites.VARIANTS), 2):
      assert np.abs(rgb[cat, i] - rgb[cat, j]).mean() > 5.0, (sc.CATEGORIES[cat + 1], i, j)


@pytest.mark.parametrize("seed", [0, 7])
def test_sprites_and_boxes_share_layout_and_materials(seed):
  shaped, boxes = scenes.generate(seed), scenes.generate(seed, objects="boxes")
  for name in ("wall", "floor", "ceiling", "room", "room_type", "obj_inst", "inst_cat",
               "inst_mat", "navigable", "inst_box"):
    np.testing.assert_array_equal(getattr(shaped, name), getattr(boxes, name), err_msg=name)
  assert (boxes.inst_sprite == 0).all()
  used = shaped.inst_cat > 0
  assert (shaped.inst_sprite[~used] == 0).all()
  for cat, sprite in zip(shaped.inst_cat[used], shaped.inst_sprite[used]):
    assert sprites.NAMES[sprite - textures.NUM_MATERIALS].startswith(sc.CATEGORIES[cat])
  for k in np.flatnonzero(used):   # the footprint is the box around the instance's cells
    rows, cols = np.nonzero(shaped.obj_inst == k)
    np.testing.assert_allclose(shaped.inst_box[k], np.array(
        [cols.min(), rows.min(), cols.max() + 1, rows.max() + 1]) * sc.CELL)
  with pytest.raises(ValueError, match=r"objects must be one of \('sprites', 'boxes'\)"):
    scenes.generate(seed, objects="cones")


def test_a_chair_sprite_is_cut_out_of_its_box():
  """The hand scene's chair (x 0.75-1.25 m, y 0.5-1.0 m) seen from the south: as a box it
  fills its columns from the floor up to 0.9 m; as a sprite the floor shows between its
  legs, farther away than the chair's face, while its seat is still there."""
  atlas = np.concatenate([hand_atlas(64), np.full((8, 64, 64, 1), 255, np.uint8)], -1)
  chair = textures.sprite_id("chair_0") - textures.NUM_MATERIALS
  atlas = np.concatenate([atlas, textures.atlas(64)[textures.NUM_MATERIALS + chair][None]])
  box = hand_scene()
  shaped = box.replace(inst_sprite=box.inst_sprite.copy())
  shaped.inst_sprite[0] = len(atlas) - 1
  cam = R.Camera(48, 48, hfov=60.0)
  pos, heading = jnp.array([1.0, 1.9], jnp.float32), jnp.float32(-np.pi / 2)   # facing -y
  render = lambda s: jax.tree.map(np.asarray, R.render(jax.tree.map(jnp.asarray, s),
                                                       jnp.asarray(atlas), pos, heading, cam))
  as_box, as_sprite = render(box), render(shaped)
  chair_label = sc.SEM_OBJECT0 + sc.CATEGORIES.index("chair") - 1
  in_box = as_box["semantic"] == chair_label
  in_sprite = as_sprite["semantic"] == chair_label
  assert in_box.sum() > 100 and 0.3 * in_box.sum() < in_sprite.sum() < 0.9 * in_box.sum()
  assert not (in_sprite & ~in_box).any()                        # only ever less than the box
  through = in_box & ~in_sprite
  assert (as_sprite["depth"][through] > as_box["depth"][through] + 0.1).all()
  assert set(np.unique(as_sprite["semantic"][through])) <= {sc.SEM_FLOOR, sc.SEM_WALL}
  # The seat (and the back) span most of the box's width in some row.
  rows = np.flatnonzero(in_sprite.any(axis=1))
  assert in_sprite[rows].sum(axis=1).max() >= 0.75 * in_box[rows].sum(axis=1).max()
