"""The ObjectNav recognition probe: labels agree with the semantic frame, both heads learn the
frames they are trained on, the held-out figures are computed as stated."""
import jax.numpy as jnp
import numpy as np
import pytest

import vcbench  # noqa: F401
from vcbench.benchmarks import nav_recognition as nr
from vcbench.envs.nav import env as nav_env


@pytest.fixture(scope="module")
def frames():
  return nr.random_walk_frames("train", size=16, walks=8, steps=40, every=2, scenes=4, batch=8)


def test_frames_carry_consistent_labels(frames):
  n = len(frames["category"])
  assert n == 8 * 20 and frames["rgb"].shape == (n, 16, 16, 3)
  assert frames["visible"].shape == (n, nav_env.NUM_CATEGORIES)
  goal_seen = frames["visible"][np.arange(n), frames["category"]]
  np.testing.assert_array_equal(goal_seen, frames["goal_pixels"] > 0)
  assert 0 < goal_seen.mean() < 1       # the walks see their goals, not always


@pytest.mark.parametrize("labels", nr.LABELS)
def test_each_head_fits_its_training_frames(frames, labels):
  calls = []
  model, params, losses = nr.fit(frames, labels, steps=150, batch=32, lr=3e-3, every=50,
                                 on_every=lambda step, *_: calls.append(step))
  assert calls == [50, 100, 150]
  assert losses[-20:].mean() < 0.6 * losses[:5].mean()
  s = nr.scores(model, params, frames)
  assert s["accuracy"] > s["base_rate"] and s["recall"] > 0.0, s


def test_scores_follow_their_definitions(frames):
  class Always:   # a model that says 'in view' for category 0 only
    @staticmethod
    def apply(params, f, t):
      return jnp.where(f["category"] == 0, 1.0, -1.0), None
  s = nr.scores(Always, None, frames, batch=7)
  seen = frames["visible"][np.arange(len(seen_cat := frames["category"])), seen_cat]
  said = seen_cat == 0
  assert s["accuracy"] == pytest.approx((said == seen).mean())
  assert s["false_positive"] == pytest.approx(said[~seen].mean())
  with pytest.raises(ValueError, match="labels must be one of"):
    nr.fit(frames, "some", steps=1)


def test_frozen_tokens_are_read_whatever_their_scale(frames):
  # Tokens that carry the labels, at the ~1e-9 scale of random_mobilenetv2's: the probe still
  # reads them (its normalisation is scale-free).
  rng = np.random.default_rng(0)
  n = len(frames["category"])
  informative = np.concatenate([frames["visible"], rng.normal(size=(n, 10))], -1)
  tokens = (1e-9 * informative[:, None, :]).astype(np.float32)      # [N, 1 token, D]
  model, params, _ = nr.fit(frames, "all", steps=150, batch=32, lr=3e-3, tokens=tokens)
  s = nr.scores(model, params, frames, tokens)
  assert s["accuracy"] > 0.97 and s["recall"] > 0.9, s
