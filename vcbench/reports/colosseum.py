"""The Colosseum report, from result-store rows only (`launch/colosseum_report.py` is its CLI).

  tables.md           Tables II-V: per PVR, success % per task and test set, the task mean and
                      the % change against No perturbation
  expert.md           the scripted expert's success per task and test set (marked where the
                      job excluded the factor for it); only when the rows hold the check
  percent_change.png  Figure 5: % change of task-averaged success vs No perturbation, per PVR
  polar.png           Figure 1: task-averaged success per test set, one polygon per PVR
  comparison.md/.png  the PVRs compared over seeds (mean ± s.e.), the most robust per factor
                      (`reports.colosseum_compare`)

A '-' cell is the paper's: the factor does not apply to the task, the perturbed task is not
solvable by the expert, or the cell was not evaluated (excluded cells are listed with their
reason under each table). Averages over tasks skip the undefined cells.
"""
from __future__ import annotations

import math
import os
import pathlib
from typing import Any, Mapping, Sequence

from matplotlib import figure as figure_lib
import numpy as np

from vcbench.benchmarks import colosseum as cb
from vcbench.reports import colosseum_compare
from vcbench.reports import plots
from vcbench.reports import tables
from vcbench.reports.colosseum_rows import (DASH, Rows, finite, label, scored_rows,
                                            task_mean, task_order, test_set_order)
from vcbench import store as store_lib

FILES = {"tables": "tables.md", "expert": "expert.md", "percent_change": "percent_change.png",
         "polar": "polar.png"}
FAIL = "✗"
Table = Mapping[str, Mapping[str, Mapping[str, float]]]  # pvr -> task -> test set -> success %


def _pct(x: float) -> str:
  return f"{x:.1f}" if finite(x) else DASH


def _change(x: float) -> str:
  return f"{x:+.1f}%" if finite(x) else DASH


def _counts(rows: Sequence[Mapping[str, Any]]) -> str:
  """E.g. "over 25 episodes per cell, mean over 2 seeds", from the rows' episodes and seeds."""
  episodes = sorted({int(r["episodes"]) for r in rows if finite(r.get("episodes"))
                     and not r.get(f"extra/{cb.EXCLUDED}")})  # Excluded cells ran no episodes.
  seeds = len({r["seed"] for r in rows})
  span = "" if not episodes else (f"{episodes[0]}" if len(episodes) == 1
                                  else f"{episodes[0]}-{episodes[-1]}")
  return ((f"over {span} episodes per cell, " if span else "")
          + f"mean over {seeds} seed{'s' * (seeds != 1)}")


def _excluded_notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
  reasons: dict[tuple[str, str], str] = {}
  for r in rows:
    reason = r.get(f"extra/{cb.EXCLUDED}")
    if reason:
      reasons.setdefault((r["task"], r["corruption"]), str(reason))
  order = {t: i for i, t in enumerate(task_order(t for t, _ in reasons))}
  sets = {s: i for i, s in enumerate(test_set_order(s for _, s in reasons))}
  keys = sorted(reasons, key=lambda k: (order[k[0]], sets[k[1]]))
  return [f"- {task} × {label(s)}: {reasons[(task, s)]}" for task, s in keys]


def pvr_table_markdown(pvr: str, per_task: Mapping[str, Mapping[str, float]],
                       rows: Sequence[Mapping[str, Any]]) -> str:
  """One PVR's Table II-V: a row per task, then Mean and % change; notes below."""
  sets = test_set_order(s for t in per_task.values() for s in t)
  header = ["Task"] + [label(s) for s in sets]
  body = [[task] + [_pct(per_task[task].get(s, math.nan)) for s in sets]
          for task in task_order(per_task)]
  body.append(["Mean"] + [_pct(task_mean(per_task, s)) for s in sets])
  body.append(["% change"] + ["" if s == cb.NONE else _change(cb.percent_change(per_task, s))
                              for s in sets])
  notes = [f"Cells: success % {_counts(rows)}.",
           "'-': excluded (the factor does not apply, or the perturbed task is not solvable "
           "by the scripted expert) or not evaluated. Mean: over the tasks where the test set "
           "is defined. % change: task-averaged success vs No perturbation, both averaged over "
           "the tasks where the two are defined (the paper's Figure 5)."]
  excluded = _excluded_notes(rows)
  if excluded:
    notes += ["", "Excluded cells:", *excluded]
  return f"## {pvr}\n\n" + tables.markdown_table(header, body) + "\n\n" + "\n".join(notes) + "\n"


def tables_markdown(rows: Rows) -> str:
  """Tables II-V for every PVR in `rows` (store rows), in PVR name order."""
  rows = scored_rows(rows)
  table = cb.success_table(rows)
  out = ["# The Colosseum (vcbench, MetaWorld): success % per test set\n"]
  for pvr in sorted(table):
    out.append(pvr_table_markdown(pvr, table[pvr], [r for r in rows if r["pvr"] == pvr]))
  if len(out) == 1:
    out.append("_No Colosseum results._\n")
  return "\n".join(out)


def expert_table(rows: Rows) -> dict[str, dict[str, float]]:
  """task -> test set -> the scripted expert's success (fraction, mean over its rows)."""
  acc: dict[tuple[str, str], list[float]] = {}
  for r in store_lib.as_rows(rows):
    if r.get("benchmark") != cb.EXPERT_BENCHMARK:
      continue
    rate = r.get("success_rate")
    if rate is None and finite(r.get("score")):
      rate = r["score"] / 100.0
    acc.setdefault((r["task"], r["corruption"]), [])
    if finite(rate):
      acc[(r["task"], r["corruption"])].append(float(rate))
  out: dict[str, dict[str, float]] = {}
  for (task, test_set), rates in acc.items():
    out.setdefault(task, {})[test_set] = sum(rates) / len(rates) if rates else math.nan
  return out


def _expert_cell(rate: float, failed: bool) -> str:
  if not finite(rate):
    return DASH
  text = f"{100 * rate:.0f}" if float(100 * rate).is_integer() else f"{100 * rate:.1f}"
  return f"{text} {FAIL}" if failed else text


def expert_failures(rows: Rows) -> set[tuple[str, str]]:
  """(task, test set) pairs the job excluded because the scripted expert fell below its bar
  (from the reasons stored with the excluded cells, so the rule the job ran with decides)."""
  return {(r["task"], r["corruption"]) for r in store_lib.as_rows(rows)
          if r.get("benchmark") == cb.BENCHMARK
          and "scripted expert" in str(r.get(f"extra/{cb.EXCLUDED}") or "")}


def expert_markdown(rows: Rows) -> str | None:
  """The expert-solvability table (task x test set, success %), or None without expert rows."""
  rows = list(store_lib.as_rows(rows))
  failed = expert_failures(rows)
  rows = [r for r in rows if r.get("benchmark") == cb.EXPERT_BENCHMARK]
  table = expert_table(rows)
  if not table:
    return None
  sets = test_set_order(s for t in table.values() for s in t)
  body = [[task] + [_expert_cell(table[task].get(s, math.nan), (task, s) in failed)
                    for s in sets] for task in task_order(table)]
  legend = (f"Cells: the scripted expert's success % {_counts(rows)}. "
            f"{FAIL}: below the job's bar (by default 90% of the expert's success without "
            "perturbation on that task; `expert_rule`, `expert_min_success`), so the perturbed "
            "task counts as unsolvable and the cell is excluded from the PVR tables (the "
            "paper's '-'; the reasons are listed under them). '-': not checked (e.g. the "
            "factor does not apply to the task).")
  return ("# The Colosseum (vcbench, MetaWorld): scripted-expert solvability\n\n"
          + tables.markdown_table(["Task"] + [label(s) for s in sets], body)
          + f"\n\n{legend}\n")


def percent_change_plot(table: Table, path: str | os.PathLike[str],
                        dpi: int = 110) -> pathlib.Path:
  """Writes `percent_change_figure(table)` to the PNG `path`; returns it."""
  return plots.save_figure(percent_change_figure(table), path, dpi=dpi)


def percent_change_figure(table: Table) -> figure_lib.Figure:
  """Figure 5: horizontal bars of % change vs No perturbation, a group per test set."""
  pvrs = sorted(table) or ["(none)"]
  sets = [s for s in test_set_order(s for p in table.values() for t in p.values() for s in t)
          if s != cb.NONE]
  height = 0.8 / len(pvrs)
  fig = plots.new_figure(figsize=(7.5, 1.5 + len(sets) * (0.15 + 0.16 * len(pvrs))))
  ax = fig.add_subplot()
  shown = []
  for i, pvr in enumerate(pvrs):
    values = [cb.percent_change(table.get(pvr, {}), s) for s in sets]
    ys = np.arange(len(sets)) + (i - (len(pvrs) - 1) / 2) * height
    ok = np.array([finite(v) for v in values], dtype=bool)
    ax.barh(ys[ok], np.asarray(values, dtype=float)[ok], height, label=pvr, color=f"C{i}")
    for y, v in zip(ys, values):
      if finite(v):
        shown.append(v)
        ax.text(v, y, f" {v:+.0f}% " if v else " ∘ ", fontsize=6, va="center",
                ha="left" if v >= 0 else "right")
      else:
        ax.text(0, y, f" {DASH}", fontsize=9, fontweight="bold", va="center", ha="left",
                color=f"C{i}")
  ax.axvline(0, color="0.3", linewidth=0.8)
  ax.set_yticks(range(len(sets)), labels=[label(s) for s in sets])
  ax.set_ylim(len(sets) - 0.5, -0.5)  # All perturbations on top, as in the paper.
  lo, hi = min(shown + [-100.0]), max(shown + [0.0])
  ax.set_xlim(lo - 0.15 * (hi - lo), hi + 0.15 * (hi - lo) + 5)
  ax.set_xlabel("% change of task-averaged success vs No perturbation ('-': undefined)")
  ax.grid(axis="x", color="0.9")
  ax.set_axisbelow(True)
  ax.set_title("The Colosseum: % change vs No perturbation")
  ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
  return fig


def polar_plot(table: Table, path: str | os.PathLike[str], dpi: int = 110) -> pathlib.Path:
  """Writes `polar_figure(table)` to the PNG `path`; returns it."""
  return plots.save_figure(polar_figure(table), path, dpi=dpi)


def polar_figure(table: Table) -> figure_lib.Figure:
  """Figure 1: task-averaged success % per test set on radial axes, one polygon per PVR."""
  found = test_set_order(s for p in table.values() for t in p.values() for s in t)
  sets = [cb.NONE] + [s for s in found if s not in (cb.NONE, cb.ALL)] + [cb.ALL]
  angles = np.linspace(0, 2 * np.pi, len(sets), endpoint=False)
  closed = np.append(angles, angles[0])
  fig = plots.new_figure(figsize=(7.5, 7.5))
  ax = fig.add_subplot(projection="polar")
  ax.set_theta_zero_location("N")  # No perturbation on top, the factors clockwise.
  ax.set_theta_direction(-1)
  ax.set_rlabel_position(180 / len(sets))  # Radial labels between the first two axes.
  for i, pvr in enumerate(sorted(table)):
    values = np.array([task_mean(table[pvr], s) for s in sets] + [task_mean(table[pvr], sets[0])])
    ax.plot(closed, values, marker="o", markersize=3, color=f"C{i}", label=pvr)
    if np.isfinite(values).all():
      ax.fill(closed, values, color=f"C{i}", alpha=0.08)
  ax.set_xticks(angles, labels=[label(s) for s in sets], fontsize=8)
  ax.set_ylim(0, 100)
  ax.set_yticks([20, 40, 60, 80, 100])
  ax.tick_params(axis="y", labelsize=7)
  ax.set_title("The Colosseum: task-averaged success % per test set", pad=32)
  if table:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.05, 1.05))
  return fig


def write_report(rows: Rows, out_dir: str | os.PathLike[str]) -> dict[str, pathlib.Path]:
  """Writes the report files for `rows` (store rows, or a DataFrame of them from
  `ResultStore.to_dataframe`); returns their paths by `FILES` key.

  Raises:
    ValueError: no row has benchmark "colosseum".
  """
  rows = store_lib.as_rows(rows)
  scored = scored_rows(rows)
  if not scored:
    raise ValueError(f"no Colosseum records (benchmark {cb.BENCHMARK!r}) among the rows")
  out = pathlib.Path(out_dir)
  paths = {k: out / name for k, name in FILES.items()}
  table = cb.success_table(scored)
  plots.write_text(paths["tables"], tables_markdown(scored))
  expert = expert_markdown(rows)
  if expert is None:
    del paths["expert"]
  else:
    plots.write_text(paths["expert"], expert)
  percent_change_plot(table, paths["percent_change"])
  polar_plot(table, paths["polar"])
  paths.update(colosseum_compare.write(scored, out))
  return paths
