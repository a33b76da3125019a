"""The leaderboard as a static web page: one folder that opens straight from disk.

`write_page(table, out_dir)` writes, under out_dir:

  index.html              the page (from page_assets/index.html)
  data.js                 `window.LEADERBOARD = {...};`: the table as JSON
  assets/leaderboard.js   draws the sortable table and the per-benchmark bar charts
  assets/leaderboard.css
  leaderboard.csv         one row per PVR: rank, every column, provenance
  leaderboard.parquet     the same rows (only when pandas and pyarrow import)

The page needs no server and no network: browsers refuse fetch() of file:// URLs, so the data
is a script the page loads with <script src>, and nothing comes from a CDN. `table` is the
plain dict `vcbench.reports.leaderboard` builds (schema in `REQUIRED` and the checks below);
links in it (records, configs, reports) are relative to out_dir, and write_page does not create
their targets. Every file is written atomically, index.html last, so an interrupted run never
leaves a half-written page.
"""
from __future__ import annotations

import csv
import html
import io
import json
import math
import numbers
import os
import pathlib
from typing import Any, Mapping

from vcbench import files

ASSETS = pathlib.Path(__file__).parent / "page_assets"
DATA_PREFIX = "window.LEADERBOARD = "
CSV_NAME, PARQUET_NAME = "leaderboard.csv", "leaderboard.parquet"
REQUIRED = ("title", "variant", "generated", "code_version", "notes", "benchmarks", "rows")
PROVENANCE = ("code_version", "checkpoint", "checkpoint_sha256")


def json_safe(value: Any) -> Any:
  """`value` with every NaN and infinity replaced by None, and NumPy scalars by Python ones.

  JSON has no NaN: json.dumps would write the bare word NaN, which the browser's parser
  rejects, and the whole page would fail to load. A NaN score means "no value", like None.
  """
  if isinstance(value, Mapping):
    return {str(k): json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [json_safe(v) for v in value]
  if isinstance(value, bool) or value is None or isinstance(value, str):
    return value
  if isinstance(value, numbers.Integral):
    return int(value)
  if isinstance(value, numbers.Real):
    x = float(value)
    return x if math.isfinite(x) else None
  return value


def check_table(table: Mapping[str, Any]) -> None:
  """Raises ValueError naming what is missing or inconsistent, before anything is written (the
  page's script would otherwise fail in the browser, where nobody reads the error)."""
  missing = [k for k in REQUIRED if k not in table]
  if missing:
    raise ValueError(f"leaderboard table: missing keys {missing}")
  seen: set[str] = set()
  for bench in table["benchmarks"]:
    for col in bench.get("columns", ()):
      if col["key"] in seen:
        raise ValueError(f"leaderboard table: column {col['key']!r} appears twice")
      seen.add(col["key"])
  pvrs = [row["pvr"] for row in table["rows"]]
  if len(set(pvrs)) != len(pvrs):
    raise ValueError(f"leaderboard table: a PVR has more than one row ({pvrs})")
  for row in table["rows"]:
    unknown = set(row.get("values", {})) - seen
    if unknown:
      raise ValueError(f"leaderboard table: row {row['pvr']!r} has values for unknown columns "
                       f"{sorted(unknown)}")


def data_js(table: Mapping[str, Any]) -> str:
  """The contents of data.js: one assignment of the table's JSON."""
  text = json.dumps(json_safe(table), ensure_ascii=False, allow_nan=False, indent=1)
  return f"{DATA_PREFIX}{text};\n"


def _columns(table: Mapping[str, Any]) -> list[dict]:
  return [col for bench in table["benchmarks"] for col in bench.get("columns", ())]


def flat_rows(table: Mapping[str, Any]) -> tuple[list[str], list[dict]]:
  """The CSV/parquet header and one flat record per PVR (None where there is no value)."""
  table = json_safe(table)
  keys = [col["key"] for col in _columns(table)]
  # An error column only where some row has one: most columns never carry a ± value.
  err_keys = [k for k in keys if any(k in (r.get("errors") or {}) for r in table["rows"])]
  benches = [b["key"] for b in table["benchmarks"]]
  header = (["pvr", "overall_rank"] + keys + [f"{k}.error" for k in err_keys]
            + list(PROVENANCE) + [f"config_hash.{b}" for b in benches])
  records = []
  for row in table["rows"]:
    values, errors = row.get("values") or {}, row.get("errors") or {}
    prov = row.get("provenance") or {}
    hashes = prov.get("config_hash") or {}
    rec = {"pvr": row["pvr"], "overall_rank": row.get("overall_rank")}
    rec.update({k: values.get(k) for k in keys})
    rec.update({f"{k}.error": errors.get(k) for k in err_keys})
    rec.update({k: prov.get(k) for k in PROVENANCE})
    rec.update({f"config_hash.{b}": hashes.get(b) for b in benches})
    records.append(rec)
  return header, records


def _csv_bytes(header: list[str], records: list[dict]) -> bytes:
  buffer = io.StringIO()
  writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
  writer.writeheader()
  writer.writerows(records)  # A missing value (None) is an empty cell.
  return buffer.getvalue().encode("utf-8")


def _write_parquet(path: pathlib.Path, header: list[str], records: list[dict]) -> bool:
  """Writes the parquet file; False (and no file, not even an old one) without pandas/pyarrow,
  which are the optional "analysis" extra."""
  try:
    import pandas as pd  # pylint: disable=import-outside-toplevel
    import pyarrow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    if path.exists():
      path.unlink()  # A stale file would no longer match the CSV the page links.
    return False
  frame = pd.DataFrame.from_records(records, columns=header)
  files.atomic_write(path, lambda f: frame.to_parquet(f, index=False, engine="pyarrow"))
  return True


def _downloads_html(has_parquet: bool) -> str:
  links = [f'<a href="{CSV_NAME}" download>CSV</a>']
  if has_parquet:
    links.append(f'<a href="{PARQUET_NAME}" download>parquet</a>')
  return "Download: " + " · ".join(links)


def _index_html(table: Mapping[str, Any], has_parquet: bool) -> str:
  """The page template with the title and download links filled in; the script draws the rest
  (the title is in the HTML too, so the tab is named even before the script runs)."""
  template = (ASSETS / "index.html").read_text(encoding="utf-8")
  # Downloads first: a title that contains "{{downloads}}" must stay text.
  return (template.replace("{{downloads}}", _downloads_html(has_parquet))
          .replace("{{title}}", html.escape(str(table["title"]))))


def _write_text(path: pathlib.Path, text: str) -> None:
  data = text.encode("utf-8")
  files.atomic_write(path, lambda f: f.write(data))


def write_page(table: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> pathlib.Path:
  """Writes the leaderboard page and its downloads under out_dir; returns index.html's path."""
  check_table(table)
  out = pathlib.Path(out_dir)
  for name in ("leaderboard.js", "leaderboard.css"):
    _write_text(out / "assets" / name, (ASSETS / name).read_text(encoding="utf-8"))
  _write_text(out / "data.js", data_js(table))
  header, records = flat_rows(table)
  csv_data = _csv_bytes(header, records)
  files.atomic_write(out / CSV_NAME, lambda f: f.write(csv_data))
  has_parquet = _write_parquet(out / PARQUET_NAME, header, records)
  index = out / "index.html"
  _write_text(index, _index_html(table, has_parquet))
  return index
