"""The G-VUE table, its intervals and summary score, and the radar plot, from store-like rows."""
import math

import pytest

from vcbench.benchmarks import gvue
from vcbench.reports import gvue as report


def _rows():
  rows = []
  for seed, (acc_a, acc_b) in enumerate([(60.0, 40.0), (62.0, 41.0), (64.0, 39.0)]):
    for pvr, acc, rmse in (("a", acc_a, 0.5), ("b", acc_b, 1.0)):
      rows.append({"task": "vqa", "pvr": pvr, "seed": seed, "accuracy": acc, "task_score": 0.0,
                   "seconds": 3.0})
      rows.append({"task": "depth_estimation", "pvr": pvr, "seed": seed, "d<1.25": 0.5,
                   "abs_rel": 0.2, "rmse": rmse})
  return rows


def test_mean_interval_is_a_student_t_interval():
  mean, hw = report.mean_interval([60.0, 62.0, 64.0])
  assert mean == 62.0 and hw == pytest.approx(4.303 * 2.0 / math.sqrt(3))
  assert math.isnan(report.mean_interval([1.0])[1])


def test_table_has_metrics_task_scores_and_a_partial_summary():
  text = report.markdown(_rows())
  assert "| Reason / vqa | Acc. ↑ | 62.00 ± 4.97 | 40.00 ± 2.48 |" in text
  assert "RMSE ↓" in text and "Summary score (partial)" in text
  assert "averages the 2 tasks run" in text
  board = report.scores(report.collect(_rows()))
  depth_a = gvue.task_score("depth_estimation", {"d<1.25": 0.5, "abs_rel": 0.2, "rmse": 0.5})
  assert board["a"]["summary"][0] == pytest.approx((62.0 + depth_a) / 2)
  # Keys that are not the task's metrics (task_score, seconds) stay out of the table.
  assert "seconds" not in text


def test_radar_figure_draws_one_polygon_per_pvr():
  fig = report.radar_figure(_rows())
  assert len(fig.axes[0].get_lines()) == 2


def test_no_rows_says_so():
  assert "no results" in report.markdown([])


def test_act_rows_are_labelled_by_split_held_out_first():
  rows = [{"task": "navigation", "pvr": "a", "seed": 0, "spl@seen": 50.0, "success@seen": 60.0,
           "spl@unseen": 30.0, "success@unseen": 40.0}]
  labels = [line.split("|")[2].strip() for line in report.markdown(rows).splitlines()
            if line.startswith("| Act / navigation")]
  assert labels == ["Succ. (unseen) ↑", "Succ. (seen) ↑", "SPL (unseen) ↑", "SPL (seen) ↑",
                    "task score"]
  assert "| Act / navigation | task score | 30.00 |" in report.markdown(rows)
