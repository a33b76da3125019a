"""CortexBench tables: the right numbers, incomplete flags and footnotes, escaping."""
import html

from vcbench.benchmarks import cortexbench_scores
from vcbench.reports import tables

import cortexbench_rows as cbrows



def _rows(extra_pvr="D"):
  # A: metaworld 75 ± 5, dmc 30 (one seed); B: 75 ± 5, 40; C: 47.5 ± 2.5, 20.
  # D: only assembly in metaworld (incomplete 1/2), dmc 100 -> mean rank 1, mean success 100.
  extra = {extra_pvr: {"metaworld/assembly": {0: 41.3, 1: 41.3}, "dmc/walker-walk": {0: 100}}}
  return cbrows.rows({**cbrows.SCORES, **extra})


def test_markdown_has_numbers_flags_and_footnotes():
  text = tables.cortexbench_markdown(cortexbench_scores.leaderboard(_rows()))
  lines = text.splitlines()
  assert lines[0] == ("| Model | Meta-World | DMControl | Ranked in | Mean Rank | Mean Success |")
  body = [l for l in lines if l.startswith("| ") and "Model" not in l]
  assert [l.split(" | ")[0] for l in body] == ["| D", "| B", "| A", "| C"]  # By mean rank.
  assert body[0] == "| D | 41.3* (1/2) | 100.0 ± – | 1/2 | 1.00 | 100.0 |"
  assert body[1] == "| B | 75.0 ± 5.0 | 40.0 ± – | 2/2 | 1.75 | 57.5 |"
  assert "| C | 47.5 ± 2.5 |" in body[3]
  assert tables.INCOMPLETE_NOTE in text and tables.SE_NOTE in text


def test_markdown_without_incomplete_cells_has_no_footnote():
  rows = [r for r in _rows() if r["pvr"] != "D"]
  text = tables.cortexbench_markdown(cortexbench_scores.leaderboard(rows))
  assert "*" not in text and tables.INCOMPLETE_NOTE not in text


def test_markdown_escapes_pipes_in_names():
  text = tables.cortexbench_markdown(cortexbench_scores.leaderboard(_rows("x|y")))
  assert "| x\\|y |" in text


def test_empty_board():
  assert "No CortexBench results" in tables.cortexbench_markdown(cortexbench_scores.leaderboard([]))
  assert "No CortexBench results" in tables.cortexbench_html(cortexbench_scores.leaderboard([]))


def test_html_is_a_document_with_escaped_names():
  name = "<b>vit&mae</b>"
  doc = tables.cortexbench_html(cortexbench_scores.leaderboard(_rows(name)), title="Run <1>")
  assert doc.startswith("<!DOCTYPE html>") and doc.rstrip().endswith("</html>")
  assert "<title>Run &lt;1&gt;</title>" in doc
  assert name not in doc and html.escape(name) in doc
  assert "<td>41.3* (1/2)</td>" in doc and "<td>75.0 ± 5.0</td>" in doc
  assert "<th>Meta-World</th>" in doc and html.escape(tables.INCOMPLETE_NOTE) in doc


def test_task_table():
  text = tables.cortexbench_task_markdown(_rows())
  lines = text.splitlines()
  assert lines[0] == "| Model | metaworld/assembly | metaworld/hammer | dmc/walker-walk |"
  assert "| B | 75.0 ± 5.0 | 75.0 ± 5.0 | 40.0 ± – |" in lines
  assert "| D | 41.3 ± 0.0 | – | 100.0 ± – |" in lines
  assert tables.SE_NOTE in text
