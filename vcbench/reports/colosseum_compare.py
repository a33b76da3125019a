"""The Colosseum's comparison of PVRs over seeds, from result-store rows only.

  comparison.md   per test set and PVR: task-averaged success and its % change against No
                  perturbation, mean ± standard error over seeds (each seed's % change is
                  computed on its own, then averaged); then, per factor, the PVR most robust
                  to it and whether the runner-up is within noise
  comparison.png  the PVRs side by side: one panel of % change bars (± s.e.) per PVR

The state oracle sees no pixels: under a visual factor its episodes are its clean ones (the
physics and placements are the episode seed's), so it is a reference for the physical
factors and is left out of the "most robust" ranking.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from matplotlib import figure as figure_lib
import numpy as np

from vcbench.benchmarks import colosseum as cb
from vcbench.reports import colosseum_rows as report
from vcbench.reports import plots
from vcbench.reports import tables

FILES = {"comparison": "comparison.md", "comparison_plot": "comparison.png"}
# pvr -> test set -> (mean, s.e., seeds) of a per-seed quantity.
Stats = dict[str, dict[str, tuple[float, float, int]]]


def per_seed_tables(rows: Iterable[Mapping[str, Any]]
                    ) -> dict[str, dict[int, dict[str, dict[str, float]]]]:
  """pvr -> seed -> task -> test set -> success % (NaN: excluded), from scored rows."""
  out: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
  for r in report.scored_rows(rows):
    score = r.get("score")
    value = math.nan if score is None else float(score)
    out.setdefault(r["pvr"], {}).setdefault(int(r["seed"]), {}).setdefault(
        r["task"], {})[r["corruption"]] = value
  return out


def mean_se(values: Sequence[float]) -> tuple[float, float, int]:
  """(mean, standard error, count) of the finite values; NaN where undefined."""
  finite = np.asarray([v for v in values if math.isfinite(v)], float)
  if not len(finite):
    return math.nan, math.nan, 0
  se = float(finite.std(ddof=1) / math.sqrt(len(finite))) if len(finite) > 1 else math.nan
  return float(finite.mean()), se, len(finite)


def seed_stats(rows: Iterable[Mapping[str, Any]]) -> tuple[Stats, Stats]:
  """(success, change): per PVR and test set, the task-averaged success % and its % change
  vs No perturbation, each computed per seed, as (mean, s.e., seeds) over seeds."""
  success: Stats = {}
  change: Stats = {}
  for pvr, by_seed in per_seed_tables(rows).items():
    sets = report.test_set_order(s for t in by_seed.values() for task in t.values() for s in task)
    for s in sets:
      success.setdefault(pvr, {})[s] = mean_se(
          [report.task_mean(per_task, s) for per_task in by_seed.values()])
      if s != cb.NONE:
        change.setdefault(pvr, {})[s] = mean_se(
            [cb.percent_change(per_task, s) for per_task in by_seed.values()])
  return success, change


def _cell(stat: tuple[float, float, int], unit: str = "") -> str:
  mean, se, _ = stat
  if not math.isfinite(mean):
    return report.DASH
  sign = "+" if unit == "%" and mean > 0 else ""
  return f"{sign}{mean:.1f}{unit}" + (f" ± {se:.1f}" if math.isfinite(se) else "")


def most_robust(change: Stats) -> list[dict[str, Any]]:
  """Per factor (and all perturbations): the pixel PVR with the highest mean % change, the
  runner-up, and whether their gap exceeds two standard errors of the difference."""
  out = []
  pvrs = [p for p in change if p not in cb.PIXEL_FREE]
  sets = report.test_set_order(s for p in pvrs for s in change[p])
  for s in sets:
    ranked = sorted(((change[p][s], p) for p in pvrs
                     if s in change[p] and math.isfinite(change[p][s][0])),
                    key=lambda x: -x[0][0])
    if not ranked:
      continue
    (best, pvr), rest = ranked[0], ranked[1:]
    entry = {"test_set": s, "pvr": pvr, "change": best[0], "se": best[1], "runner_up": None,
             "separated": None}
    if rest:
      (second, name) = rest[0]
      se_diff = math.sqrt(best[1] ** 2 + second[1] ** 2) if all(
          math.isfinite(x) for x in (best[1], second[1])) else math.nan
      entry.update(runner_up=name, runner_up_change=second[0],
                   separated=(best[0] - second[0] > 2 * se_diff) if math.isfinite(se_diff)
                   else None)
    out.append(entry)
  return out


def comparison_markdown(rows: Iterable[Mapping[str, Any]]) -> str:
  rows = list(rows)
  success, change = seed_stats(rows)
  pvrs = sorted(success)
  sets = report.test_set_order(s for p in pvrs for s in success[p])
  seeds = {p: max((v[2] for v in success[p].values()), default=0) for p in pvrs}
  header = ["Test set"] + [f"{p} ({seeds[p]} seed{'s' * (seeds[p] != 1)})" for p in pvrs]
  body = []
  for s in sets:
    cells = []
    for p in pvrs:
      text = _cell(success[p].get(s, (math.nan, math.nan, 0)))
      if s != cb.NONE and text != report.DASH:
        text += f" ({_cell(change[p].get(s, (math.nan, math.nan, 0)), '%')})"
      cells.append(text)
    body.append([report.label(s)] + cells)
  lines = ["# The Colosseum (vcbench, MetaWorld): PVRs compared over seeds", "",
           tables.markdown_table(header, body), "",
           "Cells: task-averaged success % (% change vs No perturbation), mean ± standard "
           "error over seeds; each seed's % change is computed from its own task averages "
           "over the tasks where both test sets are defined. "
           f"{', '.join(cb.PIXEL_FREE)} sees no pixels (a reference for the physical factors: "
           "under a visual factor its episodes are its clean ones).", "",
           "## Most robust pixel PVR per test set", ""]
  for e in most_robust(change):
    line = f"- {report.label(e['test_set'])}: **{e['pvr']}** ({e['change']:+.1f}%"
    line += f" ± {e['se']:.1f})" if math.isfinite(e["se"]) else ")"
    if e["runner_up"] is not None:
      verdict = {True: "separated by more than 2 s.e.", False: "within 2 s.e.: not separated",
                 None: "no s.e. (one seed): not tested"}[e["separated"]]
      line += f"; next {e['runner_up']} ({e['runner_up_change']:+.1f}%), {verdict}"
    lines.append(line)
  return "\n".join(lines) + "\n"


def comparison_figure(rows: Iterable[Mapping[str, Any]]) -> figure_lib.Figure:
  """One panel per PVR, side by side: % change per test set, ± s.e. over seeds."""
  _, change = seed_stats(rows)
  pvrs = sorted(change) or ["(none)"]
  sets = report.test_set_order(s for p in change.values() for s in p)
  fig = plots.new_figure(figsize=(2.3 * len(pvrs) + 1.6, 1.2 + 0.28 * max(len(sets), 1)))
  axes = fig.subplots(1, len(pvrs), sharey=True, squeeze=False)[0]
  for i, (ax, pvr) in enumerate(zip(axes, pvrs)):
    stats = [change.get(pvr, {}).get(s, (math.nan, math.nan, 0)) for s in sets]
    mean = np.array([m for m, _, _ in stats], float)
    se = np.nan_to_num(np.array([e for _, e, _ in stats], float))
    ok = np.isfinite(mean)
    ys = np.arange(len(sets))
    ax.barh(ys[ok], mean[ok], xerr=se[ok], color=f"C{i}", ecolor="0.3", capsize=2)
    for y in ys[~ok]:
      ax.text(0, y, f" {report.DASH}", va="center", fontsize=8)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_xlim(-105, 30)
    ax.set_title(pvr, fontsize=8)
    ax.grid(axis="x", color="0.9")
    ax.tick_params(axis="x", labelsize=7)
  axes[0].set_yticks(range(len(sets)), labels=[report.label(s) for s in sets], fontsize=7)
  axes[0].set_ylim(len(sets) - 0.5, -0.5)
  fig.suptitle("The Colosseum: % change vs No perturbation per PVR (± s.e. over seeds)",
               fontsize=9)
  return fig


def write(rows: Sequence[Mapping[str, Any]], out) -> dict[str, Any]:
  """Writes comparison.md and comparison.png into the directory `out` (a pathlib.Path)."""
  paths = {k: out / name for k, name in FILES.items()}
  plots.write_text(paths["comparison"], comparison_markdown(rows))
  plots.save_figure(comparison_figure(rows), paths["comparison_plot"])
  return paths
