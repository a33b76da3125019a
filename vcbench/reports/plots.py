"""Report figures: the CortexBench rank distribution (the paper's Figure 5) and per-task scores.

Figures are drawn on `matplotlib.figure.Figure` with the Agg canvas, never through pyplot, so they
work headless, keep no global figure state and do not change the caller's pyplot backend. A
`*_figure` function returns the Figure (to show in a notebook, restyle or save elsewhere);
`save_figure` writes one atomically (`vcbench.files.atomic_write`), so a reader or a crash never
sees a half-written PNG. The functions that take a path (`rank_distribution`, `task_bars`) are
the two steps in one call.
"""
from __future__ import annotations

import collections
import io
import math
import os
import pathlib
from typing import Any, Mapping, Sequence

from matplotlib.backends import backend_agg
from matplotlib import figure as figure_lib
import numpy as np

from vcbench import files


def write_text(path: str | os.PathLike[str], text: str) -> pathlib.Path:
  """Writes `text` (UTF-8) to `path` atomically; returns the path."""
  files.atomic_write(path, lambda f: f.write(text.encode("utf-8")))
  return pathlib.Path(path)


def new_figure(**kwargs: Any) -> figure_lib.Figure:
  """A Figure on its own Agg canvas, so that `savefig` works without pyplot."""
  fig = figure_lib.Figure(**kwargs)
  backend_agg.FigureCanvasAgg(fig)
  return fig


def _write_png(fig: figure_lib.Figure, f, dpi: int) -> None:
  backend_agg.FigureCanvasAgg(fig)  # Also for Figures made elsewhere, without a canvas.
  fig.savefig(f, format="png", dpi=dpi, bbox_inches="tight")


def save_figure(fig: figure_lib.Figure, path: str | os.PathLike[str],
                dpi: int = 100) -> pathlib.Path:
  """Writes `fig` to `path` as a PNG, atomically; returns the path."""
  files.atomic_write(path, lambda f: _write_png(fig, f, dpi))
  return pathlib.Path(path)


def png_bytes(fig: figure_lib.Figure, dpi: int = 100) -> bytes:
  """`fig` as PNG bytes, the same bytes `save_figure` writes (e.g. to display in a notebook)."""
  buffer = io.BytesIO()
  _write_png(fig, buffer, dpi)
  return buffer.getvalue()


def _mean(values: Sequence[float]) -> float:
  return float(np.mean(values)) if len(values) else math.inf


def rank_distribution(ranks: Mapping[str, Sequence[float]], path: str | os.PathLike[str],
                      title: str = "Rank distribution", n_ranks: int | None = None,
                      dpi: int = 100) -> pathlib.Path:
  """Writes `rank_distribution_figure(ranks, title, n_ranks)` to the PNG `path`; returns it."""
  return save_figure(rank_distribution_figure(ranks, title=title, n_ranks=n_ranks), path, dpi)


def rank_distribution_figure(ranks: Mapping[str, Sequence[float]],
                             title: str = "Rank distribution",
                             n_ranks: int | None = None) -> figure_lib.Figure:
  """Draws each model's achieved ranks as vertical ticks on a 1..N rank axis, one row per model.

  As in the paper's Figure 5, a model gets a tick at rank x for every benchmark (or task) where
  it ranked x; a rank achieved k > 1 times is labelled "×k". Rows are sorted by mean rank (best
  on top) and a diamond marks the mean.

  Args:
    ranks: model -> its ranks (from `Leaderboard.suite_ranks()` or `cortexbench_scores.task_ranks`).
    title: figure title.
    n_ranks: length of the rank axis; default: the number of models (or the largest rank).

  Returns:
    The Figure (save it with `save_figure`).
  """
  models = sorted(ranks, key=lambda m: (_mean(ranks[m]), m))
  all_ranks = [r for m in models for r in ranks[m]]
  n = n_ranks or max([len(models), *(math.ceil(r) for r in all_ranks)] or [1])
  fig = new_figure(figsize=(max(4.0, 1.0 + 0.45 * n), 1.0 + 0.45 * max(len(models), 1)))
  ax = fig.add_subplot()
  for y, model in enumerate(models):
    for rank, count in sorted(collections.Counter(ranks[model]).items()):
      ax.vlines(rank, y - 0.32, y + 0.32, color="tab:blue", linewidth=2.5)
      if count > 1:
        ax.text(rank + 0.08, y - 0.3, f"×{count}", fontsize=7, va="bottom", color="tab:blue")
    if ranks[model]:
      ax.plot([_mean(ranks[model])], [y], marker="D", markersize=4, color="0.35", zorder=3)
  ax.set_yticks(range(len(models)), labels=models)
  ax.set_ylim(len(models) - 0.5, -0.5)  # Best model on top.
  ax.set_xticks(range(1, n + 1))
  ax.set_xlim(0.5, n + 0.5)
  ax.set_xlabel("rank (1 = best; ◆ = mean rank)")
  ax.grid(axis="x", color="0.9")
  ax.set_axisbelow(True)
  ax.set_title(title)
  return fig


def task_bars(scores: Mapping[str, Mapping[str, Any]], path: str | os.PathLike[str],
              title: str = "Score per task", dpi: int = 100) -> pathlib.Path:
  """Writes `task_bars_figure(scores, title)` to the PNG `path`; returns it."""
  return save_figure(task_bars_figure(scores, title=title), path, dpi)


def task_bars_figure(scores: Mapping[str, Mapping[str, Any]],
                     title: str = "Score per task") -> figure_lib.Figure:
  """Grouped bars: per task, one bar per model at its mean score, error bar = standard error.

  Args:
    scores: model -> task -> an object with `mean` and `stderr` (`cortexbench_scores.task_scores`);
      a NaN stderr draws no error bar; a missing task leaves a gap.
    title: figure title.

  Returns:
    The Figure (save it with `save_figure`).
  """
  models = list(scores)
  tasks = list(dict.fromkeys(t for m in models for t in scores[m]))
  width = 0.8 / max(len(models), 1)
  fig = new_figure(figsize=(max(5.0, 1.5 + 1.2 * len(tasks)), 4.0))
  ax = fig.add_subplot()
  x = np.arange(len(tasks))
  for i, model in enumerate(models):
    got = [scores[model].get(t) for t in tasks]
    means = [s.mean if s is not None else np.nan for s in got]
    errs = [s.stderr if s is not None and not math.isnan(s.stderr) else 0.0 for s in got]
    ax.bar(x + (i - (len(models) - 1) / 2) * width, means, width, yerr=errs, capsize=2,
           label=model)
  ax.set_xticks(x, labels=tasks, rotation=30, ha="right")
  ax.set_ylabel("score (0-100)")
  ax.set_ylim(0, 105)
  ax.set_title(title)
  if models:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # Clear of the labels.
  return fig
