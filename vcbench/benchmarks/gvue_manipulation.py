"""G-VUE's manipulation task on the MuJoCo tabletop: oracle demos on the seen split, the
affordance decoder trained on the frozen PVR's cached features, closed-loop evaluation on the
unseen split with Ravens' score.

Protocol as G-VUE's (CLIPort's multi-task seen->unseen setting): one decoder is trained on the
demos of every task at once (`config.tasks`, `config.demos` oracle episodes each, seen colours
or shapes), then each task is evaluated on `config.episodes` unseen-split episodes; the task's
metric is the mean Ravens score x100 over the unseen tasks (`score@unseen`), next to each task's
own score and success rate. Only the oracle's successful episodes become demos (CLIPort keeps
those too).

Geometry (`Frame`): the tabletop renders the workspace (0.5 m x 1.0 m) at `image_size / 1.0 m`
per pixel, so a workspace image is image_size/2 x image_size; it is padded with black rows to a
square image_size x image_size, the PVR's input, and the decoder's affordances live on the
PVR's stride-4 grid. Pick and place targets are continuous grid coordinates (soft labels);
decoded points go back through the grid to metres and reach the simulator as pixels and a
rotation bin (`tabletop_tasks.Action`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.envs.mujoco import tabletop as tt
from vcbench.envs.mujoco import tabletop_tasks as tasks_lib
from vcbench.models import affordance

PYRAMID = ("p0", "p1", "p2", "p3")


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


def _cross_entropy(logits: jax.Array, target: jax.Array) -> jax.Array:
  flat = logits.reshape(logits.shape[0], -1)
  return -(jax.nn.log_softmax(flat) * target.reshape(flat.shape)).sum(-1).mean()


def make_loss(n_rotations: int, crop: int, valid: np.ndarray) -> Callable:
  """CLIPort's losses on soft labels: cross-entropy over the pick map and over the place map
  x rotations, the place map read at the demo's pick point (teacher forcing, as CLIPort)."""
  valid = jnp.asarray(valid)

  def loss(model, variables, batch, key):
    del key
    (pick, k, q), _ = model.apply(variables, [batch[p] for p in PYRAMID], batch["text"],
                                  batch["text_mask"])
    shape = pick.shape[1:]
    pick = jnp.where(valid, pick, -1e9)
    pick_target = jax.vmap(lambda p: affordance.soft_target(p, shape))(batch["pick"])
    place = affordance.place_logits(k, q, batch["pick"], n_rotations, crop)
    place = jnp.where(valid[..., None], place, -1e9)
    rot = jax.nn.one_hot(batch["rotation"], n_rotations)
    place_target = jax.vmap(lambda p: affordance.soft_target(p, shape))(batch["place"])
    place_target = place_target[..., None] * rot[:, None, None, :]
    return _cross_entropy(pick, pick_target) + _cross_entropy(place, place_target), {}

  return loss


def make_policy(encoder_apply: Callable, model, variables, text_encoder, frame: Frame,
                n_rotations: int, crop: int, max_len: int) -> Callable:
  """`policy(episode) -> Action`: render, encode, pick at the refined pick argmax, place at
  the refined argmax of the best rotation's place map."""
  valid = jnp.asarray(frame.valid())

  @jax.jit
  def act(images, text, mask):
    pyramid = encoder_apply(images)["pyramid"]
    (pick, k, q), _ = model.apply(variables, list(pyramid), text, mask)
    p = affordance.refine(pick[0], valid)
    place = affordance.place_logits(k, q, p[None], n_rotations, crop)[0]
    best_rot = jnp.argmax(jnp.where(valid[..., None], place, -jnp.inf).max((0, 1)))
    return p, affordance.refine(place[..., best_rot], valid), best_rot

  def policy(ep: tasks_lib.Episode) -> tasks_lib.Action:
    image = frame.image(ep.sim.render()["rgb"])[None]
    text, mask = text_encoder.encode([ep.instruction], max_len)
    p, placed, r = act(jnp.asarray(image), jnp.asarray(text), jnp.asarray(mask))
    return tasks_lib.Action(frame.to_table(np.asarray(p)), frame.to_table(np.asarray(placed)),
                            2 * math.pi * int(r) / n_rotations)

  return policy


def evaluate(policy: Callable, task_names: Sequence[str], episodes: int, frame: Frame,
             n_rotations: int, split: str = "unseen", first_seed: int = 0) -> dict[str, float]:
  """Ravens' score x100 and success % per task, and `score@<split>` their mean."""
  values, scores = {}, []
  for name in task_names:
    runs = []
    for seed in range(first_seed, first_seed + episodes):
      ep = tasks_lib.Episode(name, split, seed, frame.workspace)
      try:
        while not ep.done:
          ep.step(policy(ep), n_rotations)
        runs.append((ep.total, ep.success))
      finally:
        ep.close()
    score = 100 * float(np.mean([r[0] for r in runs]))
    values[f"{name}_score@{split}"] = score
    values[f"{name}_success@{split}"] = 100 * float(np.mean([r[1] for r in runs]))
    scores.append(score)
  values[f"score@{split}"] = float(np.mean(scores))
  return values
