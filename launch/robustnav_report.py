"""Builds the RobustNav report from a result store, and from nothing else.

  python -m launch.robustnav_report --store=runs/robustnav/results.jsonl --out=runs/robustnav/report

Writes table2.md, table3.md, severity.png and behaviour.png under --out (see
`vcbench.reports.robustnav`) and prints the two tables. The corruption gallery is
`python -m launch.corruption_gallery`.
"""
from __future__ import annotations

from launch import cli

from launch import report_cli
from vcbench.reports import robustnav as report

main = report_cli.main_for("robustnav_report", report.write_report, ("table2", "table3"))

if __name__ == "__main__":
  cli.run(main)
