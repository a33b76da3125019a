"""G-VUE 3-D reconstruction from packaged meshes: mesh files read right, the voxeliser's solid
volume is exact on boxes, MuJoCo's renders agree with the voxels seen through an independently
computed camera, and splits are deterministic and disjoint by object."""
import math
import os
import struct

import numpy as np
import pytest

# MuJoCo picks its GL backend when first imported: headless rendering needs EGL by then.
os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")
pytest.importorskip("pybullet_data")
pytest.importorskip("metaworld")

from vcbench.data.gvue import meshes  # noqa: E402
from vcbench.data.gvue import shapes3d  # noqa: E402
from vcbench.data.gvue import split as split_lib  # noqa: E402


def _box_obj(low, high, first=1):
  """OBJ text of a closed box as six quads, vertex indices counted from `first`."""
  corners = [[(high if (k >> axis) & 1 else low)[axis] for axis in range(3)] for k in range(8)]
  quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
  lines = [f"v {x} {y} {z}" for x, y, z in corners]
  lines += ["f " + " ".join(f"{first + i}/1/1" for i in q) for q in quads]
  return "\n".join(lines) + "\n", np.array(corners, float)


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text)
  return str(path)


def _expected_cells(low, high, resolution):
  """Cells a closed box [low, high] overlaps, per axis, when no face lies on a cell border."""
  lo, hi = ((np.asarray(x) + 0.5) * resolution for x in (low, high))
  return int(np.prod(np.floor(hi) - np.floor(lo) + 1))


@pytest.mark.parametrize("low, high, resolution", [
    ((-0.3, -0.2, -0.45), (0.35, 0.1, 0.4), 16), ((-0.49, -0.49, -0.49), (0.49, 0.49, 0.49), 32),
    ((-0.1, 0.02, -0.2), (0.04, 0.3, 0.33), 32)])
def test_a_box_fills_exactly_the_cells_it_overlaps(tmp_path, low, high, resolution):
  text, _ = _box_obj(low, high)
  vertices, faces = meshes.read_mesh(_write(tmp_path, "box.obj", text))
  occupancy = meshes.voxelise(vertices, faces, resolution)
  assert occupancy.sum() == _expected_cells(low, high, resolution)
  # Where: cell (i, j, k) is (x, y, z); the box's x range picks the cells along axis 0.
  i = np.flatnonzero(occupancy.any((1, 2)))
  assert i[0] == int((low[0] + 0.5) * resolution) and i[-1] == int((high[0] + 0.5) * resolution)


def test_an_open_box_stays_hollow_and_overlapping_pieces_make_their_union(tmp_path):
  text, _ = _box_obj((-0.4, -0.4, -0.4), (0.4, 0.4, 0.4))
  open_top = "\n".join(line for line in text.splitlines() if line != "f 5/1/1 6/1/1 8/1/1 7/1/1")
  vertices, faces = meshes.read_mesh(_write(tmp_path, "open.obj", open_top + "\n"))
  assert len(faces) == 10
  shell = meshes.voxelise(vertices, faces, 16)
  assert shell.sum() < 0.5 * _expected_cells((-0.4,) * 3, (0.4,) * 3, 16)
  assert not shell[8, 8, 8]
  a, _ = _box_obj((-0.45, -0.1, -0.1), (0.45, 0.1, 0.1))
  b, _ = _box_obj((-0.1, -0.45, -0.1), (0.1, 0.45, 0.1), first=9)
  vertices, faces = meshes.read_mesh(_write(tmp_path, "cross.obj", a + b))
  union = meshes.voxelise(vertices, faces, 20)
  both = (_expected_cells((-0.45, -0.1, -0.1), (0.45, 0.1, 0.1), 20)
          + _expected_cells((-0.1, -0.45, -0.1), (0.1, 0.45, 0.1), 20)
          - _expected_cells((-0.1, -0.1, -0.1), (0.1, 0.1, 0.1), 20))
  assert union.sum() == both


def test_stl_binary_and_ascii_and_obj_negative_indices_read_the_same_triangles(tmp_path):
  text, corners = _box_obj((0.0, 0.0, 0.0), (1.0, 2.0, 3.0))
  vertices, faces = meshes.read_mesh(_write(tmp_path, "box.obj", text))
  triangles = vertices[faces]
  negative = "\n".join(f"v {x} {y} {z}" for x, y, z in corners) + "\nf -8 -6 -5 -7\n"
  v2, f2 = meshes.read_mesh(_write(tmp_path, "neg.obj", negative))
  np.testing.assert_array_equal(v2[f2], triangles[:2])
  binary = tmp_path / "box.stl"
  binary.write_bytes(b"solid looks like ascii but is binary".ljust(80, b" ")
                     + struct.pack("<I", len(triangles))
                     + b"".join(struct.pack("<12fH", 0, 0, 0, *t.ravel(), 0) for t in triangles))
  v3, f3 = meshes.read_mesh(str(binary))
  np.testing.assert_allclose(v3[f3], triangles)
  ascii_stl = "solid box\n" + "".join(
      "facet normal 0 0 0\nouter loop\n" + "".join(f"vertex {x} {y} {z}\n" for x, y, z in t)
      + "endloop\nendfacet\n" for t in triangles) + "endsolid box\n"
  v4, f4 = meshes.read_mesh(_write(tmp_path, "ascii.stl", ascii_stl))
  np.testing.assert_allclose(v4[f4], triangles)
  with pytest.raises(meshes.MeshError, match="nan.obj.*NaN"):
    meshes.read_mesh(_write(tmp_path, "nan.obj", "v nan 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"))


def test_normalise_fits_the_longest_side_into_the_unit_cube():
  v = meshes.normalise(np.array([[1.0, 2.0, 3.0], [5.0, 3.0, 4.0], [2.0, 2.5, 3.5]]))
  np.testing.assert_allclose(v.min(0), [-0.5, -0.125, -0.125])
  np.testing.assert_allclose(v.max(0), [0.5, 0.125, 0.125])


def _project(points, azimuth, elevation, distance, size):
  """Pixel (row, col) of world points seen by MuJoCo's free camera looking at the origin:
  written out from the camera's definition, independently of the renderer."""
  az, el = math.radians(azimuth), math.radians(-elevation)
  forward = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
  up = np.array([-math.sin(el) * math.cos(az), -math.sin(el) * math.sin(az), math.cos(el)])
  right = np.cross(forward, up)
  d = points + distance * forward
  focal = size / 2 / math.tan(math.radians(shapes3d.FOVY / 2))
  z = d @ forward
  return size / 2 - focal * (d @ up) / z, size / 2 + focal * (d @ right) / z


def _footprint(occupancy, view, distance, size):
  """Pixels covered by the occupied cells (8 points per cell) seen from `view`."""
  resolution = occupancy.shape[0]
  offsets = (np.stack(np.meshgrid(*[[0.2, 0.8]] * 3, indexing="ij"), -1).reshape(-1, 3))
  points = ((np.argwhere(occupancy)[:, None] + offsets[None]).reshape(-1, 3) / resolution) - 0.5
  row, col = _project(points, *shapes3d.VIEWS[view], distance, size)
  mask = np.zeros((size, size), bool)
  inside = (row >= 0) & (row < size) & (col >= 0) & (col < size)
  mask[row[inside].astype(int), col[inside].astype(int)] = True
  return mask


def test_renders_show_the_voxelised_shape_from_the_stated_view(tmp_path):
  """An L of two boxes, asymmetric along every axis: the rendered silhouette matches the voxels
  projected through the camera, and not the voxels mirrored along x."""
  a, _ = _box_obj((0.0, 0.0, 0.0), (1.0, 0.3, 0.3))
  b, _ = _box_obj((0.0, 0.0, 0.0), (0.3, 0.6, 0.8), first=9)
  vertices, faces = meshes.read_mesh(_write(tmp_path, "l.obj", a + b))
  vertices = meshes.normalise(vertices)
  occupancy = meshes.voxelise(vertices, faces, 32)
  views = [0, 5, 9, 14, 19]
  (images,) = shapes3d.render_views([(vertices, faces)], [views], 96)
  assert images.shape == (5, 96, 96, 3) and (images[:, 0, 0] == 255).all()  # White background.
  distance = shapes3d.camera_distance(vertices)
  for image, view in zip(images, views):
    silhouette = (image < 250).any(-1)
    iou = lambda m: (m & silhouette).sum() / (m | silhouette).sum()
    right, mirrored = iou(_footprint(occupancy, view, distance, 96)), iou(
        _footprint(occupancy[::-1], view, distance, 96))
    assert right > 0.88 and mirrored < 0.75, (view, right, mirrored)


def test_split_contract_determinism_and_occupancy_matches_the_mesh():
  a = shapes3d.make_split("test", 6, seed=3, size=32, resolution=16)
  assert split_lib.check(a) is a and a.task == "reconstruction_3d"
  assert a.images.shape == (6, 32, 32, 3) and a.targets["occupancy"].shape == (6, 16, 16, 16)
  b = shapes3d.make_split("test", 6, seed=3, size=32, resolution=16)
  np.testing.assert_array_equal(a.images, b.images)
  np.testing.assert_array_equal(a.targets["occupancy"], b.targets["occupancy"])
  assert a.scene == b.scene and (a.meta["view"] == b.meta["view"]).all()
  c = shapes3d.make_split("test", 6, seed=4, size=32, resolution=16)
  assert c.scene != a.scene
  entries = {e.name: e for e in shapes3d.catalog()}
  for k in range(len(a)):
    occupancy = meshes.voxelise(*shapes3d.load(entries[a.scene[k]].path), 16)
    np.testing.assert_array_equal(a.targets["occupancy"][k], occupancy)
    assert a.images[k].std() > 5  # The object is in view, not a blank frame.


def test_train_and_test_share_no_object():
  train, test = shapes3d.split_meshes("train"), shapes3d.split_meshes("test")
  assert len(train) > 900 and len(test) > 150
  assert not {e.group for e in train} & {e.group for e in test}
  assert len(train) + len(test) == len(shapes3d.catalog())
  assert {"pybullet/duck", "pybullet/franka_panda", "metaworld/hammer"} <= {
      e.group for e in train + test}
  a = shapes3d.make_split("train", 5, seed=0, size=16, resolution=8)
  b = shapes3d.make_split("test", 5, seed=0, size=16, resolution=8)
  assert not set(a.meta["groups"]) & set(b.meta["groups"])


@pytest.mark.parametrize("kwargs, field", [
    (dict(split="val", num=2, seed=0, size=8), "split"), (dict(split="train", num=0, seed=0,
                                                              size=8), "num"),
    (dict(split="train", num=2, seed=0, size=8, resolution=1), "resolution"),
    (dict(split="train", num=2, seed=-3, size=8), "seed")])
def test_bad_arguments_name_the_field(kwargs, field):
  with pytest.raises(split_lib.SplitError, match=field):
    shapes3d.make_split(**kwargs)
