"""The leaderboard's numbers from hand-made store rows, checked against hand computation."""
import json
import math

import pytest

import cortexbench_rows
from vcbench.benchmarks import colosseum as cb
from vcbench.benchmarks import gvue
from vcbench.reports import leaderboard as board


def _robustnav(pvr, corruption, severity, spl, adaptation="none", task="pointnav_rgb_quick"):
  return {"benchmark": "robustnav", "task": task, "pvr": pvr, "adaptation": adaptation,
          "seed": 0, "corruption": corruption, "severity": severity, "spl": spl,
          "success": spl, "spl_ci95": 4.0}


ROBUSTNAV = [
    # A: defocus at severities 3 and 5 (5 counts: 20), motion drift 40 -> drops 60%, 20%.
    _robustnav("A", "none", 0, 50.0), _robustnav("A", "defocus_blur", 3, 10.0),
    _robustnav("A", "defocus_blur", 5, 20.0), _robustnav("A", "motion_drift", 0, 40.0),
    _robustnav("A", "defocus_blur", 5, 49.0, adaptation="pad_rp"),   # not the clean agent
    # B: drops 10%, 0%.
    _robustnav("B", "none", 0, 20.0), _robustnav("B", "defocus_blur", 5, 18.0),
    _robustnav("B", "motion_drift", 0, 20.0),
]


def _colosseum(pvr, seed, test_set, score, task="drawer-open"):
  return {"benchmark": "colosseum", "task": task, "pvr": pvr, "adaptation": "frozen",
          "seed": seed, "corruption": test_set, "severity": 0, "score": score}


COLOSSEUM = [
    # A: seed 0 clean 100, MO_Color 50 (-50%); seed 1 clean 80, MO_Color 80 (0%); "all" is
    # not a single factor and stays out of the means.
    _colosseum("A", 0, cb.NONE, 100.0), _colosseum("A", 0, "MO_Color", 50.0),
    _colosseum("A", 0, cb.ALL, 0.0),
    _colosseum("A", 1, cb.NONE, 80.0), _colosseum("A", 1, "MO_Color", 80.0),
    # C: one seed, clean 60, MO_Color 30 (-50%), RO_Size 60 (0%).
    _colosseum("C", 0, cb.NONE, 60.0), _colosseum("C", 0, "MO_Color", 30.0),
    _colosseum("C", 0, "RO_Size", 60.0),
]


def _gvue(pvr, seed, task, values):
  return {"benchmark": "gvue", "task": task, "pvr": pvr, "seed": seed, **values}


GVUE = [_gvue("A", s, "vqa", {"accuracy": a}) for s, a in enumerate((60.0, 62.0, 64.0))] + [
    _gvue("B", s, "vqa", {"accuracy": a}) for s, a in enumerate((40.0, 41.0, 39.0))]


def _rows():
  return cortexbench_rows.rows() + ROBUSTNAV + COLOSSEUM + GVUE


def test_cortexbench_mean_success_and_mean_rank():
  values, _ = board.cortexbench_values(_rows())
  # metaworld: A 75, B 75 (tie: ranks 1.5), C 47.5; dmc: B 40, A 30, C 20.
  assert values["A"]["cortexbench.mean_success"] == pytest.approx((75 + 30) / 2)
  assert values["B"]["cortexbench.mean_rank"] == pytest.approx((1.5 + 1) / 2)
  assert values["C"]["cortexbench.mean_rank"] == pytest.approx(3.0)


def test_robustnav_relative_spl_drop_uses_the_clean_agent_at_the_highest_severity():
  values, errors = board.robustnav_values(_rows())
  assert values["A"] == pytest.approx({"robustnav.clean_spl": 50.0,
                                       "robustnav.corrupted_spl": 30.0,
                                       "robustnav.spl_drop": 40.0})
  assert values["B"]["robustnav.spl_drop"] == pytest.approx(5.0)
  assert errors["A"] == {"robustnav.clean_spl": 4.0}


def test_robustnav_zero_clean_spl_has_no_drop():
  values, _ = board.robustnav_values([_robustnav("Z", "none", 0, 0.0),
                                      _robustnav("Z", "defocus_blur", 5, 0.0)])
  assert math.isnan(values["Z"]["robustnav.spl_drop"])


def test_colosseum_per_seed_then_mean_and_standard_error():
  values, errors = board.colosseum_values(_rows())
  assert values["A"] == pytest.approx({"colosseum.clean": 90.0, "colosseum.perturbed": 65.0,
                                       "colosseum.change": -25.0})
  assert errors["A"]["colosseum.clean"] == pytest.approx(math.sqrt(200) / math.sqrt(2))
  assert errors["A"]["colosseum.change"] == pytest.approx(25.0)
  assert values["C"] == pytest.approx({"colosseum.clean": 60.0, "colosseum.perturbed": 45.0,
                                       "colosseum.change": -25.0})
  assert "C" not in errors   # one seed: no standard error


def test_gvue_summary_and_categories_with_intervals():
  values, errors = board.gvue_values(_rows())
  assert values["A"]["gvue.summary"] == pytest.approx(62.0)
  assert values["A"]["gvue.reason"] == pytest.approx(62.0)
  assert math.isnan(values["A"]["gvue.perceive"])   # no perceive task was run
  assert errors["A"]["gvue.summary"] == pytest.approx(4.303 * 2.0 / math.sqrt(3))
  assert values["B"]["gvue.summary"] == pytest.approx(gvue.task_score("vqa", {"accuracy": 40}))


def test_overall_rank_is_the_mean_of_benchmark_ranks_by_the_ranking_columns():
  values, _ = board.headlines(_rows())
  ranks = board.overall_ranks(values, ["A", "B", "C", "D"])
  # A: cortexbench mean success 52.5 (2nd; B 57.5, C 33.75), gvue 1st, robustnav corrupted
  # SPL 30 > 19 (1st), colosseum perturbed 65 > 45 (1st).  B: 1st, 2nd, 2nd, none.
  # C: 3rd, none, none, 2nd.
  assert ranks == pytest.approx({"A": (2 + 1 + 1 + 1) / 4, "B": (1 + 2 + 2) / 3,
                                 "C": (3 + 2) / 2})   # D has no numbers: no rank


def test_lower_is_better_columns_rank_the_other_way(monkeypatch):
  monkeypatch.setitem(board.RANKED_BY, "robustnav", "robustnav.spl_drop")
  values = {"A": {"robustnav.spl_drop": 10.0}, "B": {"robustnav.spl_drop": 20.0}}
  assert board.overall_ranks(values, ["A", "B"], ["robustnav"]) == {"A": 1.0, "B": 2.0}


def test_table_is_json_safe_ordered_by_rank_and_matches_the_markdown():
  t = board.table(_rows(), ["C", "A", "B", "D"], variant="quick", notes=["a note"],
                  links={"A": {"gvue": {"records": "r.jsonl", "config": "c.json"}}})
  json.dumps(t, allow_nan=False)   # NaN would make the page's JSON invalid
  assert [r["pvr"] for r in t["rows"]] == ["A", "B", "C", "D"]
  a = t["rows"][0]
  assert a["values"]["gvue.perceive"] is None and a["values"]["colosseum.clean"] == 90.0
  assert a["links"]["gvue"]["records"] == "r.jsonl"
  assert t["rows"][3]["overall_rank"] is None
  text = board.markdown(t)
  assert "| A | 1.25 |" in text and "90.0 ± 10.0" in text and "- a note" in text
