"""The shared body of the benchmark report CLIs (`--store` in, `--out` files, tables printed)."""
from __future__ import annotations

import pathlib
from typing import Any, Callable, Mapping, Sequence

from absl import flags

from launch import cli
from vcbench import store as store_lib

_STORE = flags.DEFINE_list("store", None, "result store(s) (.jsonl) to read; several, comma-"
                           "separated, are read as one (e.g. a sweep split over machines)",
                           required=True)
_OUT = flags.DEFINE_string("out", None, "directory for the report files", required=True)


def run(name: str, write_report: Callable[[list, str], Mapping[str, pathlib.Path]],
        printed: Sequence[str]) -> None:
  """Writes the report of `--store` under `--out`, prints the `printed` files that exist and
  lists every file; a store that is missing or unusable is a user error naming it (`cli`)."""
  paths = [pathlib.Path(p) for p in _STORE.value]
  for path in paths:
    if not path.is_file():
      raise cli.InputError(f"launch.{name}: result store {str(path)!r} does not exist")
  rows = [r for path in paths for r in store_lib.ResultStore(path).to_rows(latest_only=True)]
  try:
    written = write_report(rows, _OUT.value)
  except ValueError as e:
    raise cli.InputError(f"launch.{name}: {','.join(_STORE.value)}: {e}") from e
  for key in printed:
    if key in written:
      print(written[key].read_text(encoding="utf-8"))
  for p in written.values():
    print(f"wrote {p}")


def main_for(name: str, write_report, printed: Sequence[str]) -> Callable[[Any], None]:
  """An absl `main` running `run(name, write_report, printed)`."""
  def main(argv) -> None:
    del argv
    run(name, write_report, printed)
  return main
