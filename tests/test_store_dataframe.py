"""ResultStore.to_dataframe / to_parquet: the rows of `to_rows`, as a DataFrame and a file."""
import json
import math
import os
import subprocess
import sys

import pytest

from vcbench import store as store_lib
from vcbench.store import Cell, ResultStore, config_hash

pd = pytest.importorskip("pandas")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _store(path):
  """Records whose metrics differ between rows: ints, floats, a null, a list, extras."""
  store = ResultStore(path)
  h = config_hash({"protocol": "tiny"})
  for seed in (0, 1):
    store.append(Cell(benchmark="cortexbench", task="metaworld/hammer", pvr="mvp", seed=seed), h,
                 {"score": 40.0 + seed, "episodes": 25, "best_epoch": seed},
                 extra={"protocol": "tiny"})
  store.append(Cell(benchmark="robustnav", task="pointnav_rgb", pvr="rgb", seed=0,
                    corruption="spatter", severity=5), h,
               {"success": 30.0, "spl": math.nan, "curve": [1, 2.5], "stopped": True},
               extra={"kind": "vis", "config": {"lr": 0.1}}, allow_nonfinite=True)
  # A re-evaluation of seed 0: `latest_only` keeps only this one.
  store.append(Cell(benchmark="cortexbench", task="metaworld/hammer", pvr="mvp", seed=0), h,
               {"score": 42.0, "episodes": 25, "best_epoch": 3}, extra={"protocol": "tiny"})
  return store


def _present(row):
  """A row without its missing values: a DataFrame has a column for every row's keys."""
  return {k: v for k, v in row.items() if v is not None}


def _assert_rows_equal(got, want):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert _present(g) == _present(w)
    assert {type(v) for v in _present(g).values()} <= {str, int, float, bool, list, dict}
    for key, value in _present(w).items():  # 25 stays 25, not 25.0.
      assert type(g[key]) is type(value), key


@pytest.mark.parametrize("where", [{}, {"latest_only": True}, {"benchmark": "cortexbench"},
                                   {"latest_only": True, "seed": [0]}])
def test_to_dataframe_holds_the_rows_of_to_rows(tmp_path, where):
  store = _store(tmp_path / "results.jsonl")
  frame = store.to_dataframe(**where)
  rows = store.to_rows(**where)
  assert len(frame) == len(rows)
  assert list(frame.columns[:len(store_lib.CELL_FIELDS)]) == list(store_lib.CELL_FIELDS)
  assert {"config_hash", "code_version", "score", "extra/protocol"} <= set(frame.columns)
  _assert_rows_equal(store_lib.as_rows(frame), rows)


def test_dataframe_columns_are_typed_for_analysis(tmp_path):
  frame = _store(tmp_path / "results.jsonl").to_dataframe()
  assert frame["seed"].dtype == "int64" and frame["score"].dtype == "float64"
  assert str(frame["episodes"].dtype) == "Int64"  # Missing on the robustnav row, still ints.
  assert frame["score"].isna().tolist() == [False, False, True, False]
  assert math.isnan(frame.loc[2, "spl"])  # Stored as null (a NaN metric).
  assert frame.groupby("seed")["score"].mean().to_dict() == {0: 41.0, 1: 41.0}


def test_parquet_round_trip(tmp_path):
  store = _store(tmp_path / "results.jsonl")
  path = store.to_parquet(tmp_path / "out" / "results.parquet", latest_only=True)
  assert path == tmp_path / "out" / "results.parquet"
  assert os.listdir(tmp_path / "out") == ["results.parquet"]  # Written atomically.
  rows = store.to_rows(latest_only=True)
  back = store_lib.as_rows(pd.read_parquet(path))
  # Free-form extras holding dicts are stored as JSON text; everything else as it was.
  assert [json.loads(r["extra/config"]) if r["extra/config"] else None for r in back] == [
      r.get("extra/config") for r in rows]
  _assert_rows_equal([{k: v for k, v in r.items() if k != "extra/config"} for r in back],
                     [{k: v for k, v in r.items() if k != "extra/config"} for r in rows])


def test_empty_store_gives_the_columns_and_no_rows(tmp_path):
  store = ResultStore(tmp_path / "missing.jsonl")
  frame = store.to_dataframe()
  assert len(frame) == 0 and list(frame.columns[:3]) == ["benchmark", "task", "pvr"]
  assert len(pd.read_parquet(store.to_parquet(tmp_path / "empty.parquet"))) == 0


def test_as_rows_converts_a_dataframe_instead_of_iterating_its_columns(tmp_path):
  store = _store(tmp_path / "results.jsonl")
  rows = store.to_rows()
  assert store_lib.as_rows(iter(rows)) == rows
  assert store_lib.as_rows(store.to_dataframe())[0]["pvr"] == "mvp"


def test_missing_pandas_is_a_clear_error(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError.
  with pytest.raises(ImportError, match="pip install pandas"):
    _store(tmp_path / "results.jsonl").to_dataframe()


def test_vcbench_imports_without_pandas():
  code = ("import sys; sys.modules['pandas'] = sys.modules['pyarrow'] = None; "
          "import vcbench.store, vcbench.reports.report, vcbench.reports.colosseum, "
          "vcbench.reports.robustnav")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
  assert out.returncode == 0, out.stderr
