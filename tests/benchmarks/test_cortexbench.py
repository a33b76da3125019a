"""CortexBench suites as data, and Mean Success / Mean Rank from store rows, checked by hand."""
import math
import warnings

import numpy as np
import pytest

from vcbench.benchmarks import cortexbench
from vcbench.benchmarks import cortexbench_scores
from vcbench.store import Cell, ResultStore

import cortexbench_rows as cbrows

H = cbrows.H
SCORES = cbrows.SCORES
_row = cbrows.row
_rows = cbrows.rows


# --- suites as data --------------------------------------------------------------------------


def test_suites_hold_the_cortexbench_protocols():
  mw = cortexbench.suite("metaworld")
  assert mw.available and mw.reason == ""
  assert mw.tasks == ("assembly", "bin-picking", "button-press-topdown", "drawer-open", "hammer")
  assert (mw.num_demos, mw.eval_episodes, mw.horizon, mw.metric) == (25, 25, 500, "success")
  dmc = cortexbench.suite("dmc")
  # 500 decisions at action repeat 2: dm_control's 1000 control steps.
  assert (dmc.num_demos, dmc.eval_episodes, dmc.horizon, dmc.metric) == (100, 10, 500, "score")
  assert dmc.tasks == ("walker-stand", "walker-walk", "reacher-easy", "cheetah-run",
                       "finger-spin")
  adroit, trifinger = cortexbench.suite("adroit"), cortexbench.suite("trifinger")
  assert adroit.tasks == ("pen", "relocate")
  assert (adroit.num_demos, adroit.eval_episodes, adroit.metric) == (100, 25, "success")
  assert trifinger.tasks == ("reach-cube", "push-cube")
  assert (trifinger.num_demos, trifinger.metric) == (100, "score")
  assert all(s.available for s in (dmc, adroit, trifinger))
  for name in ("imagenav", "objectnav"):
    assert "vcbench-nav" in cortexbench.suite(name).reason
  assert all(s.available or s.reason for s in cortexbench.SUITES.values())


def test_suite_scores_by_its_metric_and_refuses_unknown_metrics():
  episodes = {"success": np.array([True, False, True, True]), "length": np.ones(4),
              "return": np.array([10.0, 20.0, 30.0, 40.0])}
  assert cortexbench.suite("metaworld").score(episodes) == 75.0
  assert cortexbench.suite("dmc").score({**episodes, "score": np.array([.1, .2, .3, .4])}) == 25.0
  assert cortexbench.suite("metaworld").success_ends_episode
  assert not cortexbench.suite("dmc").success_ends_episode
  with pytest.raises(KeyError, match="return/10"):
    cortexbench.Suite("x", "X", ("t",), 1, 1, 1, metric="reward", available=False)
  with pytest.raises(ValueError, match="needs make_sim and expert"):
    cortexbench.Suite("x", "X", ("t",), 1, 1, 1, metric="success", available=True)


def test_unknown_suite_lists_valid_names():
  with pytest.raises(KeyError, match="metaworld") as e:
    cortexbench.suite("metawrld")
  assert "dmc" in str(e.value) and "metawrld" in str(e.value)


def test_check_tasks_lists_valid_tasks():
  assert cortexbench.check_tasks("metaworld", ["hammer"]) == ("hammer",)
  with pytest.raises(ValueError, match="drawer-open") as e:
    cortexbench.check_tasks("metaworld", ["hammer", "drawer-close"])
  assert "drawer-close" in str(e.value)


def test_task_keys_round_trip_and_bad_key_is_explained():
  key = cortexbench.task_key("metaworld", "assembly")
  assert key == "metaworld/assembly"
  assert cortexbench.parse_task_key(key) == ("metaworld", "assembly")
  with pytest.raises(ValueError, match="'<suite>/<task>'"):
    cortexbench.parse_task_key("assembly")


# --- aggregation -----------------------------------------------------------------------------


def test_suite_means_stderr_ranks_with_ties():
  board = cortexbench_scores.leaderboard(_rows())
  assert board.suites == ("metaworld", "dmc")  # SUITES order.
  assert board.tasks["metaworld"] == ("assembly", "hammer")
  a, b, c = (board.standing(p) for p in "ABC")
  assert a.suites["metaworld"].mean == pytest.approx(75.0)
  assert a.suites["metaworld"].stderr == pytest.approx(5.0)
  assert c.suites["metaworld"].mean == pytest.approx(47.5)
  assert c.suites["metaworld"].stderr == pytest.approx(2.5)
  assert (a.suites["metaworld"].n_seeds, a.suites["metaworld"].n_tasks) == (2, 2)
  assert math.isnan(a.suites["dmc"].stderr) and a.suites["dmc"].n_seeds == 1
  assert a.ranks == {"metaworld": 1.5, "dmc": 2.0}  # A and B tie in metaworld.
  assert b.ranks == {"metaworld": 1.5, "dmc": 1.0}
  assert c.ranks == {"metaworld": 3.0, "dmc": 3.0}


def test_mean_rank_and_mean_success_order_the_board():
  board = cortexbench_scores.leaderboard(_rows())
  assert board.pvrs() == ["B", "A", "C"]
  b, a, c = board.standings
  assert (b.mean_rank, b.mean_success, b.n_ranked) == (1.25, 57.5, 2)
  assert (a.mean_rank, a.mean_success) == (1.75, 52.5)
  assert (c.mean_rank, c.mean_success) == (3.0, 33.75)
  assert board.suite_ranks() == {"B": [1.5, 1.0], "A": [1.5, 2.0], "C": [3.0, 3.0]}


def test_partial_suite_is_flagged_not_ranked():
  scores = dict(SCORES, D={"metaworld/assembly": {0: 99, 1: 99}, "dmc/walker-walk": {0: 100}})
  board = cortexbench_scores.leaderboard(_rows(scores))
  d = board.standing("D")
  mw = d.suites["metaworld"]
  assert (mw.mean, mw.n_tasks, mw.n_tasks_total, mw.complete) == (99.0, 1, 2, False)
  assert "metaworld" not in d.ranks and d.ranks == {"dmc": 1.0}
  assert (d.mean_rank, d.mean_success, d.n_ranked) == (1.0, 100.0, 1)  # metaworld not counted.
  assert board.standing("C").ranks == {"metaworld": 3.0, "dmc": 4.0}  # D outranks only in dmc.


def test_task_nobody_else_has_makes_everyone_else_incomplete():
  scores = dict(SCORES, D={"metaworld/drawer-open": {0: 10}})
  board = cortexbench_scores.leaderboard(_rows(scores))
  assert board.tasks["metaworld"] == ("assembly", "drawer-open", "hammer")
  assert not any(s.suites["metaworld"].complete for s in board.standings)
  d = board.standing("D")
  assert math.isnan(d.mean_rank) and math.isnan(d.mean_success) and d.n_ranked == 0
  assert board.pvrs()[-1] == "D"  # Unranked last.


def test_stderr_uses_only_seeds_with_every_task():
  scores = {"A": {"metaworld/assembly": {0: 80, 1: 90, 2: 10}, "metaworld/hammer": {0: 60, 1: 70}}}
  s = cortexbench_scores.leaderboard(_rows(scores)).standing("A").suites["metaworld"]
  assert s.mean == pytest.approx((60 + 65) / 2)  # The task mean still uses seed 2.
  assert (s.n_seeds, s.stderr) == (2, pytest.approx(5.0))


def test_other_benchmarks_corruptions_and_missing_scores_are_ignored():
  rows = _rows() + [
      _row("A", "metaworld/assembly", 2, 0.0, benchmark="robustnav"),
      _row("A", "metaworld/assembly", 3, 0.0, corruption="fog", severity=3),
      _row("E", "metaworld/assembly", 0, None)]
  with pytest.warns(RuntimeWarning, match="no finite 'score'"):
    board = cortexbench_scores.leaderboard(rows)
  assert board.pvrs() == ["B", "A", "C"]
  assert board.standing("A").suites["metaworld"].n_seeds == 2


def test_adapted_pvr_is_its_own_entry():
  rows = _rows() + [_row("A", "dmc/walker-walk", 0, 50, adaptation="finetune")]
  board = cortexbench_scores.leaderboard(rows)
  assert board.standing("A (finetune)").ranks == {"dmc": 1.0}
  assert board.standing("A").suites["dmc"].mean == 30


def test_duplicate_cell_with_other_config_hash_warns_and_uses_latest():
  late = _row("A", "dmc/walker-walk", 0, 90, config_hash="bb", time="2026-02-01T00:00:00+00:00")
  rows = [late] + _rows()  # The later record comes first in the list: time decides, not order.
  with pytest.warns(RuntimeWarning, match=r"pvr='A' task='dmc/walker-walk' seed=0"):
    board = cortexbench_scores.leaderboard(rows)
  assert board.standing("A").suites["dmc"].mean == 90


def test_same_config_rerun_is_silent():
  rows = _rows() + [_row("A", "dmc/walker-walk", 0, 35, time="2026-01-02T00:00:00+00:00")]
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    board = cortexbench_scores.leaderboard(rows)
  assert board.standing("A").suites["dmc"].mean == 35


def test_unknown_suite_in_rows_names_key_and_valid_suites():
  with pytest.raises(ValueError, match="'atari/pong'") as e:
    cortexbench_scores.leaderboard(_rows() + [_row("A", "atari/pong", 0, 1.0)])
  assert "metaworld" in str(e.value)


def test_task_ranks_and_task_scores():
  assert cortexbench_scores.task_ranks(_rows()) == {"A": [1.0, 2.0, 2.0], "B": [2.0, 1.0, 1.0],
                                             "C": [3.0, 3.0, 3.0]}
  scores = cortexbench_scores.task_scores(_rows())
  assert list(scores["A"]) == ["metaworld/assembly", "metaworld/hammer", "dmc/walker-walk"]
  assembly = scores["A"]["metaworld/assembly"]
  assert (assembly.mean, assembly.stderr, assembly.n_seeds) == (85.0, pytest.approx(5.0), 2)


def test_average_ranks_ties_up_to_float_noise():
  ranks = cortexbench_scores.average_ranks({"a": 0.1 + 0.2, "b": 0.3, "c": 1.0, "d": 0.0})
  assert ranks == {"c": 1.0, "a": 2.5, "b": 2.5, "d": 4.0}


def test_leaderboard_from_a_real_store(tmp_path):
  store = ResultStore(tmp_path / "results.jsonl")
  for pvr, tasks in SCORES.items():
    for task, seeds in tasks.items():
      for seed, score in seeds.items():
        store.append(Cell(benchmark="cortexbench", task=task, pvr=pvr, seed=seed), H,
                     {"score": score, "success_rate": score / 100, "val_score": score,
                      "best_epoch": 3, "episodes": 25, "train_loss": 0.1},
                     extra={"protocol": "quick"})
  board = cortexbench_scores.leaderboard(store.to_rows(latest_only=True))
  assert board.pvrs() == ["B", "A", "C"]
  assert board.standing("B").mean_rank == 1.25


def test_metaworld_suite_matches_the_adapter_and_the_config():
  pytest.importorskip("metaworld")
  from configs import cortexbench as config  # pylint: disable=import-outside-toplevel
  from vcbench.envs.mujoco import metaworld as mw  # pylint: disable=import-outside-toplevel
  from vcbench.jobs import cortexbench as job  # pylint: disable=import-outside-toplevel
  suite = cortexbench.suite("metaworld")
  full = job.for_suite(config.get_config("full"))   # The suite fills what the config leaves.
  assert suite.tasks == mw.CORTEXBENCH_TASKS == tuple(full.tasks)
  assert (full.num_demos, full.test_episodes, full.horizon) == (25, 25, 500)
  assert full.camera == "top_cap2"
