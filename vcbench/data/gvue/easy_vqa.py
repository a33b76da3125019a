"""G-VUE's VQA task on easy-VQA, a small real VQA dataset that ships inside its pip wheel.

G-VUE evaluates VQA on GQA, whose images and questions cannot be downloaded here. easy-VQA
(`pip install easy-vqa==1.0`, Victor Zhou's dataset) has the same form -- an image, a free-form
question, one answer from a closed vocabulary -- at toy scale: 64x64 PNGs of one coloured shape
(circle, rectangle or triangle in one of eight colours), 38,575 train questions on 4,000 images
and 9,673 test questions on 1,000 images, 13 answers (shapes, colours, yes/no).

Construction of a split:
- The package's own train/test partition. Its train and test images are different pictures:
  no test PNG equals a train PNG pixel for pixel (checked by the tests), so the split is
  disjoint by image. Image ids restart at 0 in each partition, so `scene` names an image as
  "easy-vqa/<split>/<id>".
- `answer` indexes `meta["answers"]`, the package's answer list in its order (`get_answers`).
- The questions are shuffled by `seed`; `limit` keeps the first `limit` of them. Each image is
  decoded and resized (bilinear) once, however many questions ask about it.
Memory is N x size x size x 3 bytes (the full train split at 224 is ~5.8 GB): pass `limit`.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

from vcbench.data.gvue.split import Split, SplitError, check

SPLITS = ("train", "test")


def _package():
  try:
    import easy_vqa  # noqa: PLC0415 - optional dependency, only this task needs it.
  except ImportError as e:
    raise ImportError("easy-VQA is not installed: `pip install easy-vqa==1.0` (its wheel holds "
                      "the images and questions).") from e
  return easy_vqa


def answers() -> tuple[str, ...]:
  """The package's answer vocabulary, in its order (what `answer` indexes)."""
  return tuple(_package().get_answers())


def questions(split: str) -> tuple[list[str], list[str], list[int]]:
  """(question texts, answer words, image ids) of `split`, in the package's order."""
  pkg = _package()
  return pkg.get_train_questions() if split == "train" else pkg.get_test_questions()


def image_paths(split: str) -> dict[int, str]:
  """Image id -> PNG path for `split`."""
  pkg = _package()
  return pkg.get_train_image_paths() if split == "train" else pkg.get_test_image_paths()


def load_image(path: str, size: int) -> np.ndarray:
  """The PNG at `path` as uint8 [size, size, 3], resized bilinearly."""
  with Image.open(path) as image:
    image = image.convert("RGB")
    if image.size != (size, size):
      image = image.resize((size, size), Image.BILINEAR)
    return np.asarray(image, np.uint8)


def _check_args(split: str, size: int, limit: int | None, seed: int) -> None:
  if split not in SPLITS:
    raise SplitError(f"easy-VQA: split must be one of {SPLITS}, got {split!r}.")
  if not isinstance(size, (int, np.integer)) or size < 1:
    raise SplitError(f"easy-VQA: size must be a positive int, got {size!r}.")
  if limit is not None and (not isinstance(limit, (int, np.integer)) or limit < 1):
    raise SplitError(f"easy-VQA: limit must be a positive int or None, got {limit!r}.")
  if not isinstance(seed, (int, np.integer)) or seed < 0:
    raise SplitError(f"easy-VQA: seed must be an int >= 0, got {seed!r}.")


def make_split(split: str, size: int, limit: int | None = None, seed: int = 0) -> Split:
  """`split` ("train" or "test") of easy-VQA as a G-VUE VQA split with images of side `size`:
  the questions shuffled by `seed`, the first `limit` of them (all when None)."""
  _check_args(split, size, limit, seed)
  texts, words, image_ids = questions(split)
  vocabulary = answers()
  index = {word: i for i, word in enumerate(vocabulary)}
  order = np.random.default_rng(seed).permutation(len(texts))[:limit]
  paths = image_paths(split)
  used = sorted({image_ids[i] for i in order})
  missing = [i for i in used if i not in paths]
  if missing:
    raise SplitError(f"easy-VQA {split}: questions ask about images {missing[:5]} that the "
                     f"package does not ship; reinstall easy-vqa==1.0.")
  row = {image_id: r for r, image_id in enumerate(used)}
  pixels = np.stack([load_image(paths[i], size) for i in used]) if used else (
      np.zeros((0, size, size, 3), np.uint8))
  return check(Split(
      task="vqa",
      images=pixels[[row[image_ids[i]] for i in order]],
      targets={"answer": np.array([index[words[i]] for i in order], np.int32)},
      texts=tuple((texts[i],) for i in order),
      scene=tuple(f"easy-vqa/{split}/{image_ids[i]}" for i in order),
      meta={"answers": vocabulary, "dataset": "easy-vqa 1.0", "split": split, "seed": seed},
      source=f"easy-vqa 1.0 {split} (seed {seed}, limit {limit})"))
