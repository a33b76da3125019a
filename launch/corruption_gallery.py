"""A PNG of every visual corruption at every severity, applied to one frame.

  python -m launch.corruption_gallery --out corruptions.png [--size 224] [--image photo.png]
      [--seed 0]

The frame is the first view of a vcbench-nav PointNav validation episode rendered at
--size x --size, or --image (any file PIL reads, centre-cropped to a square and resized to
--size). Rows are the corruptions of `vcbench.robustness.visual.CORRUPTIONS`, columns the
clean frame and severities 1-5; random corruptions use one key (--seed) for the whole grid,
so a row shows the same draw at growing severity. Spatial parameters follow the frame's size
(`scale=None`), so --size 32 shows what the navigation agents see.
"""
from __future__ import annotations

import argparse
import functools
import os

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

import jax
import numpy as np
from PIL import Image

from vcbench.reports import gallery
from vcbench.robustness import visual


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
  """{name: [the image at severity 1..5]} for every registered corruption."""
  key = jax.random.key(seed)
  grid = {}
  for name, corruption in visual.CORRUPTIONS.items():
    grid[name] = [np.asarray(jax.jit(functools.partial(corruption.fn, severity=s))(key, image))
                  for s in corruption.severities]
  return grid


def draw(image: np.ndarray, grid: dict[str, list[np.ndarray]]):
  """The labelled sheet: one row per corruption, the clean image first in every row."""
  columns = 1 + max(len(row) for row in grid.values())
  return gallery.labelled_grid({name: [image] + row for name, row in grid.items()},
                               ["clean"] + [f"severity {s}" for s in range(1, columns)])


def write_gallery(out: str | os.PathLike[str], size: int = 224, image_path: str | None = None,
                  seed: int = 0) -> tuple[int, int]:
  """Renders (or loads) the frame, corrupts it and writes the PNG atomically; returns its
  (width, height)."""
  image = load_image(image_path, size) if image_path else nav_frame(size)
  return gallery.save_png(draw(image, corrupted_grid(image, seed)), out)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", required=True, help="the PNG to write")
  parser.add_argument("--size", type=int, default=224, help="frame side in pixels")
  parser.add_argument("--image", default=None, help="use this picture instead of a nav frame")
  parser.add_argument("--seed", type=int, default=0, help="key of the random corruptions")
  args = parser.parse_args()
  if args.size < 8:
    parser.error(f"--size must be at least 8, got {args.size}")
  try:
    width, height = write_gallery(args.out, args.size, args.image, args.seed)
  except OSError as e:  # An unreadable --image (PIL's UnidentifiedImageError is an OSError).
    parser.error(str(e))
  print(f"wrote {args.out} ({width}x{height})")


if __name__ == "__main__":
  main()
