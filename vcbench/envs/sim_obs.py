"""The observations of a host simulator as the BC track reads them (`rgb`, `proprio`, `state`):
their spec (every simulator), and for the adapted ones (`gym_sim`, `dm_env_adapter`) a square
frame and the flat state.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

from vcbench.envs.host import Spec


def square_frame(frame: np.ndarray, size: int) -> np.ndarray:
  """A rendered frame as uint8 [size, size, 3] (area-resized; renderers differ in size)."""
  frame = np.asarray(frame)
  if frame.dtype != np.uint8:
    frame = np.clip(frame, 0, 255).astype(np.uint8)
  frame = frame[..., :3]
  if frame.shape[:2] != (size, size):
    frame = np.asarray(Image.fromarray(frame).resize((size, size), Image.BOX))
  return np.ascontiguousarray(frame)


def obs_spec(state_dim: int, proprio_dim: int, image_size: int) -> Spec:
  """A host simulator's observation spec: `state`, `proprio` unless `proprio_dim` is 0, and an
  `rgb` frame unless `image_size` is 0."""
  spec = {"state": ((state_dim,), np.dtype(np.float32))}
  if proprio_dim:
    spec = {"proprio": ((proprio_dim,), np.dtype(np.float32)), **spec}
  if image_size:
    spec["rgb"] = ((image_size, image_size, 3), np.dtype(np.uint8))
  return spec


def render_size(render) -> int:
  """The frame side of a `RenderConfig`, 0 for none (no pixels)."""
  return 0 if render is None else render.size


def state_spec(dim: int, image_size: int) -> Spec:
  """The observation spec of an adapted simulator: its flat state (also as proprio), and a
  frame unless `image_size` is 0."""
  return obs_spec(dim, dim, image_size)
