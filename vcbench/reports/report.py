"""The CortexBench report, built from result-store rows only (`launch/report.py` is its CLI;
jobs call `write_report` directly)."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Mapping, Sequence

from vcbench.benchmarks import cortexbench
from vcbench.benchmarks import cortexbench_ci
from vcbench.benchmarks import cortexbench_scores
from vcbench.reports import plots
from vcbench import store as store_lib
from vcbench.reports import tables

FILES = {"markdown": "cortexbench.md", "html": "cortexbench.html",
         "tasks": "cortexbench_tasks.md", "plot": "rank_distribution.png"}


def write_report(rows: Sequence[Mapping[str, Any]] | Any, out_dir: str | os.PathLike[str],
                 by: str = "suite", title: str = "CortexBench") -> dict[str, pathlib.Path]:
  """Writes the report files for `rows` (store rows; non-CortexBench ones are ignored).

  Args:
    rows: flat rows from `ResultStore.to_rows`, or a DataFrame of them
      (`ResultStore.to_dataframe`, or read back from parquet): the files are the same.
    out_dir: created if needed; existing report files are replaced atomically.
    by: "suite" (the paper's Figure 5) or "task" for the rank-distribution plot.
    title: title of the HTML page and the plot.

  Returns:
    {"markdown", "html", "tasks", "plot"} -> the written paths.
  """
  if by not in ("suite", "task"):
    raise ValueError(f"by: expected 'suite' or 'task', got {by!r}")
  rows = store_lib.as_rows(rows)
  board = cortexbench_scores.leaderboard(rows)
  out = pathlib.Path(out_dir)
  paths = {k: out / name for k, name in FILES.items()}
  intervals = cortexbench_ci.bootstrap(rows, board=board)
  text = tables.cortexbench_markdown(board)
  if board.standings:
    text += "\n" + tables.cortexbench_intervals_markdown(board, intervals)
  plots.write_text(paths["markdown"], text)
  plots.write_text(paths["html"], tables.cortexbench_html(board, title, intervals))
  plots.write_text(paths["tasks"], tables.cortexbench_task_markdown(rows))
  ranks = board.suite_ranks() if by == "suite" else cortexbench_scores.task_ranks(rows)
  plots.rank_distribution(ranks, paths["plot"], title=f"{title}: rank distribution per {by}")
  return paths


def load_rows(store_path: str | os.PathLike[str],
              protocol: str | None = None) -> list[dict[str, Any]]:
  """The store's clean CortexBench rows (optionally of one protocol); errors say what is missing."""
  path = pathlib.Path(store_path)
  if not path.is_file():
    raise FileNotFoundError(f"result store {str(path)!r} does not exist (pass --store=PATH to "
                            "the results.jsonl a CortexBench run wrote)")
  where: dict[str, Any] = {"benchmark": cortexbench.BENCHMARK, "corruption": "none"}
  if protocol is not None:
    where["extra/protocol"] = protocol
  rows = store_lib.ResultStore(path).to_rows(latest_only=True, **where)
  if not rows:
    which = f" with extra/protocol={protocol!r}" if protocol is not None else ""
    raise ValueError(f"result store {str(path)!r} has no CortexBench records{which}")
  return rows
