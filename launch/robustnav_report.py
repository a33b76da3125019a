"""Builds the RobustNav report from a result store, and from nothing else.

  python -m launch.robustnav_report --store=runs/robustnav/results.jsonl --out=runs/robustnav/report

Writes table2.md, table3.md, severity.png and behaviour.png under --out (see
`vcbench.reports.robustnav`) and prints the two tables. The corruption gallery is
`python -m launch.corruption_gallery`.
"""
from __future__ import annotations

import pathlib
import sys
from typing import Sequence

from absl import app
from absl import flags

from vcbench.reports import robustnav as report
from vcbench.reports import store as store_lib

_STORE = flags.DEFINE_string("store", None, "result store (.jsonl) to read", required=True)
_OUT = flags.DEFINE_string("out", None, "directory for the report files", required=True)


def main(argv: Sequence[str]) -> None:
  del argv
  path = pathlib.Path(_STORE.value)
  if not path.is_file():
    sys.exit(f"launch.robustnav_report: result store {str(path)!r} does not exist")
  try:
    paths = report.write_report(store_lib.ResultStore(path).to_rows(latest_only=True), _OUT.value)
  except ValueError as e:
    sys.exit(f"launch.robustnav_report: {path}: {e}")
  for key in ("table2", "table3"):
    print(paths[key].read_text(encoding="utf-8"))
  for p in paths.values():
    print(f"wrote {p}")


if __name__ == "__main__":
  app.run(main)
