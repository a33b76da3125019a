"""The Colosseum report: Tables II-V, the expert table and Figures 1/5, from a store only."""
import math
import os
import subprocess
import sys

import pytest

from vcbench.benchmarks import colosseum as cb
from vcbench.reports import colosseum as report
from vcbench import store as store_lib
from vcbench.store import Cell, ResultStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_RO = "the task has no receiver object"
EXCLUDED = object()  # A cell evaluated as excluded: NaN score and the reason.
# pvr -> task -> test set -> the success % of seeds 0 and 1.
SCORES = {
    "mvp": {
        "drawer-open": {cb.NONE: (80, 88), cb.ALL: (40, 44), "MO_Color": (60, 64),
                        "RO_Color": EXCLUDED},
        "hammer": {cb.NONE: (60, 60), cb.ALL: (20, 24), "MO_Color": (56, 60),
                   "RO_Color": (40, 40)},
    },
    "r3m": {
        "drawer-open": {cb.NONE: (20, 20), cb.ALL: (8, 12), "MO_Color": (28, 32),
                        "RO_Color": EXCLUDED},
        "hammer": {cb.NONE: (0, 0), cb.ALL: (0, 0), "MO_Color": (0, 0), "RO_Color": (0, 0)},
    },
}
# task -> test set -> the scripted expert's success rate.
EXPERT = {"drawer-open": {cb.NONE: 1.0, cb.ALL: 0.96, "MO_Color": 1.0},
          "hammer": {cb.NONE: 1.0, cb.ALL: 0.92, "MO_Color": 0.96, "RO_Color": 0.92,
                     "Camera_Pose": 0.72}}


def _store(path, expert=True):
  store = ResultStore(path)
  h = store_lib.config_hash({"benchmark": "colosseum", "protocol": "test"})
  for pvr, per_task in SCORES.items():
    for task, per_set in per_task.items():
      for test_set, scores in per_set.items():
        for seed in (0, 1):
          cell = Cell(benchmark=cb.BENCHMARK, task=task, pvr=pvr, seed=seed, corruption=test_set)
          if scores is EXCLUDED:
            store.append(cell, h, {"score": math.nan, "success_rate": math.nan, "episodes": 0},
                         extra={cb.EXCLUDED: NO_RO}, allow_nonfinite=True)
          else:
            store.append(cell, h, {"score": float(scores[seed]),
                                   "success_rate": scores[seed] / 100, "episodes": 25})
  if expert:
    for task, per_set in EXPERT.items():
      for test_set, rate in per_set.items():
        store.append(Cell(benchmark=cb.EXPERT_BENCHMARK, task=task, pvr="expert", seed=0,
                          corruption=test_set), h, {"success_rate": rate, "episodes": 25})
  store.append(Cell(benchmark="cortexbench", task="metaworld/hammer", pvr="mvp", seed=0), h,
               {"score": 50.0})  # Another benchmark's row: ignored.
  return store


def _row(text, first):
  """The cells of the markdown table row starting with `first`."""
  for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells[0] == first:
      return cells
  raise AssertionError(f"no row {first!r} in\n{text}")


def _section(text, pvr):
  return text.split(f"## {pvr}\n")[1].split("\n## ")[0]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("colosseum")
  rows = _store(tmp / "results.jsonl").to_rows(latest_only=True)
  return rows, report.write_report(rows, tmp / "report")


def test_tables_match_hand_computed_numbers(written):
  _, paths = written
  text = paths["tables"].read_text(encoding="utf-8")
  mvp = _section(text, "mvp")
  header = _row(mvp, "Task")
  assert header[:6] == ["Task", "No perturbation", "All perturbations", "MO_Color", "RO_Color",
                        "MO_Texture"]
  assert header[3:] == list(cb.FACTORS)
  # Tasks in colosseum.TASKS order (drawer-open before hammer); means over seeds; '-' cells.
  assert mvp.index("| drawer-open |") < mvp.index("| hammer |") < mvp.index("| Mean |")
  assert _row(mvp, "drawer-open")[1:6] == ["84.0", "42.0", "62.0", "-", "-"]
  assert _row(mvp, "hammer")[1:5] == ["60.0", "22.0", "58.0", "40.0"]
  assert _row(mvp, "Mean")[1:5] == ["72.0", "32.0", "60.0", "40.0"]
  # All: (32 - 72) / 72; MO_Color: (60 - 72) / 72; RO_Color only over hammer, where both are
  # defined: (40 - 60) / 60, not (40 - 72) / 72.
  assert _row(mvp, "% change")[1:6] == ["", "-55.6%", "-16.7%", "-33.3%", "-"]
  r3m = _section(text, "r3m")
  # drawer-open: 20 -> 10 (All), 30 (MO_Color); hammer scores 0 everywhere.
  assert _row(r3m, "% change")[1:5] == ["", "-50.0%", "+50.0%", "-"]  # RO_Color: baseline 0.
  assert "Cells: success % over 25 episodes per cell, mean over 2 seeds." in mvp
  assert f"- drawer-open × RO_Color: {NO_RO}" in mvp


def test_expert_table_marks_the_cells_the_job_excluded(written):
  """✗ marks where the stored rows say the job excluded the factor because of the expert
  (whatever rule it ran with), not a threshold of the report's own."""
  rows, paths = written
  text = paths["expert"].read_text(encoding="utf-8")
  hammer = _row(text, "hammer")
  assert hammer[1:5] == ["100", "92", "96", "92"]
  camera = 1 + cb.TEST_SETS.index("Camera_Pose")
  assert hammer[camera] == "72"   # Not excluded in these rows.
  assert _row(text, "drawer-open")[4] == "-"  # RO_Color was not checked.
  excluded = {**rows[0], "task": "hammer", "corruption": "Camera_Pose", "score": None,
              f"extra/{cb.EXCLUDED}": "the scripted expert succeeds in 72% of 25 episodes "
                                      "(< 90%: 90% of its 100% without perturbation)"}
  text = report.expert_markdown(list(rows) + [excluded])
  assert _row(text, "hammer")[camera] == "72 ✗"
  assert "✗: below the job's bar" in text


def test_figures_are_written(written):
  _, paths = written
  assert set(paths) == {"tables", "expert", "percent_change", "polar", "comparison",
                        "comparison_plot"}
  for key in ("percent_change", "polar", "comparison_plot"):
    data = paths[key].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, key


def test_helpers():
  assert report.task_order(["zeta", "hammer", "alpha", "assembly"]) == [
      "assembly", "hammer", "alpha", "zeta"]
  per_task = {"a": {cb.NONE: 50.0, "MO_Color": math.nan}, "b": {cb.NONE: 30.0}}
  assert report.task_mean(per_task, cb.NONE) == 40.0
  assert math.isnan(report.task_mean(per_task, "MO_Color"))


def test_no_expert_rows_no_expert_file(tmp_path):
  rows = _store(tmp_path / "results.jsonl", expert=False).to_rows(latest_only=True)
  paths = report.write_report(rows, tmp_path / "report")
  assert "expert" not in paths and not (tmp_path / "report" / "expert.md").exists()


def test_no_colosseum_rows_is_an_error(tmp_path):
  with pytest.raises(ValueError, match="no Colosseum records"):
    report.write_report([], tmp_path)
  expert_only = [r for r in _store(tmp_path / "results.jsonl").to_rows()
                 if r["benchmark"] != cb.BENCHMARK]
  with pytest.raises(ValueError, match="no Colosseum records"):
    report.write_report(expert_only, tmp_path / "report")
  assert not (tmp_path / "report").exists()


def _cli(*args):
  return subprocess.run([sys.executable, "-m", "launch.colosseum_report", *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)


def test_cli(tmp_path):
  _store(tmp_path / "results.jsonl")
  out = _cli(f"--store={tmp_path / 'results.jsonl'}", f"--out={tmp_path / 'report'}")
  assert out.returncode == 0, out.stderr
  assert "| % change |  | -55.6% | -16.7% | -33.3% |" in out.stdout
  assert "| hammer | 100 | 92 | 96 | 92 |" in out.stdout   # The expert table.
  assert "Most robust pixel PVR per test set" in out.stdout
  for name in report.FILES.values():
    assert (tmp_path / "report" / name).stat().st_size > 0
    assert f"wrote {tmp_path / 'report' / name}" in out.stdout


def test_cli_refuses_missing_and_empty_stores(tmp_path):
  missing = tmp_path / "nope.jsonl"
  out = _cli(f"--store={missing}", f"--out={tmp_path / 'report'}")
  assert out.returncode != 0 and str(missing) in out.stderr and "does not exist" in out.stderr
  empty = tmp_path / "empty.jsonl"
  empty.write_text("")
  out = _cli(f"--store={empty}", f"--out={tmp_path / 'report'}")
  assert out.returncode != 0 and "no Colosseum records" in out.stderr
  assert not (tmp_path / "report").exists()


def test_cli_reads_a_sweep_split_over_two_stores(tmp_path):
  """The lines of one store split between two files give the same tables as the one store."""
  _store(tmp_path / "all.jsonl")
  lines = (tmp_path / "all.jsonl").read_text().splitlines(keepends=True)
  (tmp_path / "a.jsonl").write_text("".join(lines[::2]))
  (tmp_path / "b.jsonl").write_text("".join(lines[1::2]))
  whole = _cli(f"--store={tmp_path / 'all.jsonl'}", f"--out={tmp_path / 'r1'}")
  split = _cli(f"--store={tmp_path / 'a.jsonl'},{tmp_path / 'b.jsonl'}", f"--out={tmp_path / 'r2'}")
  assert whole.returncode == 0 and split.returncode == 0, split.stderr
  assert (tmp_path / "r1" / "tables.md").read_text() == (tmp_path / "r2" / "tables.md").read_text()
  assert "| % change |  | -55.6% | -16.7% | -33.3% |" in split.stdout
