"""Bootstrap intervals of the CortexBench table: per-episode scores, pairing, seeds, orderings."""
import math
import sys
import pathlib

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import cortexbench_rows as cbrows  # noqa: E402

from vcbench.benchmarks import bc_protocol
from vcbench.benchmarks import cortexbench
from vcbench.benchmarks import cortexbench_ci
from vcbench.benchmarks import cortexbench_scores
from vcbench.reports import tables


def _rows(episodes):
  """episodes: pvr -> task key -> {seed: per-episode scores}; a row's score is their mean."""
  return [cbrows.row(pvr, task, seed, float(np.mean(e)), episode_scores=list(map(float, e)))
          for pvr, tasks in episodes.items() for task, seeds in tasks.items()
          for seed, e in seeds.items()]


@pytest.mark.parametrize("metric", sorted(cortexbench.METRICS))
def test_episode_scores_average_to_the_cells_score_for_every_metric(metric):
  rng = np.random.default_rng(0)
  episodes = {"success": rng.random(7) < 0.5, "length": rng.integers(1, 500, 7),
              "return": rng.random(7) * 1000, "score": rng.random(7)}
  score = cortexbench.METRICS.get(metric)
  out = bc_protocol.summary(episodes, score)
  assert len(out["episode_scores"]) == 7
  assert np.mean(out["episode_scores"]) == pytest.approx(out["score"])
  assert all(0 <= s <= 100 for s in out["episode_scores"])


def test_a_clear_gap_is_an_ordering_that_holds_and_equal_pvrs_are_unresolved():
  rng = np.random.default_rng(1)
  coin = lambda p: 100.0 * (rng.random(20) < p)
  episodes = {"good": {"metaworld/assembly": {0: coin(0.9)}, "dmc/walker-walk": {0: coin(0.9)}},
              "bad": {"metaworld/assembly": {0: coin(0.1)}, "dmc/walker-walk": {0: coin(0.1)}},
              "bad2": {"metaworld/assembly": {0: coin(0.1)}, "dmc/walker-walk": {0: coin(0.1)}}}
  iv = cortexbench_ci.bootstrap(_rows(episodes), draws=1000)
  held = {(o.better, o.worse) for o in iv.orderings if o.significant}
  assert ("good", "bad") in held and ("good", "bad2") in held
  assert not any({o.better, o.worse} == {"bad", "bad2"} and o.significant for o in iv.orderings)
  board = cortexbench_scores.leaderboard(_rows(episodes))
  for st in board.standings:   # Each interval contains its point estimate.
    assert iv.mean_success[st.pvr].low <= st.mean_success <= iv.mean_success[st.pvr].high


def test_the_bootstrap_is_paired_over_episodes():
  # B scores 10 points below A on every episode, and episodes vary widely: alone, each
  # interval is wide and they overlap; paired, the difference is exactly 10.
  a = np.linspace(10, 100, 10)
  episodes = {"A": {"metaworld/assembly": {0: a}}, "B": {"metaworld/assembly": {0: a - 10}}}
  iv = cortexbench_ci.bootstrap(_rows(episodes), draws=500)
  (o,) = iv.orderings
  assert (o.better, o.worse) == ("A", "B")
  assert o.interval.low == pytest.approx(10) and o.interval.high == pytest.approx(10)
  assert iv.mean_success["A"].low < iv.mean_success["B"].high   # The marginals overlap.


def test_interval_width_matches_the_binomial_standard_error():
  rng = np.random.default_rng(2)
  e = 100.0 * (rng.random(200) < 0.5)
  iv = cortexbench_ci.bootstrap(_rows({"A": {"metaworld/assembly": {0: e}}}), draws=4000)
  p = e.mean() / 100
  expected = 2 * 1.96 * 100 * math.sqrt(p * (1 - p) / len(e))
  width = iv.mean_success["A"].high - iv.mean_success["A"].low
  assert width == pytest.approx(expected, rel=0.15)


def test_seeds_are_resampled_too():
  # No variance within a seed, all of it between seeds: an episode-only bootstrap would give
  # a zero-width interval.
  seeds = {0: np.zeros(10), 1: np.full(10, 50.0), 2: np.full(10, 100.0)}
  iv = cortexbench_ci.bootstrap(_rows({"A": {"metaworld/assembly": seeds}}), draws=1000)
  assert iv.mean_success["A"].low < 40 and iv.mean_success["A"].high > 60
  assert iv.min_seeds == 3 and "With one seed" not in " ".join(cortexbench_ci.describe(iv))


def test_one_seed_intervals_say_they_leave_out_the_training_run():
  iv = cortexbench_ci.bootstrap(_rows({"A": {"metaworld/assembly": {0: np.arange(10.0)}}}))
  assert iv.min_seeds == 1 and "With one seed" in " ".join(cortexbench_ci.describe(iv))


def test_rows_without_episode_scores_give_no_intervals_and_say_why():
  iv = cortexbench_ci.bootstrap(cbrows.rows())
  assert iv.missing and not iv.mean_success
  text = tables.cortexbench_intervals_markdown(cortexbench_scores.leaderboard(cbrows.rows()), iv)
  assert "No confidence intervals" in text and "per-episode scores" in text


def test_the_intervals_table_lists_ranked_pvrs_and_the_orderings():
  episodes = {"A": {"metaworld/assembly": {0: np.full(10, 90.0)}},
              "B": {"metaworld/assembly": {0: np.array([0.0, 100.0] * 5)}}}
  rows = _rows(episodes)
  text = tables.cortexbench_intervals_markdown(cortexbench_scores.leaderboard(rows),
                                               cortexbench_ci.bootstrap(rows, draws=500))
  assert "| A | [90.0, 90.0] | 90.0 [90.0, 90.0] |" in text
  assert "Orderings of Mean Success that hold: A > B (+40.0" in text
  board = cortexbench_scores.leaderboard(rows)
  doc = tables.cortexbench_html(board, intervals=cortexbench_ci.bootstrap(rows, draws=500))
  assert "<h2>95% intervals</h2>" in doc and "<td>90.0 [90.0, 90.0]</td>" in doc
  assert "A &gt; B (+40.0" in doc and "95% intervals" not in tables.cortexbench_html(board)
