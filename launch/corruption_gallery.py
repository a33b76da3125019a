"""A PNG of every visual corruption at every severity, applied to one frame.

  python -m launch.corruption_gallery --out corruptions.png [--size 224] [--image photo.png]
      [--seed 0]

The frame is the first view of a vcbench-nav PointNav validation episode rendered at
--size x --size, or --image (any file PIL reads, centre-cropped to a square and resized to
--size). Rows are the corruptions of `vcbench.robustness.visual.CORRUPTIONS`, columns the
clean frame and severities 1-5; random corruptions use one key (--seed) for the whole grid,
so a row shows the same draw at growing severity. Spatial parameters follow the frame's size
(`scale=None`), so --size 32 shows what the navigation agents see
(`vcbench.viz.galleries.corruption_gallery`).
"""
from __future__ import annotations

import argparse

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from launch import cli
from vcbench.viz import galleries


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
    width, height = galleries.corruption_gallery(args.out, args.size, args.image, args.seed)
  except OSError as e:  # An unreadable --image (PIL's UnidentifiedImageError is an OSError).
    parser.error(str(e))
  print(f"wrote {args.out} ({width}x{height})")


if __name__ == "__main__":
  with cli.exit_statuses():
    main()
