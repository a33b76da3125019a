"""CLIPort's recorded demonstrations (Ravens' dataset layout) as G-VUE manipulation demos.

A task folder `{task}-{mode}` (e.g. `put-block-in-bowl-seen-colors-train`) holds `action/`,
`color/`, `depth/`, `info/` and `reward/`, each with one pickle per episode named
`{episode:06d}-{seed}.pkl`: a list over the episode's steps of `color` uint8 [cameras, H, W, 3],
`depth` metres along the optical axis [cameras, H, W], `action` {'pose0': (xyz, quaternion
xyzw), 'pose1': ...} (the suction cup's pick and place poses; None on the last step) and `info`
{'lang_goal': instruction, ...}; `reward` is not read. Pickles run code when loaded: read only
datasets you trust.

`load_demos` returns `tabletop_demos.collect_demos`' dict, a row per step with an action:
  * the image is the three RealSense views fused top-down as Ravens fuses them (`heightmap`),
    resampled to the `Frame`'s pixel size and padded to its square. Ravens' maps have rows
    along y and columns along x, vcbench's rows along +x: `heightmap` returns the transpose;
  * pick and place are the poses' xy in metres, quantised to the frame's pixels as a vcbench
    demo's (`Action.discretised`). CLIPort's pixel labels (`xyz_to_pix`) round where its
    heightmap floors, half a pixel apart; going through metres avoids that;
  * the rotation is the cup's turn yaw(pose1) - yaw(pose0), counter-clockwise about +z as
    vcbench's `Action.rotation`, in one of `n_rotations` bins. CLIPort's label is its negative:
    on its transposed (mirrored) image a counter-clockwise turn shows clockwise.
"""
from __future__ import annotations

import dataclasses
import math
import pickle
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from vcbench.data.gvue.formats_io import (FormatError, MissingFile, PathLike, check_request,
                                          head)
from vcbench.data.gvue.tabletop_demos import Frame
from vcbench.envs.mujoco import tabletop_tasks as tasks_lib

# Ravens' dataset geometry: x, y, z bounds (m) of the top-down map and its pixel size.
BOUNDS = np.array([[0.25, 0.75], [-0.5, 0.5], [0.0, 0.28]])
PIXEL_SIZE = 0.003125
MODES = ("train", "val", "test")
FIELDS = ("action", "color", "depth", "info")


@dataclasses.dataclass(frozen=True)
class Camera:
  """One RGB-D camera as Ravens configures it. Camera frame as OpenCV's: looking along +z, x
  right and y down in the image; `rotation` takes it to the world (quaternion xyzw)."""
  image_size: tuple[int, int]                    # (height, width)
  intrinsics: tuple[float, ...]                  # 3 x 3, row-major
  position: tuple[float, float, float]
  rotation: tuple[float, float, float, float]
  zrange: tuple[float, float] = (0.01, 10.0)     # The simulator's clip range; unused here.


def quat_from_euler(roll: float, pitch: float, yaw: float) -> tuple[float, ...]:
  """xyzw of Rz(yaw) Ry(pitch) Rx(roll), pybullet's getQuaternionFromEuler."""
  cr, sr, cp, sp, cy, sy = (f(a / 2) for a in (roll, pitch, yaw) for f in (math.cos, math.sin))
  return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
          cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)


def _d415(position, euler) -> Camera:
  return Camera((480, 640), (450.0, 0.0, 320.0, 0.0, 450.0, 240.0, 0.0, 0.0, 1.0), position,
                quat_from_euler(*euler))


# Ravens' cameras.py (RealSenseD415.CONFIG): front, left and right of the workspace.
D415 = (_d415((1.0, 0.0, 0.75), (math.pi / 4, math.pi, -math.pi / 2)),
        _d415((0.0, 0.5, 0.75), (math.pi / 4.5, math.pi, math.pi / 4)),
        _d415((0.0, -0.5, 0.75), (math.pi / 4.5, math.pi, 3 * math.pi / 4)))


def rotation_matrix(q) -> np.ndarray:
  x, y, z, w = q
  return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                   [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                   [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def yaw(q) -> float:
  """The z angle of Ravens' quatXYZW_to_eulerXYZ (static z-x-y Euler angles)."""
  x, y, z, w = q
  return math.atan2(2 * (x * y + w * z), 1 - 2 * (x * x + z * z))


def world_points(depth: np.ndarray, camera: Camera) -> np.ndarray:
  """[H, W, 3] world points of a depth image. Pixel (row v, column u) is backprojected from
  (u - cx, v - cy) as Ravens does, pixel indices rather than centres."""
  k = np.asarray(camera.intrinsics, np.float64).reshape(3, 3)
  v, u = np.mgrid[:depth.shape[0], :depth.shape[1]]
  local = np.stack([(u - k[0, 2]) * depth / k[0, 0], (v - k[1, 2]) * depth / k[1, 1], depth], -1)
  return local @ rotation_matrix(camera.rotation).T + np.asarray(camera.position)


def top_down(points: np.ndarray, colors: np.ndarray, bounds: np.ndarray, pix_size: float
             ) -> tuple[np.ndarray, np.ndarray]:
  """Ravens' get_heightmap, rows along x: each cell takes its highest point's height above
  bounds[2, 0] and colour; points outside `bounds` are dropped, empty cells stay 0."""
  shape = tuple(int(round((hi - lo) / pix_size)) for lo, hi in bounds[:2])
  points, colors = points.reshape(-1, 3), colors.reshape(-1, 3)
  inside = np.all((points >= bounds[:, 0]) & (points < bounds[:, 1]), axis=1)
  points, colors = points[inside], colors[inside]
  rows, cols = (np.clip(np.floor((points[:, i] - bounds[i, 0]) / pix_size).astype(np.int64),
                        0, shape[i] - 1) for i in (0, 1))
  cell = rows * shape[1] + cols
  order = np.lexsort((points[:, 2], cell))       # By cell, then height: a cell's last is its top.
  cell, points, colors = cell[order], points[order], colors[order]
  top = np.append(cell[1:] != cell[:-1], True)
  height = np.zeros(shape[0] * shape[1], np.float32)
  rgb = np.zeros((height.size, 3), np.uint8)
  height[cell[top]] = points[top, 2] - bounds[2, 0]
  rgb[cell[top]] = colors[top]
  return rgb.reshape(*shape, 3), height.reshape(shape)


def heightmap(colors, depths, configs: Sequence[Camera] = D415, bounds: np.ndarray = BOUNDS,
              pix_size: float = PIXEL_SIZE) -> tuple[np.ndarray, np.ndarray]:
  """Ravens' get_fused_heightmap, rows along +x and columns along +y: each camera's top-down
  map, then per cell the highest height and the mean colour of the cameras that saw it (a
  black point counts as unseen, as in Ravens) -> rgb uint8 [H, W, 3], height float32 [H, W]."""
  maps = [top_down(world_points(np.asarray(d, np.float64), c), np.asarray(rgb), bounds, pix_size)
          for rgb, d, c in zip(colors, depths, configs)]
  rgbs = np.stack([m[0] for m in maps]).astype(np.float32)
  seen = np.maximum((rgbs.sum(-1) > 0).sum(0), 1)[..., None]
  rgb = np.round(rgbs.sum(0) / seen).astype(np.uint8)
  return rgb, np.max([m[1] for m in maps], axis=0)


# ----------------------------------------------------------------------------- reading
def task_names(root: PathLike, mode: str = "train") -> list[str]:
  """The tasks `load_demos(root, tasks=None)` reads, in the order it indexes them: the folder's
  own task, or the sorted tasks of root's `{task}-{mode}` folders."""
  return [name for _, name, _ in _task_folders(Path(root), None, mode)]


def _strip_mode(folder: str) -> str:
  task, _, mode = folder.rpartition("-")
  return task if task and mode in MODES else folder


def _task_folders(root: Path, tasks: Sequence[str] | None, mode: str
                  ) -> list[tuple[int, str, Path]]:
  """[(task index, task, folder)] to read. `root` is one task folder (it has action/) or holds
  `{task}-{mode}` folders; a task of `tasks` missing from a single folder is skipped."""
  if mode not in MODES:
    raise ValueError(f"CLIPort mode {mode!r}: expected one of {MODES}.")
  if not root.is_dir():
    raise MissingFile(f"{root}: CLIPort dataset folder not found.")
  single = (root / "action").is_dir()
  found = ({_strip_mode(root.name): root} if single else
           {_strip_mode(p.name): p for p in sorted(root.iterdir())
            if p.name.endswith(f"-{mode}") and (p / "action").is_dir()})
  if not found:
    raise MissingFile(f"{root}: no CLIPort task folder (<task>-{mode}/action/) in it.")
  names = sorted(found) if tasks is None else [t.replace("_", "-") for t in tasks]
  missing = [t for t in names if t not in found]
  if single and len(missing) == len(names):
    raise FormatError(f"{root}: holds task {next(iter(found))!r}, not one of tasks {names}.")
  if missing and not single:
    raise MissingFile(f"{root / f'{missing[0]}-{mode}'}: task folder not found; {root} has "
                      f"{sorted(found)} for mode {mode!r}.")
  return [(i, t, found[t]) for i, t in enumerate(names) if t in found]


def _read_steps(path: Path) -> Sequence:
  """A field's pickled list of steps."""
  if not path.is_file():
    raise MissingFile(f"{path}: not found (each episode needs a pickle in each of {FIELDS}).")
  try:
    with open(path, "rb") as f:
      steps = pickle.load(f)
  except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as e:
    raise FormatError(f"{path}: not a readable pickle ({e}).") from e
  if not isinstance(steps, (list, tuple, np.ndarray)):
    raise FormatError(f"{path}: a {type(steps).__name__}, expected a list of the steps.")
  return steps


def _read_episode(folder: Path, name: str, cameras: Sequence[Camera]) -> dict[str, Any]:
  """The episode's fields, checked to have one entry per step and one image per camera."""
  episode = {key: _read_steps(folder / key / name) for key in FIELDS}
  lengths = {key: len(value) for key, value in episode.items()}
  if len(set(lengths.values())) > 1:
    raise FormatError(f"{folder}: episode {name} has steps {lengths}; expected the same count "
                      f"in {FIELDS}.")
  for key, tail in (("color", (3,)), ("depth", ())):
    for step, value in enumerate(episode[key]):
      expected = tuple((len(cameras), *cameras[0].image_size, *tail))
      if np.shape(value) != expected:
        raise FormatError(f"{folder / key / name}: step {step} has shape {np.shape(value)}, "
                          f"expected {expected} (cameras, height, width{', 3' * bool(tail)}).")
  return episode


def _pose(action: Any, key: str, where: str) -> tuple[np.ndarray, tuple[float, ...]]:
  if not isinstance(action, dict) or key not in action:
    raise FormatError(f"{where}: expected a dict with {key!r}, got {action!r:.80}.")
  try:
    position, quat = action[key]
    position, quat = np.asarray(position, np.float64).reshape(3), np.asarray(quat, np.float64)
    return position, tuple(quat.reshape(4))
  except (TypeError, ValueError) as e:
    raise FormatError(f"{where}[{key!r}]: expected (xyz, quaternion xyzw), got "
                      f"{action[key]!r:.80}.") from e


def _labels(action: Any, where: str, frame: Frame, n_rotations: int):
  """(pick grid point, place grid point, rotation bin), as `collect_demos` labels an action."""
  (p0, q0), (p1, q1) = _pose(action, "pose0", where), _pose(action, "pose1", where)
  act = tasks_lib.Action(tuple(p0[:2]), tuple(p1[:2]), yaw(q1) - yaw(q0))
  pick, place, k = act.discretised(frame.workspace, n_rotations)
  snapped = tasks_lib.Action.from_pixels(frame.workspace, pick, place, k, n_rotations)
  return frame.to_grid(snapped.pick), frame.to_grid(snapped.place), k


def _frame_image(rgb: np.ndarray, frame: Frame) -> np.ndarray:
  h, w = frame.workspace.shape
  if rgb.shape[:2] != (h, w):
    rgb = np.asarray(Image.fromarray(rgb).resize((w, h), Image.BILINEAR), np.uint8)
  return frame.image(rgb)


def _episode_demos(folder: Path, episode: str, frame: Frame, n_rotations: int,
                   cameras: Sequence[Camera]):
  """(image, instruction, pick, place, rotation bin) of each step with an action."""
  steps = _read_episode(folder, episode, cameras)
  for i, action in enumerate(steps["action"]):
    if action is None:                   # The final observation, recorded without an action.
      continue
    info = steps["info"][i]
    if not isinstance(info, dict) or not isinstance(info.get("lang_goal"), str):
      raise FormatError(f"{folder / 'info' / episode}: step {i} has no 'lang_goal' string.")
    rgb, _ = heightmap(steps["color"][i], steps["depth"][i], cameras)
    labels = _labels(action, f"{folder / 'action' / episode}: step {i}", frame, n_rotations)
    yield (_frame_image(rgb, frame), info["lang_goal"], *labels)


def load_demos(root: PathLike, frame: Frame, n_rotations: int,
               tasks: Sequence[str] | None = None, limit: int | None = None, *,
               mode: str = "train", cameras: Sequence[Camera] = D415) -> dict:
  """CLIPort's demos as `collect_demos`' dict. `root`: one task folder, or a folder of
  `{task}-{mode}` folders. `tasks`: CLIPort task names without the mode (`_` read as `-`),
  their order giving the task index; None: every task found (`task_names`). `limit`: the
  first episodes of each task (CLIPort's n_demos). `cameras`: the recording's cameras."""
  ws = frame.workspace
  if (ws.x, ws.y) != (tuple(BOUNDS[0]), tuple(BOUNDS[1])):
    raise ValueError(f"CLIPort's workspace is x {tuple(BOUNDS[0])}, y {tuple(BOUNDS[1])}; the "
                     f"frame's is x {ws.x}, y {ws.y}.")
  check_request(frame.image_size, limit)
  out = {"image": [], "instruction": [], "pick": [], "place": [], "rotation": [], "task": []}
  for t, _, folder in _task_folders(Path(root), tasks, mode):
    episodes = sorted(p.name for p in (folder / "action").glob("*.pkl"))
    if not episodes:
      raise MissingFile(f"{folder / 'action'}: no episode pickles in it.")
    for episode in head(episodes, limit):
      for row in _episode_demos(folder, episode, frame, n_rotations, cameras):
        for key, value in zip(out, (*row, t)):
          out[key].append(value)
  if not out["image"]:
    raise FormatError(f"{root}: no CLIPort demo step with an action for tasks {tasks}.")
  return {"image": np.stack(out["image"]), "instruction": out["instruction"],
          "pick": np.array(out["pick"], np.float32), "place": np.array(out["place"], np.float32),
          "rotation": np.array(out["rotation"], np.int32), "task": np.array(out["task"], np.int32)}
