"""The result store: one JSON record per evaluated cell, appended atomically.

Every evaluation in vcbench writes one record per *cell* -- (benchmark, task, pvr, adaptation,
seed, corruption, severity) -- together with the hash of the config that produced it, the code
version and the metrics. Tables, plots and the leaderboard are built only from these records, so
a report can always be rebuilt from disk and traced back to the config and commit behind it.

The store is a JSON-lines file because it is the simplest format that is

* append-only: a writer never rewrites what others wrote, so several evaluation processes
  (a sweep on one machine, or hosts sharing a POSIX file system) can share one file;
* crash-tolerant: a record is one `write(2)` of one full line under an exclusive `flock`, then
  `fsync`; a crash can at worst leave a truncated *last* line, which readers skip with a warning
  and the next writer removes;
* greppable and diffable by hand.

A re-run asks `pending(cells, config_hash)` and evaluates only the cells that have no record yet
for that config hash, so an interrupted sweep resumes where it stopped.

Usage:

  store = ResultStore("runs/results.jsonl")
  h = config_hash(config)
  for cell in store.pending(cells, h):
    metrics = evaluate(cell, config)
    store.append(cell, h, metrics)
  rows = store.to_rows(benchmark="cortexbench", corruption="none")
  frame = store.to_dataframe(benchmark="cortexbench")   # the same rows, as a pandas DataFrame
  store.to_parquet("runs/results.parquet")               # and as a parquet file

pandas (and pyarrow, for parquet) are imported only by the DataFrame functions, so the store and
everything built on it work without them. `as_rows` turns a DataFrame back into rows, which is
how the reports accept either.

Non-finite metrics: JSON has no NaN/Infinity, and a NaN metric usually means a diverged run that
should be noticed, so `append` rejects NaN and +-inf unless the caller passes
`allow_nonfinite=True`; then they are stored as `null` (read back as `None`, "no value").
"""

from __future__ import annotations

import dataclasses
import datetime
import fcntl
import importlib
import json
import math
import numbers
import os
import pathlib
import re
import warnings
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from vcbench import files
from vcbench.errors import UserError

# Re-exported: callers hash configs and read the code version through the store.
from vcbench.provenance import canonical_json, code_version, config_hash  # noqa: F401

SCHEMA_VERSION = 1
# Fields of a flat row (see `to_rows`) besides the cell's; metric names may not reuse them.
_RECORD_FIELDS = ("config_hash", "code_version", "time", "schema")


class ResultStoreError(UserError, ValueError):
  """A result store file, or a record for it, is malformed."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
  """The identity of one evaluated cell of the benchmark grid.

  Keyword-only so that a call site cannot silently swap, say, `task` and `pvr`.

  Attributes:
    benchmark: benchmark name, e.g. "cortexbench", "robustnav".
    task: task name within the benchmark, e.g. "metaworld/assembly".
    pvr: name of the visual representation (a `models/zoo.py` entry).
    adaptation: how the PVR was adapted: "frozen", "finetune", "pad", ...
    seed: the evaluation/training seed.
    corruption: visual/dynamics corruption or perturbation factor; "none" when clean.
    severity: its severity (0 when clean; 1-5 for RobustNav corruptions).
  """

  benchmark: str
  task: str
  pvr: str
  adaptation: str = "frozen"
  seed: int
  corruption: str = "none"
  severity: int = 0

  def __post_init__(self):
    for name in ("benchmark", "task", "pvr", "adaptation", "corruption"):
      value = getattr(self, name)
      if not isinstance(value, str) or not value:
        raise TypeError(
            f"Cell.{name}: expected a non-empty str, got {value!r} ({type(value).__name__}).")
    for name in ("seed", "severity"):
      value = getattr(self, name)
      # bool is an int subclass but `seed=True` is a bug; numpy ints are fine and normalised.
      if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"Cell.{name}: expected an int, got {value!r} ({type(value).__name__}).")
      object.__setattr__(self, name, int(value))
    if self.severity < 0:
      raise ValueError(f"Cell.severity: expected >= 0, got {self.severity}.")
    if self.corruption == "none" and self.severity != 0:
      raise ValueError(
          f"Cell: corruption='none' needs severity=0, got severity={self.severity}.")

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> "Cell":
    """Inverse of `to_dict`; errors name the unknown or missing fields."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
      raise ResultStoreError(f"Cell: unknown fields {unknown}; expected a subset of {sorted(names)}.")
    try:
      return cls(**d)
    except TypeError as e:
      raise ResultStoreError(f"Cell: {e}") from e


CELL_FIELDS = tuple(f.name for f in dataclasses.fields(Cell))


def _utc_now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat()


# ---------------------------------------------------------------------------------------------
# Validation of metrics and extras.
# ---------------------------------------------------------------------------------------------


def _metric_value(value: Any, name: str, allow_nonfinite: bool) -> Any:
  """Validates one metric value; numpy/jax scalars and arrays become Python numbers/lists."""
  if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
    value = np.asarray(value)
    value = value.item() if value.ndim == 0 else value.tolist()
  if isinstance(value, (list, tuple)):
    return [_metric_value(v, f"{name}[{i}]", allow_nonfinite) for i, v in enumerate(value)]
  if isinstance(value, (str, bool)):
    return value
  if isinstance(value, numbers.Integral):
    return int(value)
  if isinstance(value, numbers.Real):
    value = float(value)
    if not math.isfinite(value):
      if not allow_nonfinite:
        raise ValueError(f"metrics[{name!r}] is {value}; non-finite metrics are rejected unless "
                         "append(..., allow_nonfinite=True), which stores them as null.")
      return None
    return value
  if value is None and allow_nonfinite:
    return None
  raise TypeError(f"metrics[{name!r}]: expected a number, str, bool or a list of them, got "
                  f"{value!r} ({type(value).__name__}).")


def _validate_metrics(metrics: Mapping[str, Any], allow_nonfinite: bool) -> dict[str, Any]:
  if not isinstance(metrics, Mapping) or not metrics:
    raise TypeError(f"metrics: expected a non-empty dict, got {metrics!r}.")
  out = {}
  for name, value in metrics.items():
    if not isinstance(name, str) or not name:
      raise TypeError(f"metrics: names must be non-empty str, got {name!r}.")
    if name in CELL_FIELDS or name in _RECORD_FIELDS or name.startswith("extra/"):
      raise ValueError(f"metrics[{name!r}]: the name is reserved for a record field in flat "
                       f"rows (reserved: {sorted(CELL_FIELDS + _RECORD_FIELDS)} and 'extra/*').")
    out[name] = _metric_value(value, name, allow_nonfinite)
  return out


def _validate_extra(extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
  if extra is None:
    return None
  if not isinstance(extra, Mapping):
    raise TypeError(f"extra: expected a dict or None, got {type(extra).__name__}.")
  try:
    return json.loads(json.dumps(extra, allow_nan=False))
  except (TypeError, ValueError) as e:
    raise TypeError(f"extra: must be JSON-serialisable with finite numbers: {e}") from e


def _validate_hash(h: Any) -> str:
  if not isinstance(h, str) or not h:
    raise TypeError(f"config_hash: expected a non-empty str (see config_hash()), got {h!r}.")
  return h


# ---------------------------------------------------------------------------------------------
# The store.
# ---------------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
  """os.write until all of `data` is written (a short write only happens on e.g. a full disk)."""
  view = memoryview(data)
  while view:
    n = os.write(fd, view)
    view = view[n:]


def record_line(record: Mapping[str, Any]) -> bytes:
  """One record as the store writes it: one line of canonical JSON."""
  return (json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)
          + "\n").encode("utf-8")


def record_key(record: Mapping[str, Any]) -> tuple[Cell, str]:
  """What identifies a record's result: (its cell, its config hash)."""
  return Cell.from_dict(record["cell"]), record["config_hash"]


_WRITER_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _read_bytes_locked(fd: int) -> bytes:
  size, chunks, offset = os.fstat(fd).st_size, [], 0
  while offset < size:  # pread may return less than asked for very large files.
    chunk = os.pread(fd, size - offset, offset)
    if not chunk:
      break
    chunks.append(chunk)
    offset += len(chunk)
  return b"".join(chunks)


def _read_bytes(path: pathlib.Path) -> bytes:
  try:
    fd = os.open(path, os.O_RDONLY)
  except FileNotFoundError:
    return b""
  try:
    fcntl.flock(fd, fcntl.LOCK_SH)  # Never see a half-done append.
    try:
      return _read_bytes_locked(fd)
    finally:
      fcntl.flock(fd, fcntl.LOCK_UN)
  finally:
    os.close(fd)


def _records_of(path: pathlib.Path) -> list[dict[str, Any]]:
  """The records of one store file (see `ResultStore.records`)."""
  lines = _read_bytes(path).split(b"\n")
  complete, tail = lines[:-1], lines[-1]  # `tail` is b"" when the file ends with "\n".
  out = [_parse_record(raw, f"{path}:{i}") for i, raw in enumerate(complete, start=1)
         if raw.strip()]
  if tail.strip():
    record = _parse_record_or_none(tail)
    if record is None:
      warnings.warn(f"{path}:{len(complete) + 1}: skipping a truncated last record "
                    f"({len(tail)} bytes, no final newline), likely left by a crash.",
                    RuntimeWarning, stacklevel=3)
    else:
      out.append(record)
  return out


class ResultStore:
  """An append-only JSON-lines file of result records, safe for concurrent writers.

  Writers and readers coordinate with `flock` on the file itself (exclusive to append, shared to
  read), so it is safe across processes on one machine; on network file systems it is as safe as
  their `flock` emulation. Across hosts, give each writer its own file instead:
  `ResultStore(path, writer="host3-job17")` appends to `<path>.d/host3-job17.jsonl`, which no one
  else writes, and every reader of `path` (with or without a writer) merges the main file and all
  writer files, in time order. A reader never sees a half record (a partial last line, which a
  reader on another host can catch mid-append, is skipped), and what a writer finished stays in
  its own file whatever happens to the others.
  """

  def __init__(self, path: str | os.PathLike[str], writer: str | None = None):
    self.path = pathlib.Path(path)
    if writer is not None and not _WRITER_NAME.fullmatch(writer):
      raise ValueError(f"ResultStore writer {writer!r}: expected letters, digits, '.', '_' or "
                       "'-' (it names the file <store>.d/<writer>.jsonl)")
    self.writer = writer

  def __repr__(self) -> str:
    writer = f", writer={self.writer!r}" if self.writer else ""
    return f"ResultStore({str(self.path)!r}{writer})"

  @property
  def writers_dir(self) -> pathlib.Path:
    """Where the per-writer files live: `<path>.d/`."""
    return self.path.with_name(self.path.name + ".d")

  @property
  def write_path(self) -> pathlib.Path:
    """The file this store appends to: the main file, or this writer's own."""
    return self.path if self.writer is None else self.writers_dir / f"{self.writer}.jsonl"

  def files(self) -> list[pathlib.Path]:
    """The files a reader merges: the main file, then every writer's, by name."""
    return [self.path] + (sorted(self.writers_dir.glob("*.jsonl"))
                          if self.writers_dir.is_dir() else [])

  # -- writing --------------------------------------------------------------------------------

  def append(self, cell: Cell, config_hash: str, metrics: Mapping[str, Any],
             extra: Mapping[str, Any] | None = None, *,
             allow_nonfinite: bool = False) -> dict[str, Any]:
    """Validates and appends one record; returns it. Durable (fsynced) when this returns."""
    if not isinstance(cell, Cell):
      raise TypeError(f"cell: expected a vcbench.store.Cell, got {type(cell).__name__}.")
    record = {
        "schema": SCHEMA_VERSION,
        "cell": cell.to_dict(),
        "config_hash": _validate_hash(config_hash),
        "code_version": code_version(),
        "time": _utc_now(),
        "metrics": _validate_metrics(metrics, allow_nonfinite),
    }
    extra = _validate_extra(extra)
    if extra is not None:
      record["extra"] = extra
    self._append_line(record_line(record))
    return record

  def append_record(self, record: Mapping[str, Any]) -> None:
    """Appends a record read from another store as it is (its time and code version kept),
    e.g. a sweep worker's; durable when this returns."""
    line = record_line(record)
    _parse_record(line, f"append_record to {self.write_path}")
    self._append_line(line)

  def append_new(self, records: Iterable[Mapping[str, Any]]) -> int:
    """Appends, as they were, the records whose (cell, config hash) this store lacks (e.g. a
    sweep worker's or a benchmark's own store's); returns how many."""
    done = self.completed()
    n = 0
    for r in records:
      key = record_key(r)
      if key not in done:
        self.append_record(r)
        done.add(key)
        n += 1
    return n

  def _append_line(self, data: bytes) -> None:
    path = self.write_path
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX)
      try:
        self._repair_tail(fd, path)
        _write_all(fd, data)  # one write: O_APPEND + the lock keep lines whole.
        os.fsync(fd)
      finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
      os.close(fd)
    if created:  # Make the new directory entry durable too.
      dir_fd = os.open(path.parent, os.O_RDONLY)
      try:
        os.fsync(dir_fd)
      finally:
        os.close(dir_fd)

  @staticmethod
  def _repair_tail(fd: int, path: pathlib.Path) -> None:
    """Under the exclusive lock: terminate or drop a last line that a crashed writer left.

    Without this, our record would be glued onto the partial line and both would become one
    corrupt line in the middle of the file, which readers (rightly) refuse.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
      return  # The common case: one byte read.
    data = _read_bytes_locked(fd)  # Rare (after a crash): read it all.
    cut = data.rfind(b"\n") + 1
    partial = data[cut:]
    lineno = data.count(b"\n", 0, cut) + 1
    if _parse_record_or_none(partial) is not None:
      _write_all(fd, b"\n")  # A whole record that only lost its newline: keep it.
      return
    warnings.warn(f"{path}:{lineno}: dropping a truncated record ({size - cut} bytes) left "
                  "by an interrupted write.", RuntimeWarning, stacklevel=4)
    os.ftruncate(fd, cut)

  # -- reading --------------------------------------------------------------------------------

  def records(self) -> list[dict[str, Any]]:
    """All records: the main file's in file order, merged with the writer files' by time (a
    stable sort, so one file's order is kept among equal times). A missing file is an empty
    store.

    A truncated last line (a crash mid-write) is skipped with a warning naming file and line;
    any other malformed line raises `ResultStoreError`, since silently dropping results from
    the middle of a store would bias every report built from it.
    """
    files = self.files()
    out = _records_of(files[0])
    if len(files) > 1:
      out = sorted(out + [r for f in files[1:] for r in _records_of(f)], key=lambda r: r.get("time") or "")
    return out

  def __iter__(self) -> Iterator[dict[str, Any]]:
    return iter(self.records())

  def __len__(self) -> int:
    return len(self.records())

  def completed(self) -> set[tuple[Cell, str]]:
    """The (cell, config_hash) pairs that have at least one record."""
    return {record_key(r) for r in self.records()}

  def done(self, cell: Cell, config_hash: str) -> bool:
    """Whether `cell` already has a record for `config_hash`. Reads the file: for many cells
    use `pending`, which reads it once."""
    return (cell, _validate_hash(config_hash)) in self.completed()

  def pending(self, cells: Iterable[Cell], config_hash: str) -> list[Cell]:
    """The cells, in order and without duplicates, that have no record for `config_hash`."""
    _validate_hash(config_hash)
    completed = self.completed()
    out, seen = [], set()
    for cell in cells:
      if not isinstance(cell, Cell):
        raise TypeError(f"pending: expected Cells, got {type(cell).__name__}.")
      if (cell, config_hash) not in completed and cell not in seen:
        seen.add(cell)
        out.append(cell)
    return out

  def to_rows(self, *, latest_only: bool = False, **where: Any) -> list[dict[str, Any]]:
    """Flat dict rows for reports, optionally filtered.

    A row holds the cell fields, config_hash, code_version, time, every metric by its name,
    and extras as "extra/<key>". Each `where` item filters on a row field: a plain value must be
    equal, a list/tuple/set is membership, a callable is a predicate. Rows lacking a filtered
    field are dropped.

    Args:
      latest_only: keep only the last record of each (cell, config_hash), e.g. when a cell was
        re-evaluated after a crash between its record and the sweep's bookkeeping.
      **where: field filters as above.
    """
    rows = [_flatten(r) for r in self.records()]
    if latest_only:
      last = {}
      for row in rows:
        last[tuple(row[f] for f in CELL_FIELDS) + (row["config_hash"],)] = row
      rows = list(last.values())
    return [row for row in rows if _matches(row, where)]

  def to_dataframe(self, *, latest_only: bool = False, **where: Any):
    """The rows of `to_rows(latest_only=..., **where)` as a pandas DataFrame, one row per record.

    Columns are those of `to_rows` (cell fields, config_hash, code_version, time, schema, the
    metrics, "extra/<key>"); see `rows_to_frame` for how missing values are represented.

    Raises:
      ImportError: pandas is not installed.
    """
    return rows_to_frame(self.to_rows(latest_only=latest_only, **where))

  def to_parquet(self, path: str | os.PathLike[str], *, latest_only: bool = False,
                 **where: Any) -> pathlib.Path:
    """Writes `to_dataframe(latest_only=..., **where)` to a parquet file atomically; returns it.

    Raises:
      ImportError: pandas or pyarrow is not installed.
    """
    return write_parquet(self.to_dataframe(latest_only=latest_only, **where), path)


# ---------------------------------------------------------------------------------------------
# DataFrames and parquet (pandas and pyarrow are optional: imported only here, when called).
# ---------------------------------------------------------------------------------------------


def _require(module: str, purpose: str):
  """Imports an optional dependency, or says which package to install for what."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    package = module.split(".")[0]
    raise ImportError(f"{purpose} needs the optional package {package!r}, which is not installed "
                      f"(pip install {package}); rows (ResultStore.to_rows) need nothing "
                      "extra.") from e


def _is_missing(value: Any) -> bool:
  """None, NaN, pandas.NA or NaT: what a DataFrame holds where a row has no value."""
  if value is None:
    return True
  if isinstance(value, (str, bytes, list, tuple, dict, np.ndarray)):
    return False
  try:
    return bool(value != value)  # NaN, NaT and NA are the only values unequal to themselves.
  except TypeError:  # pandas.NA refuses bool().
    return True


def _frame_column(pd, values: list[Any]):
  """A column for `values`, keeping integers and booleans exact where some rows lack a value.

  pandas would turn [25, None] into [25.0, NaN]; the nullable Int64/boolean dtypes keep 25 an
  int, so rows read back from the frame format exactly as the store's rows do. A column with no
  value at all is float NaN, so that numeric code (mean, pivot) treats it like other metrics.
  """
  present = [v for v in values if v is not None]
  if not present:  # Only null metrics (non-finite numbers) or absent keys: NaN, not None.
    return np.full(len(values), np.nan)
  if len(present) < len(values):
    if all(isinstance(v, bool) for v in present):
      return pd.array(values, dtype="boolean")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
      return pd.array(values, dtype="Int64")
  return values


def rows_to_frame(rows: Iterable[Mapping[str, Any]]):
  """Flat rows (as from `to_rows`) as a pandas DataFrame, one row per row.

  Columns: the cell and record fields first (present even when there are no rows), then every
  other key in the order first seen. A row lacking a key, or holding None (a non-finite metric
  the store kept as null), has a missing value there: NaN in float and str columns, <NA> in
  integer and boolean ones, None in object (list, mixed) columns. `as_rows` reads every one of
  them back as None.

  Raises:
    ImportError: pandas is not installed.
  """
  pd = _require("pandas", "A DataFrame of results")
  rows = list(rows)
  columns = list(dict.fromkeys(list(CELL_FIELDS) + list(_RECORD_FIELDS)
                               + [k for row in rows for k in row]))
  if not rows:
    return pd.DataFrame(columns=columns)
  data = {c: _frame_column(pd, [row.get(c) for row in rows]) for c in columns}
  return pd.DataFrame(data, columns=columns)


def _from_frame(value: Any) -> Any:
  """A DataFrame cell as the store's rows hold it: Python scalars, lists, None when missing."""
  if isinstance(value, np.ndarray):  # parquet reads list metrics back as arrays.
    return [_from_frame(v) for v in value.tolist()]
  if isinstance(value, (list, tuple)):
    return [_from_frame(v) for v in value]
  if isinstance(value, dict):
    return {k: _from_frame(v) for k, v in value.items()}
  if _is_missing(value):
    return None
  return value.item() if isinstance(value, np.generic) else value


def frame_rows(frame) -> list[dict[str, Any]]:
  """A DataFrame's rows as flat dicts like `to_rows`, for code written for rows (the reports).

  Missing values become None (the key is kept), which code reading rows with `row.get(key)`
  already treats as "no value"; numpy scalars and arrays become Python numbers and lists.
  """
  return [{k: _from_frame(v) for k, v in record.items()} for record in frame.to_dict("records")]


def as_rows(rows_or_frame: Any) -> list[dict[str, Any]]:
  """Rows from either a list (any iterable) of row dicts or a pandas DataFrame.

  A DataFrame must be converted, not iterated: iterating one yields its column names.
  """
  if hasattr(rows_or_frame, "columns") and hasattr(rows_or_frame, "to_dict"):
    return frame_rows(rows_or_frame)
  return list(rows_or_frame)


def _parquet_column(column):
  """Object columns mixing types, or holding dicts (free-form extras), as JSON text.

  pyarrow needs one type per column; JSON keeps the value and the column readable anywhere.
  """
  if column.dtype != object:
    return column
  kinds = {type(v) for v in column if not _is_missing(v)}
  if len(kinds) <= 1 and dict not in kinds:
    return column
  return column.map(lambda v: None if _is_missing(v) else json.dumps(_from_frame(v),
                                                                     sort_keys=True))


def write_parquet(rows_or_frame: Any, path: str | os.PathLike[str]) -> pathlib.Path:
  """Writes rows or a DataFrame of them to `path` as parquet, atomically; returns the path.

  Read it back with `pandas.read_parquet(path)` (and `as_rows` for rows). Object columns that
  mix types, or hold dicts, are stored as JSON text (see `_parquet_column`).

  Raises:
    ImportError: pandas or pyarrow is not installed.
  """
  frame = rows_or_frame
  if not hasattr(frame, "columns"):
    frame = rows_to_frame(frame)
  _require("pyarrow", "Writing results to parquet")
  frame = frame.copy()
  for column in frame.columns:
    frame[column] = _parquet_column(frame[column])
  files.atomic_write(path, lambda f: frame.to_parquet(f, index=False, engine="pyarrow"))
  return pathlib.Path(path)


def _parse_record_or_none(raw: bytes) -> dict[str, Any] | None:
  try:
    return _parse_record(raw, "<tail>")
  except ResultStoreError:
    return None


def _parse_record(raw: bytes, where: str) -> dict[str, Any]:
  """Parses and checks one line; errors name `where` (file:line)."""
  try:
    record = json.loads(raw)
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    snippet = raw[:80].decode("utf-8", "replace")
    raise ResultStoreError(f"{where}: corrupt record ({e}); expected one JSON object per line, "
                           f"got {snippet!r}...") from e
  if not isinstance(record, dict):
    raise ResultStoreError(f"{where}: expected a JSON object, got {type(record).__name__}.")
  missing = [k for k in ("cell", "config_hash", "metrics") if k not in record]
  if missing:
    raise ResultStoreError(f"{where}: record lacks keys {missing}; has {sorted(record)}.")
  if not isinstance(record["cell"], dict) or not isinstance(record["metrics"], dict):
    raise ResultStoreError(f"{where}: 'cell' and 'metrics' must be JSON objects.")
  try:
    Cell.from_dict(record["cell"])
  except (ResultStoreError, ValueError) as e:
    raise ResultStoreError(f"{where}: bad cell: {e}") from e
  return record


def _flatten(record: Mapping[str, Any]) -> dict[str, Any]:
  row = dict(record["cell"])
  for k in _RECORD_FIELDS:
    row[k] = record.get(k)
  row.update(record["metrics"])
  for k, v in (record.get("extra") or {}).items():
    row[f"extra/{k}"] = v
  return row


def _matches(row: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
  for field, want in where.items():
    if field not in row:
      return False
    got = row[field]
    if callable(want):
      if not want(got):
        return False
    elif isinstance(want, (list, tuple, set, frozenset)):
      if got not in want:
        return False
    elif got != want:
      return False
  return True
