"""launch.nav_look (episode strips), vcbench.viz.nav_views (the top-down map) and
launch.bench.nav (the speed benchmark), each on a tiny setting."""
import json
import os
import struct

import numpy as np
import pytest

import vcbench  # noqa: F401  # XLA defaults before JAX starts.
from launch.bench import nav as bench_nav
from launch import nav_look  # noqa: F401 - the CLI imports.
from vcbench.viz import nav_episode
from vcbench.envs.nav import scene as sc
from vcbench.viz import nav_views


def _png_size(path):
  data = open(path, "rb").read()
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", data[16:24])  # IHDR width, height.


@pytest.mark.parametrize("task", ["pointnav", "objectnav"])
def test_look_writes_png_of_expected_size(tmp_path, task):
  out = tmp_path / "strips" / f"{task}.png"
  result = nav_episode.look(task, "val", 1, out, frames=3, size=32, num_scenes=2,
                         num_episodes=4)
  assert result["path"] == out
  assert _png_size(out) == nav_episode.strip_size(3, 32, task)
  assert os.listdir(out.parent) == [out.name]  # Written atomically: no temporary left.
  assert result["steps"] >= 1 and 0.0 <= result["metrics"]["spl"] <= 1.0


def test_look_rejects_episode_outside_the_set(tmp_path):
  with pytest.raises(ValueError, match="--episode"):
    nav_episode.look("pointnav", "val", 4, tmp_path / "x.png", num_episodes=4)


def test_frame_indices_span_the_episode_and_keep_their_count():
  assert list(nav_episode.frame_indices(11, 3)) == [0, 5, 10]
  assert list(nav_episode.frame_indices(2, 4)) == [0, 0, 1, 1]


def _tiny_scene(g=6):
  """Border walls (material 1), floor material 2 (3 in the right half), a chair at (2, 3)."""
  wall = np.zeros((g, g), np.int32)
  wall[0, :] = wall[-1, :] = wall[:, 0] = wall[:, -1] = 1
  floor = np.where(np.arange(g)[None, :] < 3, 2, 3) * np.ones((g, g), np.int32)
  inst = -np.ones((g, g), np.int32)
  inst[2, 3] = 0
  inst_cat = np.zeros(sc.MAX_OBJECTS, np.int32)
  inst_cat[0] = sc.CATEGORIES.index("chair")
  navigable = np.zeros((g, g), bool)
  navigable[4, 1] = True
  return sc.Scene(wall=wall, floor=floor, ceiling=np.int32(0), room=np.zeros((g, g), np.int32),
                  room_type=np.zeros(sc.MAX_ROOMS, np.int32), obj_inst=inst,
                  inst_cat=inst_cat, inst_mat=np.zeros(sc.MAX_OBJECTS, np.int32),
                  navigable=navigable, inst_sprite=np.zeros(sc.MAX_OBJECTS, np.int32),
                  inst_box=sc.footprints(inst))


def test_topdown_map_marks_walls_floors_objects_and_navigable_cells():
  atlas = np.zeros((4, 8, 8, 3), np.uint8)
  atlas[2] = (200, 100, 50)          # floor material of the left half
  atlas[3, :4] = (0, 0, 200)         # right half: mean (0, 0, 100)
  s = 4
  img = nav_views.topdown_image(_tiny_scene(), atlas, px_per_cell=s)
  assert img.shape == (24, 24, 3) and img.dtype == np.uint8
  at = lambda r, c: tuple(img[r * s + s // 2, c * s + s // 2])
  assert at(0, 0) == at(5, 2) == nav_views.WALL_COLOR
  assert at(4, 1) == (200, 100, 50)                           # navigable floor: full colour
  shade = nav_views.NOT_NAVIGABLE_SHADE
  assert at(1, 1) == tuple(round(v * shade) for v in (200, 100, 50))
  assert at(1, 4) == tuple(round(v * shade) for v in (0, 0, 100))
  assert at(2, 3) == nav_views.CATEGORY_COLORS[sc.CATEGORIES.index("chair") - 1]
  # Every cell is one flat block (the raster is the grid, upsampled).
  assert (img[:s, :s] == img[0, 0]).all()


def test_semantic_palette_covers_every_label():
  labels = np.arange(sc.NUM_SEMANTIC).reshape(1, -1)
  rgb = nav_views.semantic_rgb(labels)
  assert rgb.shape == (1, sc.NUM_SEMANTIC, 3)
  assert len({tuple(c) for c in rgb[0]}) == sc.NUM_SEMANTIC  # All distinct.


def test_bench_measures_a_tiny_config():
  results = bench_nav.run_benchmark(batches=[2], sizes=[16], steps=2, repeats=1,
                                    mujoco_frames=3, isolate=False, num_scenes=2,
                                    num_episodes=8, log=lambda *_: None)
  assert [(r["size"], r["sensors"], r["batch"]) for r in results["nav"]] == [
      (16, "rgb", 2), (16, "rgbd", 2)]
  for row in results["nav"] + results["mujoco"]:
    assert row["fps"] > 0 and len(row["times"]) == 1
  assert [(r["size"], r["sensors"]) for r in results["mujoco"]] == [(16, "rgb"), (16, "rgbd")]
  assert set(results["ratio"]) == {"16_rgb", "16_rgbd"}
  assert results["ratio"]["16_rgb"]["ratio"] > 0
  assert results["memory"] == {}  # Memory is measured only in isolated runs.
  json.dumps(results)  # The --out file: plain JSON.
  text = bench_nav.markdown(results, "python -m launch.bench.nav --sizes 16")
  assert "16² RGB-D" in text and "python -m launch.bench.nav --sizes 16" in text


def test_mujoco_room_camera_matches_the_horizontal_fov():
  xml = bench_nav.mujoco_room_xml(hfov=90.0, aspect=2.0)
  assert 'fovy="53.1301"' in xml  # 2 atan(tan(45°) / 2)
