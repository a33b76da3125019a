"""CortexBench tables in the layout of the paper's Table 2, as markdown and standalone HTML.

Rows are PVRs sorted by Mean Rank; columns are the suites with results, then Mean Rank and Mean
Success. A cell is "mean ± standard error" over seeds ("± –" when fewer than two seeds have every
task). An incomplete cell (the PVR lacks some of the suite's evaluated tasks) is printed as
"41.3* (3/5)" and explained in a footnote, because it is neither ranked nor in Mean Success and a
reader comparing numbers down a column must see that.
"""
from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping

from vcbench.benchmarks import cortexbench
from vcbench.benchmarks import cortexbench_ci
from vcbench.benchmarks import cortexbench_scores
from vcbench import store as store_lib

DASH = "–"
INCOMPLETE_NOTE = ("Cells marked * (n/N) are incomplete: scored on n of the N tasks evaluated in "
                   "that suite, so not ranked there and not counted in Mean Success.")
SE_NOTE = "± –: fewer than 2 seeds have every task, so no standard error."


def _num(x: float, digits: int = 1) -> str:
  return DASH if x is None or math.isnan(x) else f"{x:.{digits}f}"


def format_score(score: cortexbench_scores.SuiteScore | None) -> str:
  """Formats "86.1 ± 2.1", "86.1 ± –" (no stderr), "41.3* (3/5)" (incomplete), "–" (no rows)."""
  if score is None:
    return DASH
  if not score.complete:
    return f"{score.mean:.1f}* ({score.n_tasks}/{score.n_tasks_total})"
  return f"{score.mean:.1f} ± {_num(score.stderr)}"


def _md_escape(text: str) -> str:
  """Escapes what would break a markdown table cell (a "|" or a line break in a PVR name).

  Underscores are left alone: intra-word ones are not emphasis, and the table is also printed
  to a terminal, where "random\\_vit\\_s" would be noise.
  """
  return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _board_cells(board: cortexbench_scores.Leaderboard) -> tuple[list[str], list[list[str]], bool, bool]:
  """Header, body rows (plain text), whether any cell is incomplete, whether any se is missing."""
  header = (["Model"] + [cortexbench.SUITES[n].label for n in board.suites]
            + ["Ranked in", "Mean Rank", "Mean Success"])
  body, incomplete, no_se = [], False, False
  for st in board.standings:
    cells = [st.pvr]
    for name in board.suites:
      score = st.suites.get(name)
      cells.append(format_score(score))
      incomplete |= score is not None and not score.complete
      no_se |= score is not None and score.complete and math.isnan(score.stderr)
    cells += [f"{st.n_ranked}/{len(board.suites)}", _num(st.mean_rank, 2),
              _num(st.mean_success)]
    body.append(cells)
  return header, body, incomplete, no_se


def _markdown_table(header: list[str], body: Iterable[list[str]]) -> str:
  lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
           "|" + "|".join([":---"] + ["---:"] * (len(header) - 1)) + "|"]
  for cells in body:
    lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
  return "\n".join(lines)


markdown_table = _markdown_table   # public name for other report modules


def _notes(incomplete: bool, no_se: bool) -> list[str]:
  return ([INCOMPLETE_NOTE] if incomplete else []) + ([SE_NOTE] if no_se else [])


def cortexbench_markdown(board: cortexbench_scores.Leaderboard) -> str:
  """The leaderboard as a markdown table with footnotes (see the module docstring)."""
  if not board.standings:
    return "_No CortexBench results._\n"
  header, body, incomplete, no_se = _board_cells(board)
  text = _markdown_table(header, body)
  notes = _notes(incomplete, no_se)
  if notes:
    text += "\n\n" + "\n".join(notes)
  return text + "\n"


def _interval_cells(board: cortexbench_scores.Leaderboard, intervals: cortexbench_ci.Intervals
                    ) -> tuple[list[str], list[list[str]]]:
  """Header and body rows of the intervals table (ranked PVRs only; empty without intervals)."""
  if intervals.missing or not intervals.mean_success:
    return [], []
  header = (["Model"] + [cortexbench.SUITES[n].label for n in board.suites] + ["Mean Success"])
  body = []
  for st in board.standings:
    if st.pvr not in intervals.mean_success:
      continue
    per = intervals.suites[st.pvr]
    body.append([st.pvr] + [str(per[n]) if n in per else DASH for n in board.suites]
                + [f"{st.mean_success:.1f} {intervals.mean_success[st.pvr]}"])
  return header, body


def cortexbench_intervals_markdown(board: cortexbench_scores.Leaderboard,
                                   intervals: cortexbench_ci.Intervals) -> str:
  """The ranked PVRs' 95% bootstrap intervals (suite scores, Mean Success) as a markdown table,
  followed by the orderings of Mean Success that hold and those that do not."""
  lines = cortexbench_ci.describe(intervals)
  header, body = _interval_cells(board, intervals)
  table = _markdown_table(header, body) + "\n\n" if body else ""
  return table + "\n".join(lines) + "\n"


def _html_table(header: list[str], body: Iterable[list[str]]) -> str:
  rows = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
  for cells in body:
    rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
  return "<table>\n" + "\n".join(rows) + "\n</table>"


def cortexbench_html(board: cortexbench_scores.Leaderboard, title: str = "CortexBench",
                     intervals: cortexbench_ci.Intervals | None = None) -> str:
  """The leaderboard (and its `intervals`, if given) as a standalone HTML document; every
  string is HTML-escaped."""
  header, body, incomplete, no_se = _board_cells(board)
  notes = "".join(f"<p class=\"note\">{html.escape(n)}</p>"
                  for n in _notes(incomplete, no_se))
  table = _html_table(header, body) if board.standings else "<p>No CortexBench results.</p>"
  if intervals is not None and board.standings:
    header, body = _interval_cells(board, intervals)
    notes += (f"<h2>{round(100 * cortexbench_ci.LEVEL)}% intervals</h2>\n" + (_html_table(header, body) if body else "")
              + "".join(f"<p class=\"note\">{html.escape(n)}</p>"
                        for n in cortexbench_ci.describe(intervals)))
  return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
.note {{ font-size: 90%; color: #555; }}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
{table}
{notes}
</body>
</html>
"""


def cortexbench_task_markdown(rows: Iterable[Mapping[str, Any]] | Any) -> str:
  """Per-task table: rows PVRs (leaderboard order), columns task keys, mean ± se over seeds.

  `rows`: store rows, or a DataFrame of them (see `store.as_rows`)."""
  rows = store_lib.as_rows(rows)
  scores = cortexbench_scores.task_scores(rows)
  if not scores:
    return "_No CortexBench results._\n"
  board = cortexbench_scores.leaderboard(rows)
  keys = [cortexbench.task_key(n, t) for n in board.suites for t in board.tasks[n]]
  body = [[pvr] + [format_score(scores[pvr].get(k)) for k in keys] for pvr in board.pvrs()]
  no_se = any(math.isnan(s.stderr) for per in scores.values() for s in per.values())
  text = _markdown_table(["Model"] + keys, body)
  return text + ("\n\n" + SE_NOTE if no_se else "") + "\n"
