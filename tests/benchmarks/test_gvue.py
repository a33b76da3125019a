"""G-VUE's task table and summary score, checked against the paper's Table 3."""
import math

import pytest

from vcbench.benchmarks import gvue

REPRESENTATIONS = ("RN-IN", "RN-MoCo", "RN-CLIP", "RN-Ego", "ViT-32-CLIP", "ViT-16-CLIP",
                   "ViT-16-MAE")
# Table 3 of the paper, row by row (one value per representation, in the order above).
TABLE3 = {
    "depth_estimation": {
        "d<1.25": (0.6394, 0.6400, 0.6523, 0.4548, 0.7363, 0.7608, 0.7699),
        "abs_rel": (0.2190, 0.2184, 0.2097, 0.3409, 0.1699, 0.1606, 0.1554),
        "rmse": (0.7292, 0.7284, 0.6987, 1.0302, 0.5888, 0.5535, 0.5486)},
    "camera_pose": {
        "position_error@cambridge": (2.909, 1.972, 2.446, 3.045, 2.160, 2.196, 2.177),
        "orientation_error@cambridge": (7.298, 5.427, 6.814, 7.000, 5.974, 6.020, 4.911),
        "position_error@7scenes": (0.281, 0.241, 0.279, 0.266, 0.290, 0.263, 0.271),
        "orientation_error@7scenes": (10.299, 8.797, 9.502, 9.058, 9.682, 9.752, 6.699)},
    "reconstruction_3d": {"miou": (39.70, 41.98, 42.00, 37.66, 40.63, 39.43, 43.95)},
    "image_text_retrieval": {
        "r@1": (25.2, 23.3, 42.4, 2.6, 47.0, 59.5, 23.4),
        "r@5": (51.9, 48.8, 71.2, 10.6, 76.1, 86.0, 50.5),
        "r@10": (64.5, 60.0, 82.4, 16.9, 85.3, 92.5, 63.6)},
    "phrase_grounding": {
        "acc@0.5@val": (48.57, 54.40, 63.45, 36.5, 67.99, 64.55, 65.18),
        "acc@0.5@testA": (54.48, 59.14, 70.63, 41.92, 75.70, 70.73, 67.59),
        "acc@0.5@testB": (43.87, 50.88, 55.86, 31.38, 61.16, 57.24, 62.10)},
    "semantic_segmentation": {"miou@val": (18.83, 18.05, 22.32, 5.00, 29.14, 35.86, 26.25)},
    "vqa": {"accuracy@val": (52.79, 50.20, 56.09, 45.56, 59.41, 59.18, 54.82),
            "accuracy@test-dev": (47.54, 45.02, 50.01, 41.20, 51.88, 51.65, 48.50)},
    "commonsense_reasoning": {"accuracy@val": (52.61, 50.98, 57.30, 52.79, 61.94, 64.11, 60.76)},
    "abstract_reasoning": {"accuracy@val": (59.85, 62.38, 64.54, 55.72, 63.24, 65.65, 62.12),
                           "accuracy@test": (62.14, 64.63, 67.32, 56.09, 65.55, 69.43, 62.85)},
    "navigation": {"success@unseen": (48.62, 48.49, 49.00, 43.89, 49.21, 47.13, 49.55),
                   "spl@unseen": (42.61, 43.49, 43.49, 37.88, 43.99, 43.60, 43.72)},
    "manipulation": {"score@unseen": (32.19, 36.94, 37.47, 27.78, 28.80, 40.80, 37.98)},
}
SUMMARY = (42.05, 43.15, 47.18, 33.29, 48.31, 51.39, 46.85)


def column(i):
  return {task: {k: v[i] for k, v in metrics.items()} for task, metrics in TABLE3.items()}


@pytest.mark.parametrize("i", range(len(REPRESENTATIONS)), ids=REPRESENTATIONS)
def test_the_papers_summary_scores_are_recomputed_from_its_own_table(i):
  assert gvue.summary_score(column(i)) == pytest.approx(SUMMARY[i], abs=0.006)


def test_a_wrong_rule_would_miss_the_table():
  """The recomputation discriminates: counting VQA's val split, navigation's success or
  weighting Act like the rest moves some representation's score by more than the rounding."""
  def off_by(results):
    return max(abs(gvue.summary_score(r) - s) for r, s in zip(results, SUMMARY))
  with_val = [dict(column(i), vqa={"accuracy": column(i)["vqa"]["accuracy@val"]})
              for i in range(7)]
  # Counting the success rate too = scoring navigation by the mean of SR and SPL.
  nav = lambda i: column(i)["navigation"]
  with_success = [dict(column(i), navigation={
      "spl": (nav(i)["spl@unseen"] + nav(i)["success@unseen"]) / 2}) for i in range(7)]
  assert off_by(with_val) > 0.1 and off_by(with_success) > 0.1
  unweighted = [sum(gvue.task_score(t, v) for t, v in column(i).items()) / 11 for i in range(7)]
  assert max(abs(u - s) for u, s in zip(unweighted, SUMMARY)) > 0.1


def test_every_task_declares_its_category_metrics_and_error_direction():
  assert len(gvue.TASKS.names()) == 11
  by_category = {c: [t.name for t in gvue.TASKS.values() if t.category == c]
                 for c in gvue.CATEGORIES}
  assert [len(v) for v in by_category.values()] == [3, 3, 3, 2]
  errors = {(t.name, m.name) for t in gvue.TASKS.values() for m in t.metrics if m.error}
  assert errors == {("depth_estimation", "abs_rel"), ("depth_estimation", "rmse"),
                    ("camera_pose", "position_error"), ("camera_pose", "orientation_error")}
  assert gvue.TASKS.get("navigation").weight == 1.5 and gvue.TASKS.get("vqa").weight == 1.0


def test_error_mapping_and_task_score():
  m = gvue.Metric("e", "E", error=True)
  assert gvue.percent(m, 0.0) == 100.0
  assert gvue.percent(m, 0.5) == pytest.approx(50.0, abs=0.02)
  assert gvue.task_score("depth_estimation", {"d<1.25": 0.5, "abs_rel": 0.0, "rmse": 0.5}) == \
      pytest.approx((50 + 100 + 100 * math.exp(-0.693)) / 3)
  # A bare name (vcbench's own single test split) always counts.
  assert gvue.task_score("vqa", {"accuracy": 40.0}) == 40.0


def test_bad_inputs_name_the_problem():
  with pytest.raises(gvue.ScoreError, match="unknown metric 'acc'"):
    gvue.task_score("vqa", {"acc": 1.0})
  with pytest.raises(gvue.ScoreError, match="no scored metric"):
    gvue.task_score("navigation", {"success@unseen": 50.0})
  with pytest.raises(gvue.ScoreError, match="missing tasks"):
    gvue.summary_score({"vqa": {"accuracy": 50.0}})
  assert gvue.summary_score({"vqa": {"accuracy": 50.0}}, partial=True) == 50.0
  with pytest.raises(KeyError, match="Did you mean 'vqa'"):
    gvue.task_score("vqa2", {"accuracy": 1.0})
