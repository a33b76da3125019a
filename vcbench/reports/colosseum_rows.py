"""What the Colosseum's report files share: its rows with scores as floats, the orders of
tasks and test sets, task means and the test sets' labels (`reports.colosseum` writes the
per-PVR tables and figures, `reports.colosseum_compare` the comparison over seeds).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from vcbench.benchmarks import colosseum as cb
from vcbench import store as store_lib

DASH = "-"
LABELS = {cb.NONE: "No perturbation", cb.ALL: "All perturbations"}

Rows = Any  # Store rows (an iterable of dicts) or a pandas DataFrame of them: see `as_rows`.


def label(test_set: str) -> str:
  return LABELS.get(test_set, test_set)


def finite(x: Any) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def scored_rows(rows: Rows) -> list[dict[str, Any]]:
  """The Colosseum rows, copied, with `score` NaN where the cell is excluded or has no score.

  The store reads a NaN metric back as None; `colosseum.success_table` needs a float.
  """
  out = []
  for r in store_lib.as_rows(rows):
    if r.get("benchmark") == cb.BENCHMARK:
      excluded = r.get(f"extra/{cb.EXCLUDED}")
      score = r.get("score")
      out.append({**r, "score": float(score) if finite(score) and not excluded else math.nan})
  return out


def task_order(tasks: Iterable[str]) -> list[str]:
  """`colosseum.TASKS` order first, then any other tasks alphabetically."""
  tasks = set(tasks)
  return [t for t in cb.TASKS if t in tasks] + sorted(tasks - set(cb.TASKS))


def test_set_order(found: Iterable[str] = ()) -> list[str]:
  """Every test set in the paper's column order, then unknown ones found in rows."""
  return list(cb.TEST_SETS) + sorted(set(found) - set(cb.TEST_SETS))


def task_mean(per_task: Mapping[str, Mapping[str, float]], test_set: str) -> float:
  """Mean success % under `test_set` over the tasks where it is defined (NaN when none is)."""
  values = [t[test_set] for t in per_task.values() if finite(t.get(test_set))]
  return sum(values) / len(values) if values else math.nan
