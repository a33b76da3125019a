"""Real-format loader of G-VUE's commonsense reasoning task: VCR's Q->A multiple choice.

VCR's questions and answers are token lists in which a list of integers stands for detected
objects ("Why is [0] pointing at [1]?"), indexing the boxes and names of the image's metadata
file. A frozen encoder sees only pixels and a text encoder only words, so the reference has to
survive in both: following Zellers et al.'s preprocessing (MERLOT Reserve), every object the
question or a choice mentions is highlighted on the image with a translucent box in its own
colour, and the text refers to it in words (`refer_by`):
  "colour"  the object's type and its box's colour: "the person in the red box" (default; the
            words match the pixels),
  "name"    Zellers' names: "the car" for the only car in the image, else "Person 2" (the 2nd
            person in the metadata).
Colours follow the order of first mention, so the objects of one question differ in colour (up
to `len(BOX_COLOURS)` objects, then colours repeat).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from vcbench.data.gvue import split as split_lib
from vcbench.data.gvue.formats_io import (FormatError, PathLike, check_request, expect_list,
                                          expect_split, field, make_split, open_image, read_json,
                                          read_lines, resize_rgb)

VCR_CHOICES = 4
# Named, mutually distinct colours (Trubetskoy's list of 20 simple distinct colours, first 12).
BOX_COLOURS = (("red", (230, 25, 75)), ("green", (60, 180, 75)), ("blue", (0, 130, 200)),
               ("yellow", (255, 225, 25)), ("orange", (245, 130, 48)), ("purple", (145, 30, 180)),
               ("cyan", (70, 240, 240)), ("magenta", (240, 50, 230)), ("lime", (210, 245, 60)),
               ("pink", (250, 190, 212)), ("brown", (170, 110, 40)), ("navy", (0, 0, 128)))
BOX_FILL_ALPHA = 38                # G-VUE's box overlay opacity, 15%.
BOX_LINE_FRACTION = 0.008          # outline width / longer image side: ~2 px once at 224.
REFER_BY = ("colour", "name")
# A space the tokeniser put before punctuation or an English clitic ("do n't", "he 's").
_SPACE_BEFORE = re.compile(r" (?=[.,!?;:)\]]|n't\b|'(?:s|re|m|ll|ve|d)\b)")
_SPACE_AFTER = re.compile(r"(?<=[(\[]) ")


def object_names(names: Sequence[str]) -> list[str]:
  """Zellers et al.'s name of each detected object: "the car" when it is the image's only car,
  else its type and 1-based rank among that type, "Person 2"."""
  total, seen, out = Counter(names), Counter(), []
  for name in names:
    seen[name] += 1
    out.append(f"the {name}" if total[name] == 1 else f"{name.capitalize()} {seen[name]}")
  return out


def detokenise(tokens: Sequence, refer: Callable[[int], str], where: str) -> str:
  """VCR tokens as text, each object-index list replaced by `refer(i)` for its objects."""
  words = []
  for token in tokens:
    if isinstance(token, str):
      words.append(token)
    elif isinstance(token, list) and token and all(_is_index(i) for i in token):
      words.append(_enumerate_words([refer(i) for i in token]))
    else:
      raise FormatError(f"{where}: token {token!r} is neither a word nor a list of object "
                        "indices.")
  return _SPACE_AFTER.sub("", _SPACE_BEFORE.sub("", " ".join(words)))


def _is_index(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _enumerate_words(words: list[str]) -> str:
  return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def mentioned_objects(token_lists: Sequence[Sequence]) -> list[int]:
  """The object indices the token lists mention, in order of first mention."""
  seen: dict[int, None] = {}
  for tokens in token_lists:
    for token in tokens:
      if isinstance(token, list):
        for i in token:
          seen.setdefault(i, None)
  return list(seen)


def highlight_boxes(image: Image.Image, boxes: Sequence[tuple[Sequence[float], tuple]]
                    ) -> Image.Image:
  """`image` with each (x0, y0, x1, y1) box tinted and outlined in its RGB colour."""
  out = image.convert("RGBA")
  width = max(2, round(BOX_LINE_FRACTION * max(out.size)))
  for (x0, y0, x1, y1), rgb in boxes:
    overlay = Image.new("RGBA", out.size, rgb + (0,))
    ImageDraw.Draw(overlay).rectangle((x0, y0, x1, y1), fill=rgb + (BOX_FILL_ALPHA,),
                                      outline=rgb + (255,), width=width)
    out = Image.alpha_composite(out, overlay)   # one at a time, so overlaps mix their tints.
  return out.convert("RGB")


def load_commonsense_reasoning(root: PathLike, split: str, size: int, limit: int | None = None, *,
                               image_dir: PathLike | None = None,
                               refer_by: str = "colour") -> split_lib.Split:
  """VCR Q->A from root/{train,val}.jsonl (one question a line: question, answer_choices,
  answer_label, img_fn, metadata_fn, movie) with images and metadata JSON ({names, boxes
  [[x0, y0, x1, y1, score]], width, height}) under `image_dir` (default root/vcr1images).
  "test" reads val, as G-VUE does (VCR's test answers are hidden).
  """
  check_request(size, limit)
  if refer_by not in REFER_BY:
    raise FormatError(f"commonsense_reasoning: refer_by must be one of {REFER_BY}, got "
                      f"{refer_by!r}.")
  root = Path(root)
  split = expect_split(split, ("train", "val"), str(root), test="val")
  path = root / f"{split}.jsonl"
  image_dir = Path(image_dir) if image_dir is not None else root / "vcr1images"
  images, answers, texts, scenes = [], [], [], []
  for line_no, line in enumerate(read_lines(path, "VCR questions"), 1):
    if limit is not None and len(images) >= limit:
      break
    if not line.strip():
      continue
    where = f"{path}: line {line_no}"
    item = _json_line(line, where)
    image, text = _example(item, image_dir, refer_by, where)
    answer = field(item, "answer_label", where, int)
    if not 0 <= answer < VCR_CHOICES:
      raise FormatError(f"{where}: answer_label {answer} is not a choice index 0..3.")
    images.append(resize_rgb(image, size))
    answers.append(answer)
    texts.append(text)
    scenes.append(str(item.get("movie") or item["img_fn"].split("/")[0]))
  return make_split("commonsense_reasoning", path, images, {"answer": answers},
                    {"answer": np.int32}, texts=texts, scene=scenes,
                    meta={"dataset": "VCR Q->A", "refer_by": refer_by})


def _json_line(line: str, where: str) -> dict:
  try:
    return json.loads(line)
  except json.JSONDecodeError as e:
    raise FormatError(f"{where}: not valid JSON ({e}).") from e


def _example(item: dict, image_dir: Path, refer_by: str, where: str
             ) -> tuple[Image.Image, tuple[str, ...]]:
  """The highlighted image and (question, choice 0..3) of one VCR line."""
  question = field(item, "question", where, list)
  choices = expect_list(field(item, "answer_choices", where, list), f"{where}['answer_choices']",
                        VCR_CHOICES)
  metadata_path = image_dir / field(item, "metadata_fn", where, str)
  metadata = read_json(metadata_path, f"VCR metadata of {where}")
  types = field(metadata, "names", str(metadata_path), list)
  boxes = expect_list(field(metadata, "boxes", str(metadata_path), list),
                      f"{metadata_path}['boxes']", len(types))
  mentioned = mentioned_objects([question, *(expect_list(c, f"{where}['answer_choices']")
                                             for c in choices)])
  if any(not _is_index(i) or i >= len(types) for i in mentioned):
    raise FormatError(f"{where}: object indices {mentioned} go beyond the {len(types)} objects "
                      f"of {metadata_path}.")
  colour = {i: BOX_COLOURS[k % len(BOX_COLOURS)] for k, i in enumerate(mentioned)}
  names = object_names(types)
  refer = ((lambda i: f"the {types[i]} in the {colour[i][0]} box") if refer_by == "colour"
           else (lambda i: names[i]))
  text = (detokenise(question, refer, f"{where}['question']"),
          *(detokenise(c, refer, f"{where}['answer_choices'][{j}]") for j, c in enumerate(choices)))
  image = open_image(image_dir / field(item, "img_fn", where, str), where)
  # Boxes are in the metadata's pixel frame; scale them if the image file was resized since.
  width = metadata.get("width")
  scale = image.size[0] / width if isinstance(width, (int, float)) and width > 0 else 1.0
  drawn = [(_box(boxes[i], f"{metadata_path}['boxes'][{i}]", scale), colour[i][1])
           for i in mentioned]
  return highlight_boxes(image, drawn), text


def _box(box, where: str, scale: float) -> list[float]:
  if not isinstance(box, list) or len(box) < 4 or not all(
      isinstance(v, (int, float)) for v in box[:4]):
    raise FormatError(f"{where} must be [x0, y0, x1, y1, (score)], got {box!r}.")
  return [float(v) * scale for v in box[:4]]
