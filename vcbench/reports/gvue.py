"""G-VUE's table (like the paper's Table 3), its summary score and a radar plot, from store rows.

Rows are the G-VUE job's records: one per (task, PVR, seed) with the task's metrics by name.
Each metric is shown as its mean over seeds with a 95% Student-t interval half-width when there
are two or more seeds; the task score and the summary score are computed per seed, then
averaged the same way. The summary score is G-VUE's (`benchmarks.gvue.summary_score`); when the
rows hold fewer than the eleven tasks it is marked partial and scores only the tasks run, so it
is not comparable with the paper's numbers.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np

from vcbench.benchmarks import gvue
from vcbench.reports import plots
from vcbench.reports.tables import DASH, markdown_table

# Two-sided 95% Student-t quantiles by degrees of freedom (no scipy at report time).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228}


def mean_interval(values: Iterable[float]) -> tuple[float, float]:
  """(mean, 95% t-interval half-width; NaN with fewer than two values)."""
  v = np.asarray(list(values), float)
  if len(v) < 2:
    return float(v.mean()) if len(v) else math.nan, math.nan
  t = _T95.get(len(v) - 1, 1.96)
  return float(v.mean()), float(t * v.std(ddof=1) / math.sqrt(len(v)))


def collect(rows: Iterable[Mapping[str, Any]]) -> dict:
  """{pvr: {task: {seed: {metric: value}}}} with each task's declared metrics only."""
  out: dict = {}
  for row in rows:
    values = gvue.declared(row["task"], {k: v for k, v in row.items()
                                         if isinstance(v, (int, float))})
    out.setdefault(row["pvr"], {}).setdefault(row["task"], {})[row["seed"]] = values
  return out


def scores(results: Mapping) -> dict:
  """{pvr: {'tasks': {task: (mean, hw)}, 'summary': (mean, hw), 'partial': bool}}: the summary
  score per seed (over the seeds every task of that PVR has), then its mean and interval."""
  out = {}
  for pvr, tasks in results.items():
    task_scores = {t: mean_interval(gvue.task_score(t, v) for v in seeds.values())
                   for t, seeds in tasks.items()}
    shared = set.intersection(*(set(s) for s in tasks.values()))
    partial = len(tasks) < len(gvue.TASKS.names())
    summary = mean_interval(
        gvue.summary_score({t: tasks[t][s] for t in tasks}, partial=partial)
        for s in sorted(shared))
    out[pvr] = {"tasks": task_scores, "summary": summary, "partial": partial,
                "seeds": len(shared)}
  return out


def _fmt(mean: float, hw: float, digits: int) -> str:
  if math.isnan(mean):
    return DASH
  return f"{mean:.{digits}f}" + ("" if math.isnan(hw) else f" ± {hw:.{digits}f}")


def _digits(metric: gvue.Metric) -> int:
  return 4 if metric.fraction or metric.name in ("abs_rel",) else (3 if metric.error else 2)


def _row_order(task: gvue.Task, key: str) -> tuple:
  """The task's metric order, its scored splits (`Task.scored_splits`) before the others."""
  metric, split = task.parse(key)
  return ([m.name for m in task.metrics].index(metric.name), split not in task.scored_splits,
          split or "")


def markdown(rows: Iterable[Mapping[str, Any]]) -> str:
  """Table 3's layout: a row per (task, metric) and per task score, a column per PVR, the
  summary score at the bottom."""
  results = collect(rows)
  if not results:
    return "G-VUE: no results yet."
  pvrs = list(results)
  board = scores(results)
  tasks = [t for t in gvue.TASKS.names() if any(t in results[p] for p in pvrs)]
  body = []
  for name in tasks:
    task = gvue.TASKS.get(name)
    keys = sorted({k for p in pvrs for s in results[p].get(name, {}).values() for k in s},
                  key=lambda k: _row_order(task, k))
    for key in keys:
      metric, split = task.parse(key)
      arrow = "↓" if metric.error else "↑"
      cells = [_fmt(*mean_interval(s[key] for s in results[p].get(name, {}).values()
                                   if key in s), _digits(metric)) for p in pvrs]
      where = f" ({split})" if split else ""
      body.append([f"{task.category.title()} / {name}", f"{metric.label}{where} {arrow}"]
                  + cells)
    body.append([f"{task.category.title()} / {name}", "task score"]
                + [_fmt(*board[p]["tasks"].get(name, (math.nan, math.nan)), 2) for p in pvrs])
  partial = any(board[p]["partial"] for p in pvrs)
  label = f"Summary score{' (partial)' if partial else ''}"
  body.append([label, ""] + [_fmt(*board[p]["summary"], 2) for p in pvrs])
  seeds = max(board[p]["seeds"] for p in pvrs)
  notes = [f"Mean over {seeds} seed(s)" + (", ± a 95% t-interval half-width." if seeds > 1
                                           else "; one seed, so no interval.")]
  if partial:
    notes.append(f"Partial: the summary score averages the {len(tasks)} tasks run (G-VUE's "
                 f"has 11, the two Act tasks at weight 1.5); not comparable with the paper's.")
  return "\n".join([markdown_table(["Task", "Metric"] + pvrs, body), "", *notes])


def radar_figure(rows: Iterable[Mapping[str, Any]]):
  """One polygon per PVR over the task scores (0-100)."""
  results = collect(rows)
  board = scores(results)
  tasks = [t for t in gvue.TASKS.names() if any(t in board[p]["tasks"] for p in board)]
  fig = plots.new_figure(figsize=(6, 6))
  ax = fig.add_subplot(projection="polar")
  angles = np.linspace(0, 2 * np.pi, len(tasks), endpoint=False)
  for pvr, s in board.items():
    values = [s["tasks"].get(t, (0.0, 0.0))[0] for t in tasks]
    ax.plot(np.r_[angles, angles[:1]], values + values[:1], label=pvr)
    ax.fill(np.r_[angles, angles[:1]], values + values[:1], alpha=0.1)
  ax.set_xticks(angles)
  ax.set_xticklabels([t.replace("_", "\n") for t in tasks], fontsize=7)
  ax.set_ylim(0, 100)
  ax.legend(loc="upper right", bbox_to_anchor=(1.3, 1.1), fontsize=7)
  ax.set_title("G-VUE task scores")
  return fig
