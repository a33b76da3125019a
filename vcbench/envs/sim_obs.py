"""The observations of an adapted simulator (`gym_sim`, `dm_env_adapter`): a square frame
and the simulator's flat state, shaped as the BC track reads them (`rgb`, `proprio`, `state`).
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


def state_spec(dim: int, image_size: int) -> Spec:
  """The observation spec of an adapted simulator: its flat state, and a frame unless
  `image_size` is 0."""
  spec = {"proprio": ((dim,), np.dtype(np.float32)), "state": ((dim,), np.dtype(np.float32))}
  if image_size:
    spec["rgb"] = ((image_size, image_size, 3), np.dtype(np.uint8))
  return spec
