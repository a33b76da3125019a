"""Demonstrations for G-VUE's manipulation task: the oracle's steps on the MuJoCo tabletop, in
the geometry the PVR and the affordance decoder see.

Geometry (`Frame`): the tabletop renders the workspace (0.5 m x 1.0 m) at `image_size / 1.0 m`
per pixel, so a workspace image is image_size/2 x image_size; it is padded with black rows to a
square image_size x image_size, the PVR's input, and the decoder's affordances live on the
PVR's stride-4 grid (`grid` = image_size / 4 cells a side). Pick and place points are continuous
grid coordinates, cell centres at integers.

`collect_demos` runs the oracle and keeps its successful episodes (CLIPort keeps those too);
`as_split` wraps the demos in the G-VUE split contract so the job caches them and their
features like any other task's data; `data/gvue/cliport.py` reads CLIPort's recorded demos into
the same form.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from vcbench.data.gvue import split as split_lib
from vcbench.envs.mujoco import tabletop as tt
from vcbench.envs.mujoco import tabletop_tasks as tasks_lib


@dataclasses.dataclass(frozen=True)
class Frame:
  """Workspace <-> square PVR image <-> the decoder's grid."""
  image_size: int
  grid: int                       # Cells per side of the decoder's map (stride 4: size / 4).
  workspace: tt.Workspace = tt.Workspace()

  @classmethod
  def make(cls, image_size: int, grid: int) -> "Frame":
    base = tt.Workspace()
    if (base.y[1] - base.y[0]) != 2 * (base.x[1] - base.x[0]) or image_size % 4:
      raise ValueError(f"Frame: the workspace must be twice as wide as deep and image_size a "
                       f"multiple of 4, got {base} and {image_size}.")
    ws = dataclasses.replace(base, pix_size=(base.y[1] - base.y[0]) / image_size)
    return cls(image_size, grid, ws)

  @property
  def pad(self) -> int:
    return (self.image_size - self.workspace.shape[0]) // 2

  @property
  def cell(self) -> float:
    """Metres per grid cell."""
    return self.workspace.pix_size * self.image_size / self.grid

  def image(self, rgb: np.ndarray) -> np.ndarray:
    """Workspace image [S/2, S, 3] -> the padded square [S, S, 3]."""
    out = np.zeros((self.image_size, self.image_size, 3), np.uint8)
    out[self.pad:self.pad + rgb.shape[0]] = rgb
    return out

  def to_grid(self, xy) -> np.ndarray:
    """Table point (m) -> continuous (row, col) grid coordinate (cell centres at integers)."""
    ws = self.workspace
    x0 = ws.x[0] - self.pad * ws.pix_size
    return np.array([(xy[0] - x0) / self.cell - 0.5, (xy[1] - ws.y[0]) / self.cell - 0.5])

  def to_table(self, rc) -> tuple[float, float]:
    ws = self.workspace
    x0 = ws.x[0] - self.pad * ws.pix_size
    return (float(x0 + (rc[0] + 0.5) * self.cell), float(ws.y[0] + (rc[1] + 0.5) * self.cell))

  def valid(self) -> np.ndarray:
    """bool [grid, grid]: cells within a cell of the workspace (a soft label of a point at
    its edge reaches the next cell out; decoded points are clipped back to it)."""
    rows = np.array([self.to_table((r, 0))[0] for r in range(self.grid)])
    ws = self.workspace
    ok = (rows >= ws.x[0] - self.cell) & (rows <= ws.x[1] + self.cell)
    return np.broadcast_to(ok[:, None], (self.grid, self.grid)).copy()


def collect_demos(task_names: Sequence[str], episodes: int, frame: Frame,
                  n_rotations: int, split: str = "seen", first_seed: int = 0) -> dict:
  """The oracle's steps in its successful episodes: images [N, S, S, 3], instructions, pick
  and place grid coordinates [N, 2], rotation bins [N], task index [N]."""
  out = {"image": [], "instruction": [], "pick": [], "place": [], "rotation": [], "task": []}
  for t, name in enumerate(task_names):
    for seed in range(first_seed, first_seed + episodes):
      ep = tasks_lib.Episode(name, split, seed, frame.workspace)
      steps = []
      try:
        while not ep.done:
          action = tasks_lib.oracle_action(ep)
          if action is None:
            break
          image = frame.image(ep.sim.render()["rgb"])
          pick, place, k = action.discretised(frame.workspace, n_rotations)
          a = tasks_lib.Action.from_pixels(frame.workspace, pick, place, k, n_rotations)
          steps.append((image, ep.instruction, frame.to_grid(a.pick), frame.to_grid(a.place), k))
          ep.step(action, n_rotations)
        if ep.success:
          for image, text, p0, p1, k in steps:
            for key, v in zip(out, (image, text, p0, p1, k, t)):
              out[key].append(v)
      finally:
        ep.close()
  if not out["image"]:
    raise RuntimeError(f"no successful oracle episode among {episodes} per task {task_names}.")
  return {"image": np.stack(out["image"]), "instruction": list(out["instruction"]),
          "pick": np.array(out["pick"], np.float32), "place": np.array(out["place"], np.float32),
          "rotation": np.array(out["rotation"], np.int32), "task": np.array(out["task"], np.int32)}


def as_split(demos: dict, task_names: Sequence[str], source: str) -> split_lib.Split:
  """`collect_demos`'s dict as a manipulation `Split` (texts: one instruction per step)."""
  return split_lib.check(split_lib.Split(
      task="manipulation", images=demos["image"],
      targets={k: demos[k] for k in ("pick", "place", "rotation", "task")},
      texts=tuple((t,) for t in demos["instruction"]),
      meta={"tasks": list(task_names)}, source=source))


def from_split(split: split_lib.Split) -> dict:
  """The inverse of `as_split`."""
  return {"image": split.images, "instruction": [t[0] for t in split.texts],
          **{k: split.targets[k] for k in ("pick", "place", "rotation", "task")}}
