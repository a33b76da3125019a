"""Builds the CortexBench report from a result store, and from nothing else.

  python -m launch.report --store=runs/cortexbench/results.jsonl --out=runs/cortexbench/report \
      [--by=suite|task] [--protocol=full]

Writes, under --out: cortexbench.md and cortexbench.html (the Table-2 leaderboard),
cortexbench_tasks.md (per-task mean ± se over seeds) and rank_distribution.png (the paper's
Figure 5: the ranks each PVR reached per suite, or per task with --by=task, which is the
informative one while only one suite has results). Prints the leaderboard.

Jobs call `vcbench.reports.report.write_report(rows, out_dir)` directly.
"""
from __future__ import annotations

import sys
from typing import Sequence

from absl import flags
from launch import cli

from vcbench.reports.report import FILES, load_rows, write_report  # noqa: F401 - re-exported.

_STORE = flags.DEFINE_string("store", None, "result store (.jsonl) to read", required=True)
_OUT = flags.DEFINE_string("out", None, "directory for the report files", required=True)
_BY = flags.DEFINE_enum("by", "suite", ["suite", "task"],
                        "rank-distribution plot: ranks per suite or per task")
_PROTOCOL = flags.DEFINE_string("protocol", None,
                                "only records whose extra/protocol is this (quick, full, tiny)")


def main(argv: Sequence[str]) -> None:
  del argv
  try:
    rows = load_rows(_STORE.value, _PROTOCOL.value)
  except (FileNotFoundError, ValueError) as e:
    raise cli.InputError(f"launch.report: {e}") from e
  protocols = sorted({str(r.get("extra/protocol")) for r in rows})
  if _PROTOCOL.value is None and len(protocols) > 1:
    print(f"note: the store mixes protocols {protocols}; pass --protocol to report one",
          file=sys.stderr)
  paths = write_report(rows, _OUT.value, by=_BY.value)
  print(paths["markdown"].read_text(encoding="utf-8"))
  for name in paths.values():
    print(f"wrote {name}")


if __name__ == "__main__":
  cli.run(main)
