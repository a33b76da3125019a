"""Reports from a DataFrame are the reports from rows, and plot functions return Figures."""
import math

from matplotlib import figure as figure_lib
import pytest

from vcbench.benchmarks import colosseum as cb
from vcbench.benchmarks import cortexbench_scores
from vcbench.reports import colosseum
from vcbench.reports import plots
from vcbench.reports import report
from vcbench.reports import robustnav
from vcbench.store import Cell, ResultStore, config_hash

pd = pytest.importorskip("pandas")

REPORTS = {"cortexbench": report.write_report, "colosseum": colosseum.write_report,
           "robustnav": robustnav.write_report}


def _cortexbench(store, h):
  for i, pvr in enumerate(("mvp", "r3m", "clip")):
    for j, task in enumerate(("assembly", "hammer", "drawer-open")):
      for seed in (0, 1):
        score = 20.0 * i + 3 * j + seed
        store.append(Cell(benchmark="cortexbench", task=f"metaworld/{task}", pvr=pvr, seed=seed),
                     h, {"score": score, "success_rate": score / 100, "episodes": 2,
                         "episode_scores": [score - 1.0, score + 1.0]},
                     extra={"protocol": "quick"})


def _colosseum(store, h):
  for i, pvr in enumerate(("mvp", "r3m")):
    for task in ("drawer-open", "hammer"):
      for k, test_set in enumerate((cb.NONE, cb.ALL, "MO_Color", "RO_Color")):
        for seed in (0, 1):
          cell = Cell(benchmark=cb.BENCHMARK, task=task, pvr=pvr, seed=seed, corruption=test_set)
          if task == "drawer-open" and test_set == "RO_Color":
            store.append(cell, h, {"score": math.nan, "success_rate": math.nan, "episodes": 0},
                         extra={cb.EXCLUDED: "the task has no receiver object"},
                         allow_nonfinite=True)
          else:
            score = 80.0 - 20 * i - 10 * k + 4 * seed
            store.append(cell, h, {"score": score, "success_rate": score / 100, "episodes": 25})
      store.append(Cell(benchmark=cb.EXPERT_BENCHMARK, task=task, pvr="expert", seed=0,
                        corruption=cb.ALL), h, {"success_rate": 0.88, "episodes": 25})


def _robustnav(store, h):
  cells = [("none", "none", 0, 90.0), ("none", "spatter", 5, 30.0), ("none", "spatter", 3, 50.0),
           ("none", "defocus_blur", 5, 60.0), ("pad_rp", "spatter", 5, 40.0)]
  for adaptation, corruption, severity, sr in cells:
    store.append(Cell(benchmark="robustnav", task="pointnav_rgb", pvr="rgb",
                      adaptation=adaptation, seed=0, corruption=corruption, severity=severity),
                 h, {"success": sr, "spl": sr / 2, "failed_actions": 1.0, "min_distance": 0.5,
                     "stop_failure_pos": 10.0, "stop_failure_neg": math.nan},
                 extra={"kind": "vis"}, allow_nonfinite=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
  """All three benchmarks in one store, so most metric columns are missing on most rows."""
  store = ResultStore(tmp_path_factory.mktemp("store") / "results.jsonl")
  h = config_hash({"protocol": "test"})
  _cortexbench(store, h)
  _colosseum(store, h)
  _robustnav(store, h)
  return store


def _files(paths):
  return {key: path.read_bytes() for key, path in paths.items()}


@pytest.mark.parametrize("benchmark", sorted(REPORTS))
def test_report_from_dataframe_equals_report_from_rows(store, tmp_path, benchmark):
  write_report = REPORTS[benchmark]
  from_rows = _files(write_report(store.to_rows(latest_only=True), tmp_path / "rows"))
  from_frame = _files(write_report(store.to_dataframe(latest_only=True), tmp_path / "frame"))
  parquet = store.to_parquet(tmp_path / "results.parquet", latest_only=True)
  from_parquet = _files(write_report(pd.read_parquet(parquet), tmp_path / "parquet"))
  assert len(from_rows) >= 4
  assert from_frame == from_rows
  assert from_parquet == from_rows
  if benchmark == "cortexbench":   # Per-episode scores survive the frame: intervals are drawn.
    assert b"Orderings of Mean Success that hold: clip > r3m" in from_rows["markdown"]


def test_row_functions_accept_a_dataframe(store):
  frame, rows = store.to_dataframe(latest_only=True), store.to_rows(latest_only=True)
  assert colosseum.tables_markdown(frame) == colosseum.tables_markdown(rows)
  assert colosseum.expert_markdown(frame) == colosseum.expert_markdown(rows)
  assert robustnav.table2_markdown(frame) == robustnav.table2_markdown(rows)
  assert robustnav.table3_markdown(frame) == robustnav.table3_markdown(rows)


def _figures(rows):
  scores = cortexbench_scores.task_scores(rows)
  table = cb.success_table(colosseum.scored_rows(rows))
  return {
      "rank_distribution": (plots.rank_distribution_figure(cortexbench_scores.task_ranks(rows)),
                            lambda p: plots.rank_distribution(
                                cortexbench_scores.task_ranks(rows), p), 100),
      "task_bars": (plots.task_bars_figure(scores), lambda p: plots.task_bars(scores, p), 100),
      "percent_change": (colosseum.percent_change_figure(table),
                         lambda p: colosseum.percent_change_plot(table, p), 110),
      "polar": (colosseum.polar_figure(table), lambda p: colosseum.polar_plot(table, p), 110),
      "severity": (robustnav.severity_figure(rows),
                   lambda p: robustnav.severity_plot(rows, p), 110),
      "behaviour": (robustnav.behaviour_figure(rows),
                    lambda p: robustnav.behaviour_plot(rows, p), 110),
  }


def test_plot_functions_return_figures_that_render_to_the_png_written(store, tmp_path):
  """`plot_x(..., path)` is `save_figure(x_figure(...), path)`: the same PNG bytes."""
  rows = store.to_rows(latest_only=True)
  for name, (figure, write, dpi) in _figures(rows).items():
    assert isinstance(figure, figure_lib.Figure), name
    assert figure.axes, name
    written = write(tmp_path / f"{name}.png").read_bytes()
    assert plots.png_bytes(figure, dpi=dpi) == written, name


def test_save_figure_writes_png_bytes(tmp_path):
  figure = plots.rank_distribution_figure({"a": [1, 2], "b": [2, 1]})
  path = plots.save_figure(figure, tmp_path / "out" / "ranks.png", dpi=80)
  assert path.read_bytes() == plots.png_bytes(figure, dpi=80)
  assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
