"""The Colosseum's comparison of PVRs over seeds: per-seed task averages and % changes, their
mean ± s.e. over seeds (hand-computed), the most robust PVR per factor and when it is
separated from the runner-up."""
import math

import numpy as np
import pytest

from vcbench.benchmarks import colosseum as cb
from vcbench.models import embedder as embedder_lib
from vcbench.reports import colosseum_compare as compare

# pvr -> seed -> task -> test set -> success %.
SCORES = {
    "cnn": {0: {"a": {cb.NONE: 80, "MO_Color": 40}, "b": {cb.NONE: 60, "MO_Color": 60}},
            1: {"a": {cb.NONE: 100, "MO_Color": 50}, "b": {cb.NONE: 60, "MO_Color": 70}},
            2: {"a": {cb.NONE: 90, "MO_Color": 45}, "b": {cb.NONE: 70, "MO_Color": 65}}},
    "vit": {0: {"a": {cb.NONE: 50, "MO_Color": 50}, "b": {cb.NONE: 50, "MO_Color": 45}},
            1: {"a": {cb.NONE: 60, "MO_Color": 54}, "b": {cb.NONE: 40, "MO_Color": 40}},
            2: {"a": {cb.NONE: 40, "MO_Color": 40}, "b": {cb.NONE: 60, "MO_Color": 55}}},
    embedder_lib.STATE_ORACLE: {s: {"a": {cb.NONE: 90, "MO_Color": 90}} for s in range(3)},
}


def _rows():
  return [{"benchmark": cb.BENCHMARK, "pvr": p, "seed": s, "task": t, "corruption": ts,
           "score": float(v), "episodes": 25}
          for p, seeds in SCORES.items() for s, tasks in seeds.items()
          for t, sets in tasks.items() for ts, v in sets.items()]


def test_means_and_standard_errors_over_seeds():
  success, change = compare.seed_stats(_rows())
  # cnn clean task means per seed: 70, 80, 80; MO_Color: 50, 60, 55.
  mean, se, n = success["cnn"][cb.NONE]
  assert n == 3 and mean == pytest.approx(230 / 3)
  assert se == pytest.approx(np.std([70, 80, 80], ddof=1) / math.sqrt(3))
  per_seed = [100 * (50 - 70) / 70, 100 * (60 - 80) / 80, 100 * (55 - 80) / 80]
  mean, se, n = change["cnn"]["MO_Color"]
  assert mean == pytest.approx(np.mean(per_seed))
  assert se == pytest.approx(np.std(per_seed, ddof=1) / math.sqrt(3))
  assert change[embedder_lib.STATE_ORACLE]["MO_Color"][:2] == (0.0, 0.0)


def test_most_robust_leaves_out_the_oracle_and_tests_the_gap():
  _, change = compare.seed_stats(_rows())
  (entry,) = compare.most_robust(change)
  # vit per seed: -5%, -6%, -5%; cnn ~ -28%: vit wins, separated by far more than 2 s.e.
  assert entry["pvr"] == "vit" and entry["runner_up"] == "cnn" and entry["separated"] is True
  one_seed = [r for r in _rows() if r["seed"] == 0]
  (entry,) = compare.most_robust(compare.seed_stats(one_seed)[1])
  assert entry["separated"] is None


def test_markdown_and_figure(tmp_path):
  import pathlib  # noqa: PLC0415
  paths = compare.write(_rows(), pathlib.Path(tmp_path))
  text = paths["comparison"].read_text(encoding="utf-8")
  assert "| Test set | cnn (3 seeds) | state_oracle (3 seeds) | vit (3 seeds) |" in text
  assert "76.7 ± 3.3" in text   # cnn's clean mean ± s.e.
  assert "- MO_Color: **vit**" in text and "separated by more than 2 s.e." in text
  assert paths["comparison_plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
