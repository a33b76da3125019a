"""Speed of the visual corruptions: vcbench's jitted, vmapped JAX functions against the
reference implementations looped over the batch, measured in one run.

  python -m launch.bench.corruptions [--batch 64] [--size 224] [--repeats 5]
      [--severities 1,2,3,4,5] [--markdown]

For every corruption of `vcbench.robustness.visual.CORRUPTIONS` and every severity, one timed
call corrupts --batch photographs (random crops of scikit-image's sample photos, resized to
--size) with `jax.jit(jax.vmap(fn))`, after a warm-up call that compiles, until
`block_until_ready`; the reference (imagecorruptions 1.1.2 for defocus_blur, motion_blur,
speckle_noise and spatter, RobustNav's skimage `lighting` for low_lighting) runs image by
image as RobustNav does, `np.uint8(corrupt(PIL image))`. Each side's time per severity is the
median of --repeats calls; images/s = batch * severities / the sum of those medians. The
other corruptions have no reference implementation.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import sys
import types
from typing import Callable
import warnings

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from launch import cli
from launch.bench import timing

import jax
import numpy as np
from PIL import Image

from vcbench.robustness import visual

_IMAGECORRUPTIONS = ("defocus_blur", "motion_blur", "speckle_noise", "spatter")
_LIGHTING = (0.1, 0.2, 0.3, 0.4, 0.5)


def import_imagecorruptions():
  """imagecorruptions.corruptions, importable without setuptools' pkg_resources: it only
  uses `resource_filename` for its frost images, so a stand-in module is enough."""
  try:
    importlib.import_module("pkg_resources")
  except ImportError:
    shim = types.ModuleType("pkg_resources")
    shim.resource_filename = lambda package, path: path
    sys.modules["pkg_resources"] = shim
  with warnings.catch_warnings():  # Its scipy.ndimage.interpolation import is deprecated.
    warnings.simplefilter("ignore", DeprecationWarning)
    return importlib.import_module("imagecorruptions.corruptions")


def robustnav_lighting(image: np.ndarray, severity: int) -> np.ndarray:
  """RobustNav's `lighting` (skimage HSV, value lowered by 0.1-0.5), as np.uint8 of it."""
  from skimage import color  # pylint: disable=g-import-not-at-top - only references need it.
  x = color.rgb2hsv(np.asarray(image) / 255.0)
  x[..., 2] = np.clip(x[..., 2] - _LIGHTING[severity - 1], 0, 1)
  return np.uint8(np.clip(color.hsv2rgb(x), 0, 1) * 255)


def reference(name: str) -> Callable[[np.ndarray, int], np.ndarray] | None:
  """The reference implementation of corruption `name` on one uint8 image, or None."""
  if name == "low_lighting":
    return robustnav_lighting
  if name in _IMAGECORRUPTIONS:
    fn = getattr(import_imagecorruptions(), name)
    return lambda image, severity: np.uint8(fn(Image.fromarray(image), severity))
  return None


def photo_batch(batch: int, size: int, seed: int = 0,
                photos: list[np.ndarray] | None = None) -> np.ndarray:
  """`batch` random square crops (at least half the short side) of `photos` in turn, resized
  to size x size, uint8; by default scikit-image's colour sample photographs."""
  if photos is None:
    from skimage import data  # pylint: disable=g-import-not-at-top
    photos = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
  rng = np.random.default_rng(seed)
  out = []
  for i in range(batch):
    photo = photos[i % len(photos)]
    h, w = photo.shape[:2]
    side = int(rng.integers(min(h, w) // 2, min(h, w) + 1))
    y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
    crop = Image.fromarray(photo[y:y + side, x:x + side])
    out.append(np.asarray(crop.resize((size, size), Image.BILINEAR)))
  return np.stack(out)


def time_vcbench(name: str, images: np.ndarray, severity: int, repeats: int) -> float:
  """Median seconds of one jitted, vmapped call on the batch (compiled beforehand)."""
  fn = jax.jit(jax.vmap(functools.partial(visual.get(name).fn, severity=severity)))
  keys = jax.random.split(jax.random.key(0), len(images))
  batch = jax.device_put(images)
  return timing.median(lambda: fn(keys, batch), repeats)


def time_reference(fn, images: np.ndarray, severity: int, repeats: int) -> float:
  """Median seconds of the reference looped over the batch."""
  np.random.seed(0)
  return timing.median(lambda: [fn(x, severity) for x in images], repeats, warmup=False)


def run(batch: int, size: int, repeats: int, severities: tuple[int, ...]) -> list[dict]:
  """One row per corruption: images/s of vcbench and of the reference (None if none)."""
  images = photo_batch(batch, size)
  rows = []
  for name in visual.CORRUPTIONS:
    ours = sum(time_vcbench(name, images, s, repeats) for s in severities)
    ref_fn = reference(name)
    ref = (sum(time_reference(ref_fn, images, s, repeats) for s in severities)
           if ref_fn else None)
    n = batch * len(severities)
    rows.append({"corruption": name, "vcbench": n / ours, "reference": n / ref if ref else None})
  return rows


def format_table(rows: list[dict], markdown: bool) -> str:
  header = ("corruption", "vcbench img/s", "reference img/s", "ratio")
  lines = []
  for row in rows:
    ref = row["reference"]
    lines.append((row["corruption"], f"{row['vcbench']:.1f}",
                  "-" if ref is None else f"{ref:.1f}",
                  "-" if ref is None else f"{row['vcbench'] / ref:.2f}x"))
  if markdown:
    table = [header, ("---",) * 4] + lines
    return "\n".join("| " + " | ".join(cells) + " |" for cells in table)
  widths = [max(len(r[i]) for r in [header] + lines) for i in range(4)]
  return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in [header] + lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--size", type=int, default=224)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--severities", default="1,2,3,4,5")
  parser.add_argument("--markdown", action="store_true", help="print a markdown table")
  args = parser.parse_args()
  severities = tuple(int(s) for s in args.severities.split(","))
  if args.batch < 1 or args.repeats < 1 or args.size < 32:
    parser.error("--batch and --repeats must be >= 1 and --size >= 32 (imagecorruptions' "
                 "minimum)")
  if not set(severities) <= set(visual.SEVERITIES):
    parser.error(f"--severities must be within {visual.SEVERITIES}, got {severities}")
  print(f"batch {args.batch}, {args.size}x{args.size}, severities {severities}, median of "
        f"{args.repeats}; JAX on {jax.devices()[0].platform}")
  print(format_table(run(args.batch, args.size, args.repeats, severities), args.markdown))


if __name__ == "__main__":
  with cli.exit_statuses():
    main()
