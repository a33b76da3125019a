"""Galleries: every Colosseum test set on every task, every visual corruption at every severity.

    colosseum_gallery("gallery.png", tasks=("hammer",), size=128)   # the paper's Figs 9-28
    corruption_gallery("corruptions.png", size=224)                 # RobustNav's corruptions

Both are labelled grids (`gallery.labelled_grid`) written atomically; `launch.colosseum_gallery`
and `launch.corruption_gallery` are their command lines.
"""
from __future__ import annotations

import functools
import os
from typing import Sequence

import jax
import numpy as np
from PIL import Image

from vcbench.benchmarks import colosseum as col
from vcbench.data.demos import episode_seeds
from vcbench.envs.mujoco import metaworld as mw
from vcbench.robustness import visual
from vcbench.viz import gallery


def colosseum_row(task: str, size: int, seed: int) -> list[np.ndarray | None]:
  """The first frame of test episode `seed` under every test set (None: not applicable),
  rendered by the simulator the benchmark evaluates with."""
  sim = col.make_sim(task, mw.RenderConfig(size=size), 10)()
  episode = episode_seeds("test", seed + 1)[-1]
  try:
    return [None if isinstance(factors, str) else sim.reset(col.encode(name, episode))["rgb"]
            for name, factors in sim.test_sets.items()]
  finally:
    sim.close()


def colosseum_gallery(out: str | os.PathLike[str], tasks: Sequence[str] = col.TASKS,
                      size: int = 128, seed: int = 0) -> tuple[int, int]:
  """Rows are tasks, columns the test sets; returns the PNG's (width, height)."""
  rows = {task: colosseum_row(task, size, seed) for task in tasks}
  return gallery.save_png(gallery.labelled_grid(rows, col.TEST_SETS, label_width=140), out)


def load_image(path: str, size: int) -> np.ndarray:
  """`path` centre-cropped to a square and resized to size x size, uint8 RGB."""
  image = Image.open(path).convert("RGB")
  side = min(image.size)
  left, top = (image.width - side) // 2, (image.height - side) // 2
  image = image.crop((left, top, left + side, top + side))
  return np.asarray(image.resize((size, size), Image.BILINEAR))


def nav_frame(size: int, episode: int = 0) -> np.ndarray:
  """The first RGB view of vcbench-nav PointNav validation episode `episode`."""
  from vcbench.envs import nav  # pylint: disable=g-import-not-at-top - only this path needs it.
  env = nav.make("pointnav", "val", num_scenes=1, num_episodes=episode + 1, height=size,
                 width=size, sensors=("rgb",), auto_reset=False)
  return np.asarray(jax.jit(env.reset_to)(episode).obs["rgb"])


def corrupted_grid(image: np.ndarray, seed: int = 0) -> dict[str, list[np.ndarray]]:
  """{name: [the image at each severity]} for every registered corruption; random ones use one
  key for the whole grid, so a row shows the same draw at growing severity."""
  key = jax.random.key(seed)
  grid = {}
  for name, corruption in visual.CORRUPTIONS.items():
    grid[name] = [np.asarray(jax.jit(functools.partial(corruption.fn, severity=s))(key, image))
                  for s in corruption.severities]
  return grid


def corruption_sheet(image: np.ndarray, grid: dict[str, list[np.ndarray]]):
  """The labelled sheet: one row per corruption, the clean image first in every row."""
  columns = 1 + max(len(row) for row in grid.values())
  return gallery.labelled_grid({name: [image] + row for name, row in grid.items()},
                               ["clean"] + [f"severity {s}" for s in range(1, columns)])


def corruption_gallery(out: str | os.PathLike[str], size: int = 224,
                       image_path: str | None = None, seed: int = 0) -> tuple[int, int]:
  """Renders a vcbench-nav frame (or loads `image_path`), corrupts it and writes the PNG
  atomically; returns its (width, height)."""
  image = load_image(image_path, size) if image_path else nav_frame(size)
  return gallery.save_png(corruption_sheet(image, corrupted_grid(image, seed)), out)
