"""Navigation's inputs (data/gvue/vln_features.py): splits and view features made once and read
back from their caches, val_seen reusing train's apartments, a damaged cache remade."""
import numpy as np
import pytest

from vcbench.benchmarks import gvue_navigation as nav
from vcbench.data.gvue import vln, vln_features as vf


def block_colours(images):
  """A stand-in PVR: 4 tokens, each the mean colour of an image quadrant."""
  x = images.astype(np.float32) / 255.0
  h, w = x.shape[1] // 2, x.shape[2] // 2
  quads = [x[:, i:i + h, j:j + w].mean((1, 2)) for i in (0, h) for j in (0, w)]
  return {"tokens": np.stack(quads, 1)}


@pytest.fixture(scope="module")
def config():
  return nav.default_config("tiny")


def test_splits_are_made_once_then_read(tmp_path, config, monkeypatch):
  made = vf.load_or_make_splits(str(tmp_path), config)
  assert set(made) == set(vf.SPLITS) and all(len(e) for e in made.values())
  monkeypatch.setattr(vln, "make_split", lambda *a, **k: pytest.fail("remade the splits"))
  again = vf.load_or_make_splits(str(tmp_path), config)
  for s in vf.SPLITS:
    assert again[s].instructions == made[s].instructions
    np.testing.assert_array_equal(again[s].path, made[s].path)


def test_a_damaged_splits_cache_is_remade_or_refused(tmp_path, config, monkeypatch):
  vf.load_or_make_splits(str(tmp_path), config)
  (cached,) = (tmp_path / "gvue_data" / "navigation").iterdir()
  cached.write_bytes(cached.read_bytes()[:100])
  with pytest.warns(UserWarning, match="unreadable"):
    again = vf.load_or_make_splits(str(tmp_path), config)
  assert len(again["train"]) == len(vf.make_splits(config)["train"])
  monkeypatch.setenv("VCBENCH_STRICT_CACHES", "1")
  cached.write_bytes(b"")
  with pytest.raises(Exception, match=cached.name):
    vf.load_or_make_splits(str(tmp_path), config)


def test_features_are_encoded_once_per_set_of_apartments(tmp_path, config):
  splits = vf.load_or_make_splits(str(tmp_path), config)
  calls = []

  def encoder_of():
    calls.append(1)
    return block_colours

  feats = vf.load_or_compute_features(str(tmp_path), config, "stand_in", splits, encoder_of)
  # val_seen's paths run in train's apartments: one entry for both, the encoder built once.
  assert len(list((tmp_path / "gvue_features" / "navigation").glob("*.npz"))) == 2
  np.testing.assert_array_equal(feats["val_seen"]["views"], feats["train"]["views"])
  assert calls == [1]
  a, nodes = feats["train"]["views"].shape[:2], feats["train"]["num_nodes"]
  assert a[0] == len(splits["train"].graphs) and nodes.max() == a[1]
  again = vf.load_or_compute_features(str(tmp_path), config, "stand_in", splits, encoder_of)
  assert calls == [1]
  for s in vf.SPLITS:
    np.testing.assert_array_equal(again[s]["views"], feats[s]["views"])


def test_unknown_source_is_named(tmp_path, config):
  config = nav.default_config("tiny")
  config.source = "matterport"
  with pytest.raises(ValueError, match="matterport"):
    vf.load_or_make_splits(str(tmp_path), config)
