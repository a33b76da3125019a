"""Tests for vcbench.store: atomic appends, crash tolerance, re-run skipping, hashing."""

import json
import math
import multiprocessing
import warnings

import ml_collections
import numpy as np
import pytest

from vcbench import store as store_lib
from vcbench.store import Cell, ResultStore, ResultStoreError, config_hash


def _cell(**kw):
  base = dict(benchmark="cortexbench", task="metaworld/assembly", pvr="vc1-base", seed=0)
  base.update(kw)
  return Cell(**base)


# --- Cell ------------------------------------------------------------------------------------


def test_cell_defaults_and_hashable():
  c = _cell()
  assert (c.adaptation, c.corruption, c.severity) == ("frozen", "none", 0)
  assert c == _cell() and hash(c) == hash(_cell())
  assert Cell.from_dict(c.to_dict()) == c


def test_cell_normalises_numpy_ints():
  c = _cell(seed=np.int64(3), corruption="speckle", severity=np.int32(2))
  assert type(c.seed) is int and type(c.severity) is int
  assert c == _cell(seed=3, corruption="speckle", severity=2)


@pytest.mark.parametrize("kw, err, match", [
    (dict(task=""), TypeError, "Cell.task"),
    (dict(pvr=3), TypeError, "Cell.pvr"),
    (dict(seed=1.5), TypeError, "Cell.seed"),
    (dict(seed=True), TypeError, "Cell.seed"),
    (dict(corruption="blur", severity=-1), ValueError, "severity"),
    (dict(severity=2), ValueError, "corruption='none'"),
])
def test_cell_validation(kw, err, match):
  with pytest.raises(err, match=match):
    _cell(**kw)


def test_cell_is_keyword_only():
  with pytest.raises(TypeError):
    Cell("cortexbench", "task", "pvr", "frozen", 0)  # pylint: disable=too-many-function-args


# --- config hash -----------------------------------------------------------------------------


def test_config_hash_stable_across_key_order():
  a = {"lr": 1e-3, "model": {"width": 256, "depth": 3}, "tasks": ("a", "b")}
  b = {"tasks": ["a", "b"], "model": {"depth": 3, "width": 256}, "lr": 1e-3}
  assert config_hash(a) == config_hash(b)
  assert len(config_hash(a)) == 64
  # A known value pins the canonical form: changing it silently orphans every stored record.
  assert store_lib.canonical_json(a) == (
      '{"lr":0.001,"model":{"depth":3,"width":256},"tasks":["a","b"]}')


def test_config_hash_differs_for_different_values():
  base = {"lr": 1e-3, "model": {"width": 256}}
  assert config_hash(base) != config_hash({"lr": 1e-4, "model": {"width": 256}})
  assert config_hash(base) != config_hash({"lr": 1e-3, "model": {"width": 512}})
  assert config_hash(base) != config_hash({"lr": 1e-3, "model": {"width": 256}, "x": None})
  assert config_hash({"n": 1}) != config_hash({"n": 1.0})
  assert config_hash({"n": 1}) != config_hash({"n": True})


def test_config_hash_configdict_matches_dict():
  cfg = ml_collections.ConfigDict()
  cfg.model = ml_collections.ConfigDict({"width": 256, "depth": 3})
  cfg.lr = 1e-3
  cfg.seeds = (0, 1)
  assert config_hash(cfg) == config_hash(
      {"seeds": [0, 1], "lr": 1e-3, "model": {"depth": 3, "width": 256}})
  assert config_hash(cfg) == config_hash(ml_collections.FrozenConfigDict(cfg))


def test_config_hash_numpy_values():
  assert config_hash({"x": np.float32(0.5), "y": np.arange(2)}) == config_hash(
      {"x": 0.5, "y": [0, 1]})


def test_config_hash_rejects_unhashable_values_naming_path():
  with pytest.raises(TypeError, match=r"model\.act"):
    config_hash({"model": {"act": object()}})
  with pytest.raises(TypeError, match="collide"):
    config_hash({1: "a", "1": "b"})


# --- code version ----------------------------------------------------------------------------


def test_code_version_is_cached_nonempty_string():
  v = store_lib.code_version()
  assert isinstance(v, str) and v
  assert store_lib.code_version() is v


# --- append / records ------------------------------------------------------------------------


def test_append_and_read_back(tmp_path):
  s = ResultStore(tmp_path / "sub" / "results.jsonl")
  assert s.records() == []  # A missing file is an empty store.
  h = config_hash({"a": 1})
  rec = s.append(_cell(), h, {"success": 0.5, "episodes": np.int64(25),
                              "curve": np.array([0.1, 0.2]), "note": "ok", "ok": True},
                 extra={"wall_s": 12.5})
  (got,) = s.records()
  assert got == rec
  assert got["metrics"] == {"success": 0.5, "episodes": 25, "curve": [0.1, 0.2],
                            "note": "ok", "ok": True}
  assert got["config_hash"] == h
  assert got["code_version"] == store_lib.code_version()
  assert got["time"].endswith("+00:00")
  assert got["extra"] == {"wall_s": 12.5}
  assert (tmp_path / "sub" / "results.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize("metrics, err, match", [
    ({}, TypeError, "non-empty dict"),
    ({"success": float("nan")}, ValueError, "non-finite"),
    ({"success": [1.0, float("inf")]}, ValueError, "non-finite"),
    ({"success": {"nested": 1}}, TypeError, "success"),
    ({"success": None}, TypeError, "success"),
    ({"seed": 1.0}, ValueError, "reserved"),
    ({"config_hash": 1.0}, ValueError, "reserved"),
    ({3: 1.0}, TypeError, "names"),
])
def test_append_rejects_bad_metrics(tmp_path, metrics, err, match):
  s = ResultStore(tmp_path / "r.jsonl")
  with pytest.raises(err, match=match):
    s.append(_cell(), "h", metrics)
  assert s.records() == []  # Nothing half-written.


def test_append_nonfinite_opt_in_stored_as_null(tmp_path):
  s = ResultStore(tmp_path / "r.jsonl")
  s.append(_cell(), "h", {"spl": float("nan"), "curve": [1.0, float("-inf")]},
           allow_nonfinite=True)
  (rec,) = s.records()
  assert rec["metrics"] == {"spl": None, "curve": [1.0, None]}
  assert "NaN" not in (tmp_path / "r.jsonl").read_text()  # Strict JSON on disk.


def test_append_rejects_bad_cell_hash_extra(tmp_path):
  s = ResultStore(tmp_path / "r.jsonl")
  with pytest.raises(TypeError, match="Cell"):
    s.append({"benchmark": "x"}, "h", {"m": 1})
  with pytest.raises(TypeError, match="config_hash"):
    s.append(_cell(), "", {"m": 1})
  with pytest.raises(TypeError, match="extra"):
    s.append(_cell(), "h", {"m": 1}, extra={"f": object()})
  with pytest.raises(TypeError, match="extra"):
    s.append(_cell(), "h", {"m": 1}, extra={"f": math.nan})


def _writer(path, worker, n):
  s = ResultStore(path)
  for i in range(n):
    # Big-ish records make interleaving likely if the locking/single-write were broken.
    s.append(_cell(seed=worker * 1000 + i), "h", {"i": i, "pad": "x" * 2000},
             extra={"worker": worker})


def test_concurrent_appends_from_processes(tmp_path):
  path = tmp_path / "r.jsonl"
  n_proc, n = 4, 50
  ctx = multiprocessing.get_context("spawn")  # fork is unsafe once JAX threads exist.
  procs = [ctx.Process(target=_writer, args=(path, w, n)) for w in range(n_proc)]
  for p in procs:
    p.start()
  for p in procs:
    p.join(60)
    assert p.exitcode == 0
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # No truncated-line warnings either.
    records = ResultStore(path).records()
  assert len(records) == n_proc * n
  lines = path.read_bytes().split(b"\n")
  assert lines[-1] == b"" and all(json.loads(l) for l in lines[:-1])
  seeds = sorted(r["cell"]["seed"] for r in records)
  assert seeds == sorted(w * 1000 + i for w in range(n_proc) for i in range(n))
  for w in range(n_proc):  # Each writer's records appear in its own order.
    mine = [r["metrics"]["i"] for r in records if r["extra"]["worker"] == w]
    assert mine == list(range(n))


def _write_two(path):
  s = ResultStore(path)
  s.append(_cell(seed=0), "h", {"m": 0})
  s.append(_cell(seed=1), "h", {"m": 1})


def test_truncated_last_line_skipped_with_warning(tmp_path):
  path = tmp_path / "r.jsonl"
  _write_two(path)
  full = path.read_bytes()
  path.write_bytes(full[:-25])  # A crash mid-write of the second record.
  with pytest.warns(RuntimeWarning, match=r"r\.jsonl:2: skipping a truncated"):
    records = ResultStore(path).records()
  assert [r["cell"]["seed"] for r in records] == [0]


def test_append_after_crash_repairs_tail(tmp_path):
  path = tmp_path / "r.jsonl"
  _write_two(path)
  path.write_bytes(path.read_bytes()[:-25])
  s = ResultStore(path)
  with pytest.warns(RuntimeWarning, match=r"r\.jsonl:2: dropping a truncated"):
    s.append(_cell(seed=2), "h", {"m": 2})
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert [r["cell"]["seed"] for r in s.records()] == [0, 2]


def test_last_record_missing_only_newline_is_kept(tmp_path):
  path = tmp_path / "r.jsonl"
  _write_two(path)
  path.write_bytes(path.read_bytes()[:-1])
  s = ResultStore(path)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert len(s.records()) == 2
    s.append(_cell(seed=2), "h", {"m": 2})
    assert [r["cell"]["seed"] for r in s.records()] == [0, 1, 2]


def test_corrupt_middle_line_raises_naming_file_and_line(tmp_path):
  path = tmp_path / "r.jsonl"
  _write_two(path)
  first, second = path.read_bytes().split(b"\n")[:2]
  path.write_bytes(first + b"\n" + second[:30] + b"\n" + second + b"\n")
  with pytest.raises(ResultStoreError, match=r"r\.jsonl:2: corrupt record"):
    ResultStore(path).records()


@pytest.mark.parametrize("line, match", [
    (b'[1, 2]', "expected a JSON object"),
    (b'{"cell": {}, "metrics": {}}', "lacks keys"),
    (b'{"cell": {"benchmark": "b"}, "config_hash": "h", "metrics": {}}', "bad cell"),
])
def test_malformed_middle_records_raise(tmp_path, line, match):
  path = tmp_path / "r.jsonl"
  _write_two(path)
  path.write_bytes(line + b"\n" + path.read_bytes())
  with pytest.raises(ResultStoreError, match=match):
    ResultStore(path).records()


def test_blank_lines_are_ignored(tmp_path):
  path = tmp_path / "r.jsonl"
  _write_two(path)
  path.write_bytes(b"\n" + path.read_bytes() + b"\n")
  assert len(ResultStore(path).records()) == 2


# --- re-run skip logic -----------------------------------------------------------------------


def test_done_and_pending_skip_completed_cells(tmp_path):
  s = ResultStore(tmp_path / "r.jsonl")
  h, h2 = config_hash({"lr": 1e-3}), config_hash({"lr": 1e-4})
  cells = [_cell(seed=i, corruption=c, severity=sev)
           for i in range(3) for c, sev in (("none", 0), ("speckle", 3))]
  assert s.pending(cells, h) == cells

  evaluated = []
  for cell in s.pending(cells, h)[:4]:  # A run that dies after 4 cells.
    s.append(cell, h, {"success": 1.0})
    evaluated.append(cell)
  assert all(s.done(c, h) for c in evaluated)
  assert not s.done(cells[4], h)
  assert not s.done(cells[0], h2)  # A different config is a different result.

  rerun = s.pending(cells, h)
  assert rerun == cells[4:]
  assert s.pending(cells + cells, h) == cells[4:]  # No duplicates.
  assert s.pending(cells, h2) == cells
  for cell in rerun:
    s.append(cell, h, {"success": 0.0})
  assert s.pending(cells, h) == []
  assert len(s) == len(cells)


# --- rows ------------------------------------------------------------------------------------


def test_to_rows_flat_and_filters(tmp_path):
  s = ResultStore(tmp_path / "r.jsonl")
  for pvr in ("vc1", "r3m"):
    for sev in (1, 3):
      s.append(_cell(pvr=pvr, corruption="blur", severity=sev), "h",
               {"success": sev / 10}, extra={"host": "a"})
  rows = s.to_rows()
  assert len(rows) == 4
  row = rows[0]
  assert row["pvr"] == "vc1" and row["severity"] == 1 and row["success"] == 0.1
  assert row["extra/host"] == "a" and row["config_hash"] == "h"
  assert set(store_lib.CELL_FIELDS) <= set(row)
  assert len(s.to_rows(pvr="r3m")) == 2
  assert len(s.to_rows(pvr="r3m", severity=[3, 5])) == 1
  assert len(s.to_rows(success=lambda v: v > 0.2)) == 2
  assert s.to_rows(no_such_field=1) == []


def test_to_rows_latest_only(tmp_path):
  s = ResultStore(tmp_path / "r.jsonl")
  s.append(_cell(), "h", {"success": 0.1})
  s.append(_cell(), "h", {"success": 0.9})
  s.append(_cell(), "h2", {"success": 0.5})
  assert len(s.to_rows()) == 3
  latest = s.to_rows(latest_only=True)
  assert sorted(r["success"] for r in latest) == [0.5, 0.9]


# --- One file per writer (hosts that must not share a file) -----------------------------------


def test_writers_append_to_their_own_files_and_every_reader_merges_them_in_time_order(tmp_path):
  path = tmp_path / "results.jsonl"
  main, a, b = ResultStore(path), ResultStore(path, writer="host-a"), ResultStore(path, "host-b")
  a.append(_cell(seed=0), "h", {"m": 0})
  main.append(_cell(seed=1), "h", {"m": 1})
  b.append(_cell(seed=2), "h", {"m": 2})
  a.append(_cell(seed=3), "h", {"m": 3})
  assert a.write_path == tmp_path / "results.jsonl.d" / "host-a.jsonl"
  assert [len(f.read_text().splitlines()) for f in main.files()] == [1, 2, 1]
  for reader in (main, a, b):
    assert [r["cell"]["seed"] for r in reader.records()] == [0, 1, 2, 3]
  assert main.pending([_cell(seed=s) for s in range(5)], "h") == [_cell(seed=4)]
  b.append(_cell(seed=0), "h", {"m": 10})   # A re-evaluation elsewhere: the latest wins.
  assert [r["m"] for r in main.to_rows(latest_only=True, seed=0)] == [10]


def test_a_writer_file_caught_mid_append_hides_only_its_partial_line(tmp_path):
  path = tmp_path / "results.jsonl"
  w = ResultStore(path, writer="w1")
  w.append(_cell(seed=0), "h", {"m": 0})
  w.append(_cell(seed=1), "h", {"m": 1})
  w.write_path.write_bytes(w.write_path.read_bytes()[:-25])  # What NFS can show mid-append.
  with pytest.warns(RuntimeWarning, match=r"w1\.jsonl:2: skipping a truncated"):
    assert [r["cell"]["seed"] for r in ResultStore(path).records()] == [0]


def test_append_record_keeps_a_record_as_it_was_and_refuses_a_malformed_one(tmp_path):
  src = ResultStore(tmp_path / "a.jsonl")
  record = src.append(_cell(), "h", {"m": 1.5}, {"note": "x"})
  dst = ResultStore(tmp_path / "b.jsonl")
  dst.append_record(record)
  assert dst.records() == [record]
  with pytest.raises(ResultStoreError, match="append_record.*lacks keys"):
    dst.append_record({"cell": _cell().to_dict(), "config_hash": "h"})


@pytest.mark.parametrize("writer", ["", "a/b", "../x", "host a"])
def test_a_writer_name_that_is_not_a_plain_file_name_is_refused(tmp_path, writer):
  with pytest.raises(ValueError, match="writer"):
    ResultStore(tmp_path / "r.jsonl", writer=writer)
