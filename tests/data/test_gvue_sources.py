"""G-VUE's split contract, the split cache and the feature extraction the job shares."""
import json

import numpy as np
import pytest

from vcbench.data.gvue import features, sources
from vcbench.data.gvue import split as split_lib
from vcbench.models import zoo


def _vqa(n=6, size=32, seed=0):
  rng = np.random.default_rng(seed)
  return split_lib.Split(
      task="vqa", images=rng.integers(0, 255, (n, size, size, 3), dtype=np.uint8),
      targets={"answer": rng.integers(0, 3, n).astype(np.int32)},
      texts=tuple((f"what is {i}?",) for i in range(n)), scene=tuple(f"s{i}" for i in range(n)),
      meta={"answers": ("yes", "no", "two")}, source="test")


def test_check_names_the_broken_field():
  good = _vqa()
  assert split_lib.check(good) is good
  bad = split_lib.Split(**{**good.__dict__, "targets": {"answer": np.zeros(5, np.int32)}})
  with pytest.raises(split_lib.SplitError, match=r"targets\['answer'\] has 5 rows for 6 images"):
    split_lib.check(bad)
  with pytest.raises(split_lib.SplitError, match="images expected uint8"):
    split_lib.check(split_lib.Split(**{**good.__dict__, "images": good.images / 255.0}))
  with pytest.raises(split_lib.SplitError, match=r"meta\['answers'\]"):
    split_lib.check(split_lib.Split(**{**good.__dict__, "meta": {}}))
  with pytest.raises(split_lib.SplitError, match="13 images"):
    split_lib.check(split_lib.Split(task="abstract_reasoning",
                                    images=np.zeros((2, 5, 8, 8, 3), np.uint8),
                                    targets={"label": np.zeros(2, np.int32)}))


def test_take_keeps_examples_aligned():
  s = _vqa().take(np.array([4, 1]))
  assert s.texts == (("what is 4?",), ("what is 1?",)) and s.scene == ("s4", "s1")
  np.testing.assert_array_equal(s.targets["answer"], _vqa().targets["answer"][[4, 1]])


def test_a_split_is_made_once_then_read_from_the_cache(tmp_path):
  calls = []

  def make(task, split, num, seed, size, **_):
    calls.append((split, seed))
    return _vqa(num, size, seed)

  with sources.SOURCES.temporarily("fake", make):
    first = sources.load_or_make(str(tmp_path), "vqa", "fake", "train", 6, 0, 32)
    again = sources.load_or_make(str(tmp_path), "vqa", "fake", "train", 6, 0, 32)
    other = sources.load_or_make(str(tmp_path), "vqa", "fake", "train", 6, 1, 32)
  assert calls == [("train", 0), ("train", 1)]
  np.testing.assert_array_equal(first.images, again.images)
  assert again.texts == first.texts and list(again.meta["answers"]) == ["yes", "no", "two"]
  assert not np.array_equal(first.images, other.images)
  # A corrupted cache entry is remade, not used.
  npz = next(tmp_path.glob("gvue_data/vqa/fake-train-*.npz"))
  npz.write_bytes(npz.read_bytes()[:100])
  with sources.SOURCES.temporarily("fake", make):
    remade = sources.load_or_make(str(tmp_path), "vqa", "fake", "train", 6, 0, 32)
  assert len(calls) == 3
  np.testing.assert_array_equal(remade.images, first.images)


def test_a_source_that_breaks_the_contract_is_refused(tmp_path):
  def make(task, split, num, seed, size, **_):
    s = _vqa(num, size, seed)
    return split_lib.Split(**{**s.__dict__, "texts": s.texts[:-1]})
  with sources.SOURCES.temporarily("broken", make), pytest.raises(
      split_lib.SplitError, match="5 text tuples for 6 images"):
    sources.load_or_make(str(tmp_path), "vqa", "broken", "train", 6, 0, 32)


def test_real_source_asks_for_its_paths():
  with pytest.raises(Exception, match="config.real_paths.vqa"):
    sources.SOURCES.get("real")("vqa", "train", 4, 0, 32)


def test_image_and_problem_features_match_the_encoder():
  """Grid maps and pyramid levels per image (the last batch padded); Bongard problems pooled
  per image."""
  encoder = zoo.load("random_vit_ti", img_size=32)
  apply = features.jitted_encoder(encoder)
  images = _vqa(5).images
  feats = features.image_features(apply, images, ("map", "p0", "p3"), batch_size=4)
  direct = encoder(images)
  assert feats["map"].shape == (5, 2, 2, 192) and feats["map"].dtype == np.float16
  np.testing.assert_allclose(feats["map"].astype(np.float32),
                             np.asarray(direct["tokens"]).reshape(5, 2, 2, 192), atol=2e-2,
                             rtol=2e-3)
  assert feats["p0"].shape[1:3] == (8, 8) and feats["p3"].shape[1:3] == (1, 1)
  problems = np.random.default_rng(0).integers(0, 255, (2, 13, 32, 32, 3), dtype=np.uint8)
  pooled = features.problem_features(apply, problems, batch_size=4)
  assert pooled.shape == (2, 13, 1, 192)
  one = np.asarray(encoder(problems[1, 12:13])["tokens"]).mean(axis=1)
  np.testing.assert_allclose(pooled[1, 12, 0].astype(np.float32), one[0], atol=2e-2, rtol=2e-3)


def test_text_features_compose_choices_and_flatten_captions():
  assert features.example_text("commonsense_reasoning", ("why?", "a", "b", "c", "d")) == \
      "why? (a) a (b) b (c) c (d) d"
  seen = []

  def encode(texts, max_len):
    seen.append(list(texts))
    return np.ones((len(texts), max_len, 4)), np.ones((len(texts), max_len), bool)

  s = split_lib.Split(task="image_text_retrieval", images=np.zeros((2, 8, 8, 3), np.uint8),
                      targets={}, texts=(("x", "y"), ("z",)))
  out = features.text_features(encode, "image_text_retrieval", s, 5)
  assert seen[-1] == ["x", "y", "z"]
  np.testing.assert_array_equal(out["caption_image"], [0, 0, 1])
  assert out["caption_text"].shape == (3, 5, 4)
