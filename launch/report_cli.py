"""The shared body of the benchmark report CLIs (`--store` in, `--out` files, tables printed)."""
from __future__ import annotations

import pathlib
import sys
from typing import Any, Callable, Mapping, Sequence

from absl import flags

from vcbench.reports import store as store_lib

_STORE = flags.DEFINE_string("store", None, "result store (.jsonl) to read", required=True)
_OUT = flags.DEFINE_string("out", None, "directory for the report files", required=True)


def run(name: str, write_report: Callable[[list, str], Mapping[str, pathlib.Path]],
        printed: Sequence[str]) -> None:
  """Writes the report of `--store` under `--out`, prints the `printed` files that exist and
  lists every file; exits with a message naming the store when it is missing or unusable."""
  path = pathlib.Path(_STORE.value)
  if not path.is_file():
    sys.exit(f"launch.{name}: result store {str(path)!r} does not exist")
  try:
    paths = write_report(store_lib.ResultStore(path).to_rows(latest_only=True), _OUT.value)
  except ValueError as e:
    sys.exit(f"launch.{name}: {path}: {e}")
  for key in printed:
    if key in paths:
      print(paths[key].read_text(encoding="utf-8"))
  for p in paths.values():
    print(f"wrote {p}")


def main_for(name: str, write_report, printed: Sequence[str]) -> Callable[[Any], None]:
  """An absl `main` running `run(name, write_report, printed)`."""
  def main(argv) -> None:
    del argv
    run(name, write_report, printed)
  return main
