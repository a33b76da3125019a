"""The apartment generator and the texture atlas of vcbench-nav: determinism, the Scene contract,
navigability against a brute-force recomputation, plausible furniture, splits, bad inputs."""
import collections
import itertools

import numpy as np
import pytest

from vcbench.envs.nav import scenes, sprites, textures
from vcbench.envs.nav.scene import CATEGORIES, CELL, MAX_OBJECTS, MAX_ROOMS, ROOM_TYPES

G = 32
FIELDS = ("wall", "floor", "ceiling", "room", "room_type", "obj_inst", "inst_cat", "inst_mat",
          "navigable")


@pytest.fixture(scope="module")
def pool():
  return [scenes.generate(seed, G) for seed in range(20)]


def _brute_navigable(scene) -> np.ndarray:
  """3x3-free rule cell by cell, then the largest 4-connected component by breadth-first search."""
  blocked = (scene.wall > 0) | (scene.obj_inst >= 0)
  g = blocked.shape[0]
  ok = np.zeros_like(blocked)
  for r in range(1, g - 1):
    for c in range(1, g - 1):
      ok[r, c] = not blocked[r - 1:r + 2, c - 1:c + 2].any()
  best, seen = set(), set()
  for start in zip(*np.nonzero(ok)):
    if start in seen:
      continue
    comp, queue = {start}, collections.deque([start])
    while queue:
      r, c = queue.popleft()
      for nb in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
        if ok[nb] and nb not in comp:
          comp.add(nb)
          queue.append(nb)
    seen |= comp
    best = max(best, comp, key=len)
  out = np.zeros_like(ok)
  for cell in best:
    out[cell] = True
  return out


def _used(scene) -> list[int]:
  return [int(i) for i in np.nonzero(scene.inst_cat > 0)[0]]


def _room_types_under(scene, inst: int) -> set[int]:
  return {int(scene.room_type[k]) for k in scene.room[scene.obj_inst == inst]}


def test_same_seed_same_scene_and_different_seeds_differ():
  a, b, c = scenes.generate(7), scenes.generate(7), scenes.generate(8)
  for name in FIELDS:
    np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
  assert not np.array_equal(a.wall, c.wall)


def test_dtypes_and_shapes_follow_the_contract(pool):
  shapes = dict(wall=(G, G), floor=(G, G), ceiling=(), room=(G, G), room_type=(MAX_ROOMS,),
                obj_inst=(G, G), inst_cat=(MAX_OBJECTS,), inst_mat=(MAX_OBJECTS,),
                navigable=(G, G))
  for scene in pool:
    assert scene.grid_size == G
    for name, shape in shapes.items():
      value = getattr(scene, name)
      assert isinstance(value, np.ndarray), name
      assert value.shape == shape, name
      assert value.dtype == (np.bool_ if name == "navigable" else np.int32), name


def test_grid_layout_is_consistent(pool):
  for scene in pool:
    border = np.ones((G, G), bool)
    border[1:-1, 1:-1] = False
    assert (scene.wall[border] > 0).all()
    assert ((scene.room == -1) == (scene.wall > 0)).all()
    rooms = int((scene.room_type >= 0).sum())
    assert 3 <= rooms <= MAX_ROOMS
    assert (scene.room_type[:rooms] < len(ROOM_TYPES)).all() and (scene.room_type[rooms:] == -1).all()
    assert set(np.unique(scene.room[scene.room >= 0])) == set(range(rooms))
    for name in ("wall", "floor", "inst_mat"):
      assert (getattr(scene, name) < textures.NUM_MATERIALS).all(), name
    assert int(scene.ceiling) in textures.CEILING_MATERIALS


def test_room_types_are_plausible(pool):
  for scene in pool:
    types = list(scene.room_type[scene.room_type >= 0])
    assert types.count(ROOM_TYPES.index("living")) == 1
    assert types.count(ROOM_TYPES.index("bathroom")) == 1
    area = {t: int((scene.room == k).sum()) for k, t in enumerate(types)}
    area.pop(ROOM_TYPES.index("corridor"), None)
    slack = scenes.DOOR_WIDTH * len(types)  # door cells count towards one of their two rooms.
    assert area[ROOM_TYPES.index("living")] >= max(area.values()) - slack
    assert area[ROOM_TYPES.index("bathroom")] <= min(area.values()) + slack


def test_navigable_is_the_3x3_rule_restricted_to_one_component(pool):
  for scene in pool:
    np.testing.assert_array_equal(scene.navigable, _brute_navigable(scene))
    assert scene.navigable.sum() > scenes.MIN_NAV_FRACTION * (scene.wall == 0).sum()


def test_objects_are_well_formed_and_never_in_doors(pool):
  for scene in pool:
    used = _used(scene)
    assert used == list(range(len(used)))  # slots fill from 0.
    assert set(np.unique(scene.obj_inst)) == {-1, *used}
    assert (scene.wall[scene.obj_inst >= 0] == 0).all()
    for inst in used:
      rows, cols = np.nonzero(scene.obj_inst == inst)
      box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
      assert box == len(rows), "footprints are solid rectangles"
      assert scene.inst_mat[inst] in textures.OBJECT_MATERIALS[scene.inst_cat[inst]]
    # A door cell, and the cells either side of it, have a free 4-neighbour of another room.
    room = np.pad(scene.room, 1, constant_values=-1)
    doorway = np.zeros((G, G), bool)
    for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
      nb = room[dy:dy + G, dx:dx + G]
      doorway |= (scene.room >= 0) & (nb >= 0) & (nb != scene.room)
    assert doorway.any()
    assert (scene.obj_inst[doorway] == -1).all()


def test_furniture_stands_in_plausible_rooms(pool):
  bed, toilet = CATEGORIES.index("bed"), CATEGORIES.index("toilet")
  for scene in pool:
    for inst in _used(scene):
      cat = int(scene.inst_cat[inst])
      under = _room_types_under(scene, inst)
      assert under <= set(scenes.CATEGORY_ROOMS[cat]), (CATEGORIES[cat], under)
      if cat == bed:
        assert under == {ROOM_TYPES.index("bedroom")}
      if cat == toilet:
        assert under == {ROOM_TYPES.index("bathroom")}


def test_every_object_has_a_navigable_cell_within_one_metre(pool):
  centres = (np.arange(G) + 0.5) * CELL
  for scene in pool:
    ys, xs = centres[np.nonzero(scene.navigable)[0]], centres[np.nonzero(scene.navigable)[1]]
    for inst in _used(scene):
      rows, cols = np.nonzero(scene.obj_inst == inst)
      y0, y1 = rows.min() * CELL, (rows.max() + 1) * CELL
      x0, x1 = cols.min() * CELL, (cols.max() + 1) * CELL
      gap_y = np.maximum(np.maximum(y0 - ys, ys - y1), 0.0)
      gap_x = np.maximum(np.maximum(x0 - xs, xs - x1), 0.0)
      assert np.hypot(gap_y, gap_x).min() <= 1.0, (inst, CATEGORIES[scene.inst_cat[inst]])


def test_categories_and_counts(pool):
  counts = [len(_used(scene)) for scene in pool]
  distinct = [len(set(scene.inst_cat[scene.inst_cat > 0])) for scene in pool]
  assert all(1 <= n <= scenes.MAX_INSTANCES for n in counts)
  assert np.mean(counts) >= 6
  assert np.mean(distinct) >= 4
  seen = set().union(*(set(scene.inst_cat[scene.inst_cat > 0]) for scene in pool))
  assert seen == set(range(1, len(CATEGORIES)))


@pytest.mark.parametrize("grid_size", [16, 24, 48])
def test_other_grid_sizes(grid_size):
  for seed in range(3):
    scene = scenes.generate(seed, grid_size)
    assert scene.wall.shape == (grid_size, grid_size)
    np.testing.assert_array_equal(scene.navigable, _brute_navigable(scene))
    assert (scene.inst_cat > 0).any()


def test_splits_are_disjoint_and_pool_stacks_scenes():
  ranges = {s: set(scenes.split_seeds(s, scenes.SPLIT_SIZE).tolist()) for s in scenes.SPLITS}
  for a, b in itertools.combinations(ranges, 2):
    assert not ranges[a] & ranges[b], (a, b)
  np.testing.assert_array_equal(scenes.split_seeds("val", 3), [100_000, 100_001, 100_002])
  stacked = scenes.scene_pool("val", 2, grid_size=16)
  assert stacked.wall.shape == (2, 16, 16) and stacked.ceiling.shape == (2,)
  np.testing.assert_array_equal(stacked.wall[1], scenes.generate(100_001, 16).wall)


def test_bad_inputs_raise_naming_the_problem(monkeypatch):
  for bad in (15, 129, 32.0):
    with pytest.raises(ValueError, match=r"grid_size must be an int in \[16, 128\]"):
      scenes.generate(0, bad)
  with pytest.raises(ValueError, match="seed must be a non-negative int"):
    scenes.generate(-1)
  with pytest.raises(ValueError, match="unknown split 'dev'; valid splits: train, val, test"):
    scenes.split_seeds("dev", 1)
  for bad in (0, 100_001):
    with pytest.raises(ValueError, match=r"must be an int in \[1, 100000\]"):
      scenes.split_seeds("train", bad)

  def always_fail(rng, g, objects):
    raise scenes._Failed("rooms too small")
  monkeypatch.setattr(scenes, "_attempt", always_fail)
  with pytest.raises(ValueError, match=r"seed 5, grid_size 32 after 32 attempts; last failure: "
                                       r"rooms too small"):
    scenes.generate(5)


def test_atlas_shape_determinism_and_variety():
  atlas = textures.atlas()
  tiles = textures.NUM_MATERIALS + len(sprites.NAMES)
  assert atlas.shape == (tiles, 64, 64, 4) and atlas.dtype == np.uint8
  assert len(textures.MATERIAL_NAMES) == len(set(textures.MATERIAL_NAMES)) == textures.NUM_MATERIALS
  assert (atlas[:textures.NUM_MATERIALS, ..., 3] == 255).all()   # materials are opaque.
  assert textures.atlas(64) is atlas  # cached.
  np.testing.assert_array_equal(textures._atlas.__wrapped__(64), atlas)  # rebuilt: identical.
  assert (atlas[0, ..., :3] == 128).all()  # the reserved id is a flat grey.
  luminance = atlas[1:, ..., :3].astype(float).mean(-1)
  assert (luminance.reshape(len(luminance), -1).std(-1) > 2.0).all()


def test_material_tables_are_valid():
  tables = [*textures.WALL_MATERIALS.values(), *textures.FLOOR_MATERIALS.values(),
            textures.CEILING_MATERIALS, *textures.OBJECT_MATERIALS.values()]
  for ids in tables:
    assert ids and all(0 < i < textures.NUM_MATERIALS for i in ids)
  assert set(textures.WALL_MATERIALS) == set(textures.FLOOR_MATERIALS) == set(
      range(len(ROOM_TYPES)))
  assert set(textures.OBJECT_MATERIALS) == set(range(1, len(CATEGORIES)))
  with pytest.raises(ValueError, match="unknown material 'marble'"):
    textures.material_id("marble")


def test_object_categories_look_different():
  materials = textures.atlas()[:textures.NUM_MATERIALS, ..., :3]
  means = materials.reshape(textures.NUM_MATERIALS, -1, 3).astype(float).mean(1)
  for a, b in itertools.combinations(textures.OBJECT_MATERIALS, 2):
    gap = min(np.linalg.norm(means[i] - means[j])
              for i in textures.OBJECT_MATERIALS[a] for j in textures.OBJECT_MATERIALS[b])
    assert gap > 40.0, (CATEGORIES[a], CATEGORIES[b], gap)
