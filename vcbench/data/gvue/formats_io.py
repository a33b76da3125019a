"""Shared pieces of the G-VUE real-format loaders (`formats.py`): the errors they raise, reading
JSON, text and image files with errors that name the file and the field, and the resizing rules
of the data contract (`split.py`): images bilinear to size x size, depth and label maps nearest
neighbour (an interpolated class index or a depth mixed across an edge is a value that was never
measured).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from PIL import Image

from vcbench.data.gvue import split as split_lib
from vcbench.errors import UserError

PathLike = str | os.PathLike


class FormatError(UserError, ValueError):
  """A dataset file that breaks its format; the message names the file and the field or line."""


class MissingFile(UserError, FileNotFoundError):
  """A file the format needs that is not where the paths given point."""


def require_file(path: PathLike, what: str) -> Path:
  """`path` as a Path, or MissingFile naming `what` it should hold."""
  path = Path(path)
  if not path.is_file():
    raise MissingFile(f"{path}: {what} not found.")
  return path


def read_json(path: PathLike, what: str) -> Any:
  path = require_file(path, what)
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise FormatError(f"{path}: not valid JSON ({e}).") from e


def read_lines(path: PathLike, what: str) -> list[str]:
  """The lines of a text file, without their line ends."""
  path = require_file(path, what)
  try:
    return path.read_text(encoding="utf-8").splitlines()
  except UnicodeDecodeError as e:
    raise FormatError(f"{path}: not UTF-8 text ({e}).") from e


def field(record: Any, key: str, where: str, kind: type | tuple[type, ...] | None = None) -> Any:
  """`record[key]`, or a FormatError saying `where` lacks it or holds the wrong type."""
  if not isinstance(record, Mapping):
    raise FormatError(f"{where} is a {type(record).__name__}, expected a JSON object.")
  if key not in record:
    raise FormatError(f"{where} has no {key!r}.")
  value = record[key]
  kinds = kind if isinstance(kind, tuple) else (kind,)
  # JSON's true/false load as bool, a subclass of int: not a count or a coordinate.
  wrong_bool = isinstance(value, bool) and bool not in kinds
  if kind is not None and (not isinstance(value, kinds) or wrong_bool):
    raise FormatError(f"{where}[{key!r}] is a {type(value).__name__} ({value!r:.60}), expected "
                      f"{' or '.join(k.__name__ for k in kinds)}.")
  return value


def expect_list(value: Any, where: str, length: int | None = None) -> list:
  if not isinstance(value, list):
    raise FormatError(f"{where} is a {type(value).__name__}, expected a list.")
  if length is not None and len(value) != length:
    raise FormatError(f"{where} has {len(value)} entries, expected {length}.")
  return value


def expect_split(split: str, known: Sequence[str], source: str, test: str = "test") -> str:
  """The dataset's name for `split`. The G-VUE job asks for "train" and "test"; "test" reads
  `test`, the split G-VUE reports (e.g. GQA's testdev)."""
  native = test if split == "test" else split
  if native not in known:
    raise FormatError(f"{source}: unknown split {split!r}; this format has {list(known)} "
                      f"('test' reads {test!r}).")
  return native


def check_request(size: int, limit: int | None) -> None:
  """The size and limit every loader takes: a positive side length, None or a positive count."""
  if isinstance(size, bool) or not isinstance(size, int) or size < 1:
    raise FormatError(f"size must be a positive int (the square side in pixels), got {size!r}.")
  if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
    raise FormatError(f"limit must be None or a positive int, got {limit!r}.")


def head(items: Sequence, limit: int | None) -> Sequence:
  return items if limit is None else items[:limit]


def open_image(path: PathLike, where: str) -> Image.Image:
  """The decoded image at `path`; `where` says which record named it, for a missing file."""
  path = Path(path)
  if not path.is_file():
    raise MissingFile(f"{where} names image {path}, which does not exist.")
  try:
    image = Image.open(path)
    image.load()
  except (OSError, ValueError, Image.DecompressionBombError) as e:
    raise FormatError(f"{path}: not a readable image ({e}).") from e
  return image


def resize_rgb(image: Image.Image, size: int) -> np.ndarray:
  """uint8 [size, size, 3], bilinear (PIL's, antialiased when shrinking)."""
  return np.asarray(image.convert("RGB").resize((size, size), Image.BILINEAR), np.uint8)


def resize_nearest(array: np.ndarray, size: int) -> np.ndarray:
  """A 2-D map [H, W] resampled to [size, size] by PIL's nearest neighbour (pixel centres, as
  torchvision resizes PIL label maps); float maps stay float32, integer maps become int32."""
  kind = np.float32 if np.issubdtype(array.dtype, np.floating) else np.int32
  resized = Image.fromarray(np.ascontiguousarray(array, kind)).resize((size, size), Image.NEAREST)
  return np.asarray(resized, kind)


def image_reader(size: int) -> Callable[[PathLike, str], np.ndarray]:
  """(path, where) -> uint8 [size, size, 3]; remembers each path, since VQA, grounding and
  Bongard examples share images and decoding dominates the load time. The reader's
  `original_size(path)` is the (width, height) of an image it has read."""
  decoded: dict[str, np.ndarray] = {}
  sizes: dict[str, tuple[int, int]] = {}

  def read(path: PathLike, where: str) -> np.ndarray:
    key = str(path)
    if key not in decoded:
      image = open_image(path, where)
      decoded[key], sizes[key] = resize_rgb(image, size), image.size
    return decoded[key]
  read.original_size = lambda path: sizes[str(path)]
  return read


def make_split(task: str, source: PathLike, images: list, targets: Mapping[str, list],
               dtypes: Mapping[str, Any], texts: Sequence[tuple[str, ...]] = (),
               scene: Sequence[str] = (), meta: Mapping[str, Any] | None = None) -> split_lib.Split:
  """The checked `Split` of per-example lists; FormatError if there is no example."""
  if not images:
    raise FormatError(f"{source}: no {task} examples for this split.")
  return split_lib.check(split_lib.Split(
      task=task, images=np.stack(images),
      targets={k: np.asarray(v, dtypes[k]) for k, v in targets.items()},
      texts=tuple(tuple(t) for t in texts), scene=tuple(scene), meta=dict(meta or {}),
      source=str(source)))
