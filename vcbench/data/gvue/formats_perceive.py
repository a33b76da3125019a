"""Real-format loaders of G-VUE's Perceive tasks: depth (NYUv2 as BTS distributes it), camera
relocalisation (Cambridge Landmarks / 7-Scenes pose lists in PoseNet's layout) and single-view 3D
reconstruction (ShapeNet renderings + AutoSDF's SDF grids). Each returns a checked `Split`.

Choices, and why:
  * Depth keeps the whole 480x640 frame and puts the Eigen crop (BTS's NYU evaluation window)
    in meta["eval_crop"], scaled to the output size, for the metric to apply. (G-VUE crops every
    frame to (43, 45, 608, 472) before resizing instead; the metric-side crop scores the same
    pixels without changing the input the encoder sees.)
  * Camera pose images are centre-cropped to a square before resizing, as G-VUE does (1080 of
    Cambridge's 1920x1080, 480 of 7-Scenes' 640x480): squashing would change the intrinsics.
  * Reconstruction's target is occupancy: AutoSDF's truncated SDF grid (x.npy, the array G-VUE
    reads) is inside where it is negative (DISN/AutoSDF's sign: the preprocessing flags a shape
    whose centre has a positive value as inside-out). An .npy needs no new package; AutoSDF's
    codebook indices (codeix.npy) are not read, vcbench's decoder predicts occupancy directly.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from vcbench.data.gvue import split as split_lib
from vcbench.data.gvue.formats_io import (FormatError, PathLike, check_request, expect_split,
                                          field, head, make_split, open_image, read_json,
                                          read_lines, require_file, resize_nearest, resize_rgb)

NYU_FRAME = (480, 640)
# Rows 45:471, columns 41:601 of the 480x640 frame: the Eigen et al. crop BTS evaluates NYU on.
EIGEN_CROP = (45, 471, 41, 601)
NYU_DEPTH_RANGE = (1e-3, 10.0)     # metres; BTS's and G-VUE's evaluation range for NYU.
NYU_MM_PER_METRE = 1000.0          # BTS's NYU divisor: depth PNGs hold uint16 millimetres.
DEPTH_MODES = ("I;16", "I;16L", "I;16B", "I")

POSE_DATASETS = ("cambridge", "7scenes")
POSE_HEADER_LINES = 3              # PoseNet's files: title, column names, a blank line.

SHAPENET_VIEWS = 24                # renderings per shape (rendering/00.png ... 23.png).


def eigen_crop(size: int) -> tuple[int, int, int, int]:
  """(top, bottom, left, right) of the Eigen crop on a size x size depth map."""
  top, bottom, left, right = EIGEN_CROP
  h, w = NYU_FRAME
  return (round(top * size / h), round(bottom * size / h), round(left * size / w),
          round(right * size / w))


def load_depth_estimation(root: PathLike, split: str, size: int, limit: int | None = None, *,
                          index_file: PathLike | None = None) -> split_lib.Split:
  """NYUv2 from a BTS split file, lines "rgb_path depth_path [focal]" relative to `root`.

  `index_file` defaults to BTS's name, root/nyudepthv2_{split}_files_with_gt.txt.
  """
  check_request(size, limit)
  expect_split(split, ("train", "test"), str(root))
  root = Path(root)
  index = (Path(index_file) if index_file is not None else
           root / f"nyudepthv2_{split}_files_with_gt.txt")
  images, depths, scenes = [], [], []
  for line_no, rgb_name, depth_name in head(_nyu_pairs(index), limit):
    where = f"{index}: line {line_no}"
    rgb = open_image(root / rgb_name, where)
    depth = _depth_metres(open_image(root / depth_name, where), root / depth_name)
    if rgb.size[::-1] != depth.shape:
      raise FormatError(f"{where}: image {rgb_name} is {rgb.size[1]}x{rgb.size[0]} but depth "
                        f"{depth_name} is {depth.shape[0]}x{depth.shape[1]}.")
    images.append(resize_rgb(rgb, size))
    depths.append(resize_nearest(depth, size))
    scenes.append(rgb_name.split("/")[0])
  meta = {"eval_crop": eigen_crop(size), "depth_range": NYU_DEPTH_RANGE, "dataset": "NYUv2"}
  return make_split("depth_estimation", index, images, {"depth": depths},
                    {"depth": np.float32}, scene=scenes, meta=meta)


def _nyu_pairs(index: Path) -> list[tuple[int, str, str]]:
  """(line number, rgb path, depth path) per non-blank line; BTS's train list starts its paths
  with "/", relative to the data folder all the same."""
  pairs = []
  for line_no, line in enumerate(read_lines(index, "NYUv2 split file"), 1):
    parts = line.split()
    if not parts:
      continue
    if len(parts) not in (2, 3):
      raise FormatError(f"{index}: line {line_no} has {len(parts)} fields, expected "
                        f"'rgb_path depth_path [focal]': {line!r}.")
    pairs.append((line_no, parts[0].lstrip("/"), parts[1].lstrip("/")))
  return pairs


def _depth_metres(image: Image.Image, path: Path) -> np.ndarray:
  if image.mode not in DEPTH_MODES:
    raise FormatError(f"{path}: depth must be a 16-bit PNG of millimetres, got PIL mode "
                      f"{image.mode!r}.")
  depth = np.asarray(image, np.float32) / NYU_MM_PER_METRE
  if depth.shape != NYU_FRAME:
    raise FormatError(f"{path}: depth map is {depth.shape[0]}x{depth.shape[1]}, expected NYUv2's "
                      f"{NYU_FRAME[0]}x{NYU_FRAME[1]} frame (meta['eval_crop'] is the Eigen crop "
                      "on it).")
  return depth


def load_camera_pose(root: PathLike, split: str, size: int, limit: int | None = None, *,
                     scene: str = "KingsCollege", dataset: str = "cambridge",
                     pose_file: PathLike | None = None) -> split_lib.Split:
  """One scene of Cambridge Landmarks or 7-Scenes from a PoseNet-style pose list.

  The list has three header lines, then "image_path x y z w p q r" (position in metres, then the
  rotation quaternion w first). Default lists, as G-VUE reads them: Cambridge
  root/<scene>/dataset_{train,test}.txt; 7-Scenes root/7Scenes_PoseNet_TrainVal/<scene>_{train,val}
  .txt ("test" reads the val list, the 7-Scenes test sequences). Images are relative to
  root/<scene>.
  """
  check_request(size, limit)
  expect_split(split, ("train", "test"), str(root))
  if dataset not in POSE_DATASETS:
    raise FormatError(f"camera_pose: unknown dataset {dataset!r}; expected one of {POSE_DATASETS}.")
  root = Path(root)
  if pose_file is None and dataset == "cambridge":
    pose_file = root / scene / f"dataset_{split}.txt"
  elif pose_file is None:
    listed = "val" if split == "test" else split
    pose_file = root / "7Scenes_PoseNet_TrainVal" / f"{scene}_{listed}.txt"
  pose_file = Path(pose_file)
  images, positions, quaternions, scenes = [], [], [], []
  for line_no, name, pose in head(_posenet_rows(pose_file), limit):
    image = open_image(root / scene / name, f"{pose_file}: line {line_no}")
    images.append(resize_rgb(_centre_square(image), size))
    positions.append(pose[:3])
    quaternions.append(pose[3:] / np.linalg.norm(pose[3:]))
    scenes.append(f"{scene}/{name.split('/')[0]}")   # the sequence: train and test differ.
  return make_split("camera_pose", pose_file, images,
                    {"position": positions, "quaternion": quaternions},
                    {"position": np.float32, "quaternion": np.float32}, scene=scenes,
                    meta={"dataset": dataset, "scene": scene})


def _posenet_rows(path: Path) -> list[tuple[int, str, np.ndarray]]:
  """(line number, image path, [x y z w p q r]) per pose line after the header."""
  rows = []
  lines = read_lines(path, "PoseNet pose list")
  for line_no, line in enumerate(lines[POSE_HEADER_LINES:], POSE_HEADER_LINES + 1):
    parts = line.split()
    if not parts:
      continue
    where = f"{path}: line {line_no}"
    if len(parts) != 8:
      raise FormatError(f"{where} has {len(parts)} fields, expected 'image_path x y z w p q r': "
                        f"{line!r}.")
    try:
      pose = np.array([float(v) for v in parts[1:]], np.float64)
    except ValueError as e:
      raise FormatError(f"{where}: pose values must be numbers ({e}).") from e
    if not np.isfinite(pose).all() or np.linalg.norm(pose[3:]) < 1e-8:
      raise FormatError(f"{where}: the pose needs finite values and a non-zero quaternion, got "
                        f"{parts[1:]}.")
    rows.append((line_no, parts[0].lstrip("/"), pose))
  return rows


def _centre_square(image: Image.Image) -> Image.Image:
  w, h = image.size
  side = min(w, h)
  left, top = (w - side) // 2, (h - side) // 2
  return image.crop((left, top, left + side, top + side))


def load_reconstruction_3d(root: PathLike, split: str, size: int, limit: int | None = None, *,
                           categories: str | Sequence[str] = "all", views: Sequence[int] = (0,),
                           resolution: int = 64, info_file: PathLike | None = None,
                           filelist_dir: PathLike | None = None, render_dir: PathLike | None = None,
                           sdf_dir: PathLike | None = None) -> split_lib.Split:
  """ShapeNet shapes with DISN's split lists, the 24-view renderings and AutoSDF's SDF grids.

  Paths (defaults under `root`): info.json ({"cats": {name: synset}, "all_cats": [names]}),
  filelists/<synset>_{train,test}.lst (one model id a line), ShapeNetRendering/<synset>/<model>/
  rendering/<view:02d>.png, x/<synset>/<model>/x.npy (AutoSDF's float SDF [1, 64, 64, 64]).
  One example per shape and view in `views` (view 0 by default: each shape's renderings come
  from random viewpoints, so one fixed index is a random view per shape). `resolution` divides
  the grid's side; a coarse voxel is occupied if any fine voxel in it is, which keeps thin parts
  (chair legs) that a majority vote would erase.
  """
  check_request(size, limit)
  expect_split(split, ("train", "test"), str(root))
  root = Path(root)
  info_file = Path(info_file) if info_file is not None else root / "info.json"
  filelist_dir = Path(filelist_dir) if filelist_dir is not None else root / "filelists"
  render_dir = Path(render_dir) if render_dir is not None else root / "ShapeNetRendering"
  sdf_dir = Path(sdf_dir) if sdf_dir is not None else root / "x"
  bad_views = [v for v in views if not 0 <= v < SHAPENET_VIEWS]
  if not views or bad_views:
    raise FormatError(f"reconstruction_3d: views must be indices in [0, {SHAPENET_VIEWS}), got "
                      f"{list(views)}.")
  cats, names = _categories(info_file, categories)
  images, occupancy, scenes = [], [], []
  for synset, model, where in _shapenet_models(cats, names, filelist_dir, split):
    if limit is not None and len(images) >= limit:
      break
    grid = _occupancy(sdf_dir / synset / model / "x.npy", resolution, where)
    for view in head(views, None if limit is None else limit - len(images)):
      path = render_dir / synset / model / "rendering" / f"{view:02d}.png"
      # Renderings are RGBA; dropping alpha keeps the renderer's background, as G-VUE does.
      images.append(resize_rgb(open_image(path, where), size))
      occupancy.append(grid)
      scenes.append(f"{synset}/{model}")
  meta = {"categories": names, "views": tuple(views), "sdf_threshold": 0.0}
  return make_split("reconstruction_3d", filelist_dir, images, {"occupancy": occupancy},
                    {"occupancy": np.bool_}, scene=scenes, meta=meta)


def _categories(info_file: Path, categories: str | Sequence[str]) -> tuple[dict, list[str]]:
  """info.json's {name: synset} and the category names asked for."""
  info = read_json(info_file, "ShapeNet category info (info.json)")
  cats = field(info, "cats", str(info_file), dict)
  if categories == "all":
    names = field(info, "all_cats", str(info_file), list)
  else:
    names = [categories] if isinstance(categories, str) else list(categories)
  unknown = [n for n in names if n not in cats]
  if unknown:
    raise FormatError(f"{info_file}: categories {unknown} are not in 'cats' (known: "
                      f"{sorted(cats)}).")
  return cats, names


def _shapenet_models(cats: dict, names: list[str], filelist_dir: Path, split: str):
  """(synset, model id, 'file: line n') for each listed shape, category by category."""
  for name in names:
    synset = str(cats[name])
    listing = filelist_dir / f"{synset}_{split}.lst"
    for line_no, line in enumerate(read_lines(listing, f"{name} {split} list"), 1):
      if line.strip():
        yield synset, line.strip(), f"{listing}: line {line_no}"


def _occupancy(path: Path, resolution: int, where: str) -> np.ndarray:
  require_file(path, f"AutoSDF SDF grid for the shape at {where}")
  try:
    sdf = np.load(path, allow_pickle=False)
  except (OSError, ValueError) as e:
    raise FormatError(f"{path}: not a NumPy .npy array ({e}).") from e
  sdf = sdf[0] if sdf.ndim == 4 and sdf.shape[0] == 1 else sdf
  side = sdf.shape[0] if sdf.ndim == 3 else 0
  if sdf.shape != (side,) * 3 or not np.issubdtype(sdf.dtype, np.floating):
    raise FormatError(f"{path}: SDF grid must be float [1, R, R, R] or [R, R, R], got "
                      f"{sdf.dtype} {sdf.shape}.")
  if not np.isfinite(sdf).all():
    raise FormatError(f"{path}: SDF grid has non-finite values.")
  if resolution < 1 or side % resolution:
    raise FormatError(f"reconstruction_3d: resolution {resolution} must divide the grid side "
                      f"{side} of {path}.")
  inside = sdf < 0.0
  f = side // resolution
  return inside.reshape(resolution, f, resolution, f, resolution, f).any(axis=(1, 3, 5))
