"""launch.report: builds the CortexBench report files from a store, and only from a store."""
import os
import subprocess
import sys

import pytest

from launch import report
from vcbench.store import Cell, ResultStore, config_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = ("assembly", "bin-picking", "button-press-topdown", "drawer-open", "hammer")


def _store(path, pvrs=("in1k_mobilenetv2", "random_vit_s", "state_oracle"), protocol="quick",
           offset=0.0):
  store = ResultStore(path)
  h = config_hash({"protocol": protocol})
  for i, pvr in enumerate(pvrs):
    for j, task in enumerate(TASKS):
      for seed in (0, 1):
        score = offset + 20 * i + 3 * j + seed
        store.append(Cell(benchmark="cortexbench", task=f"metaworld/{task}", pvr=pvr, seed=seed),
                     h, {"score": score, "success_rate": score / 100, "val_score": score,
                         "best_epoch": 1, "episodes": 25, "train_loss": 0.5},
                     extra={"protocol": protocol})
  return store


def _cli(*args):
  return subprocess.run([sys.executable, "-m", "launch.report", *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)


def test_cli_writes_every_file_and_prints_the_table(tmp_path):
  _store(tmp_path / "results.jsonl")
  out = _cli(f"--store={tmp_path / 'results.jsonl'}", f"--out={tmp_path / 'report'}", "--by=task")
  assert out.returncode == 0, out.stderr
  assert "| Model | Meta-World |" in out.stdout
  assert "| state_oracle | 46.5 ± 0.5 | 1/1 | 1.00 | 46.5 |" in out.stdout
  for name in report.FILES.values():
    path = tmp_path / "report" / name
    assert path.is_file() and path.stat().st_size > 0, name
  tasks = (tmp_path / "report" / "cortexbench_tasks.md").read_text(encoding="utf-8")
  assert "metaworld/button-press-topdown" in tasks


def test_cli_missing_store_names_the_path(tmp_path):
  missing = tmp_path / "nope" / "results.jsonl"
  out = _cli(f"--store={missing}", f"--out={tmp_path / 'report'}")
  assert out.returncode != 0
  assert str(missing) in out.stderr and "does not exist" in out.stderr
  assert not (tmp_path / "report").exists()


def test_protocol_filter(tmp_path):
  path = tmp_path / "results.jsonl"
  _store(path, pvrs=("quick_a", "quick_b"), protocol="quick")
  _store(path, pvrs=("full_a",), protocol="full")
  rows = report.load_rows(path, protocol="full")
  assert {r["pvr"] for r in rows} == {"full_a"}
  with pytest.raises(ValueError, match="extra/protocol='tiny'"):
    report.load_rows(path, protocol="tiny")


def test_write_report_returns_paths(tmp_path):
  rows = _store(tmp_path / "results.jsonl").to_rows(latest_only=True)
  paths = report.write_report(rows, tmp_path / "out", by="suite")
  assert set(paths) == {"markdown", "html", "tasks", "plot"}
  assert all(p.is_file() for p in paths.values())
  assert "state_oracle" in paths["html"].read_text(encoding="utf-8")
  with pytest.raises(ValueError, match="by"):
    report.write_report(rows, tmp_path / "out", by="benchmark")
