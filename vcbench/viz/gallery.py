"""Labelled image grids (galleries of corruptions and perturbations), written atomically."""
from __future__ import annotations

import io
import os
from typing import Mapping, Sequence

import numpy as np
from PIL import Image
from PIL import ImageDraw

_HEADER_H, _GAP = 20, 4


def labelled_grid(rows: Mapping[str, Sequence[np.ndarray | None]], titles: Sequence[str],
                  label_width: int = 110, min_panel: int = 96) -> Image.Image:
  """One row per `rows` item (its name on the left), one column per title; a None tile is
  drawn as a grey '-' (not applicable). Small frames are enlarged (nearest) to `min_panel`."""
  tiles = [t for row in rows.values() for t in row if t is not None]
  panel = max(max((t.shape[0] for t in tiles), default=0), min_panel)
  sheet = Image.new("RGB", (label_width + len(titles) * (panel + _GAP),
                            _HEADER_H + len(rows) * (panel + _GAP)), "white")
  pen = ImageDraw.Draw(sheet)
  for c, title in enumerate(titles):
    pen.text((label_width + c * (panel + _GAP) + 4, 4), title, fill="black")
  for r, (name, row) in enumerate(rows.items()):
    y = _HEADER_H + r * (panel + _GAP)
    pen.text((4, y + panel // 2 - 6), name, fill="black")
    for c, tile in enumerate(row):
      x = label_width + c * (panel + _GAP)
      if tile is None:
        pen.rectangle((x, y, x + panel - 1, y + panel - 1), fill=(200, 200, 200))
        pen.text((x + panel // 2 - 3, y + panel // 2 - 6), "-", fill="black")
        continue
      sheet.paste(Image.fromarray(tile).resize((panel, panel), Image.NEAREST), (x, y))
  return sheet


def save_png(sheet: Image.Image, out: str | os.PathLike[str]) -> tuple[int, int]:
  """Writes `sheet` to `out` atomically; returns its (width, height)."""
  from vcbench import files  # pylint: disable=g-import-not-at-top
  buffer = io.BytesIO()
  sheet.save(buffer, format="PNG")
  files.atomic_write(out, lambda f: f.write(buffer.getvalue()))
  return sheet.size
