"""Builds The Colosseum report from a result store, and from nothing else.

  python -m launch.colosseum_report --store=runs/colosseum/results.jsonl \
      --out=runs/colosseum/report

Writes tables.md, expert.md (when the store holds the expert-solvability check),
percent_change.png, polar.png and the PVR comparison over seeds (comparison.md/.png) under --out
(see `vcbench.reports.colosseum`) and prints the tables and the comparison.
"""
from __future__ import annotations

from launch import cli

from launch import report_cli
from vcbench.reports import colosseum as report

main = report_cli.main_for("colosseum_report", report.write_report,
                           ("tables", "expert", "comparison"))

if __name__ == "__main__":
  cli.run(main)
