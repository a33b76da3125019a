"""easy-VQA as a G-VUE VQA split: the contract, determinism, the package's train/test images
are disjoint, and every answer, question and image is the package's own."""
import hashlib

import numpy as np
import pytest
from PIL import Image

from vcbench.data.gvue import easy_vqa
from vcbench.data.gvue import split as split_lib

easy_vqa_pkg = pytest.importorskip("easy_vqa")


# easy-VQA's eight shape colours (its generator's RGB values; its green is pure green).
COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
           "teal": (0, 128, 128), "brown": (165, 42, 42), "black": (0, 0, 0),
           "gray": (128, 128, 128)}


def _pixels_hash(path):
  return hashlib.sha1(np.asarray(Image.open(path).convert("RGB")).tobytes()).hexdigest()


def test_split_passes_the_contract_and_uses_the_package_vocabulary():
  s = easy_vqa.make_split("test", 32, limit=20, seed=1)
  assert split_lib.check(s) is s and len(s) == 20
  assert s.task == "vqa" and s.images.shape == (20, 32, 32, 3) and s.images.dtype == np.uint8
  assert s.meta["answers"] == tuple(easy_vqa_pkg.get_answers()) and len(s.meta["answers"]) == 13
  assert all(len(t) == 1 and t[0].endswith("?") for t in s.texts)


def test_same_seed_same_split_other_seed_other_questions():
  a, b = (easy_vqa.make_split("train", 16, limit=12, seed=3) for _ in range(2))
  np.testing.assert_array_equal(a.images, b.images)
  np.testing.assert_array_equal(a.targets["answer"], b.targets["answer"])
  assert a.texts == b.texts and a.scene == b.scene
  c = easy_vqa.make_split("train", 16, limit=12, seed=4)
  assert (c.texts, c.scene) != (a.texts, a.scene)


def test_answers_and_images_are_the_packages():
  s = easy_vqa.make_split("train", 64, limit=40, seed=0)
  texts, words, ids = easy_vqa_pkg.get_train_questions()
  asked = {(q, i): w for q, w, i in zip(texts, words, ids)}
  paths = easy_vqa_pkg.get_train_image_paths()
  for k in range(len(s)):
    image_id = int(s.scene[k].rsplit("/", 1)[1])
    assert s.meta["answers"][s.targets["answer"][k]] == asked[(s.texts[k][0], image_id)]
    # At the package's own 64x64 no resize happens: the pixels are the PNG's.
    png = np.asarray(Image.open(paths[image_id]).convert("RGB"))
    np.testing.assert_array_equal(s.images[k], png)


def test_colour_answers_name_the_shape_colour_in_the_image():
  """A semantic spot check of the pairing: the shape is drawn in the exact named colour, the
  second most common pixel value after the background."""
  s = easy_vqa.make_split("test", 64, limit=600, seed=0)
  rows = [k for k in range(len(s)) if s.texts[k][0] == "what color is the shape?"]
  assert len(rows) >= 5
  for k in rows:
    values, counts = np.unique(s.images[k].reshape(-1, 3), axis=0, return_counts=True)
    shape_colour = tuple(int(v) for v in values[np.argsort(-counts)[1]])
    assert shape_colour == COLOURS[s.meta["answers"][s.targets["answer"][k]]]


def test_resize_is_bilinear():
  s = easy_vqa.make_split("test", 24, limit=3, seed=2)
  paths = easy_vqa_pkg.get_test_image_paths()
  for k in range(len(s)):
    image = Image.open(paths[int(s.scene[k].rsplit("/", 1)[1])]).convert("RGB")
    np.testing.assert_array_equal(s.images[k], np.asarray(image.resize((24, 24), Image.BILINEAR)))


def test_train_and_test_images_are_disjoint():
  train = {_pixels_hash(p) for p in easy_vqa_pkg.get_train_image_paths().values()}
  test = {_pixels_hash(p) for p in easy_vqa_pkg.get_test_image_paths().values()}
  assert len(train) == 4000 and len(test) == 1000 and not train & test
  a = easy_vqa.make_split("train", 8, limit=30)
  b = easy_vqa.make_split("test", 8, limit=30)
  assert all(x.startswith("easy-vqa/train/") for x in a.scene)
  assert not set(a.scene) & set(b.scene)


@pytest.mark.parametrize("kwargs, field", [
    (dict(split="val", size=8), "split"), (dict(split="train", size=0), "size"),
    (dict(split="train", size=8, limit=0), "limit"),
    (dict(split="train", size=8, seed=-1), "seed")])
def test_bad_arguments_name_the_field(kwargs, field):
  with pytest.raises(split_lib.SplitError, match=field):
    easy_vqa.make_split(**kwargs)
