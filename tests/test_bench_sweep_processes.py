"""The two scaling benches run end to end on tiny settings (slow: several processes each)."""
import json

import pytest

import launching
from sweep_grid import PLUGIN


@pytest.mark.slow
def test_sweep_bench_times_both_runners_and_checks_their_scores(tmp_path):
  sets = ["--set=suite=pointmass", "--set=tasks=('reach',)", "--set=horizon=12",
          "--set=render_size=16", "--set=img_size=32", "--set=pvrs=('state_oracle',)",
          "--set=seeds=(0,1)"]
  out = launching.run("launch.bench.sweep", "--config", "configs/cortexbench.py:tiny", *sets,
                      f"--plugin={PLUGIN}", f"--root={tmp_path / 'b'}", "--json",
                      tmp_path=tmp_path)
  assert out.returncode == 0, out.stderr[-3000:]
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary["cells"] == 2 and summary["same"] and len(summary["seconds"]) == 2


@pytest.mark.slow
def test_processes_bench_gets_the_same_first_loss_from_one_or_two_processes(tmp_path):
  out = launching.run("launch.bench.processes", "--steps=1", "--repeats=1", "--batch=8",
                      "--size=32", f"--out={tmp_path / 't.md'}", tmp_path=tmp_path)
  assert out.returncode == 0, out.stderr[-3000:]
  rows = [l.split("|") for l in (tmp_path / "t.md").read_text().splitlines()
          if l.startswith("| 1 |") or l.startswith("| 2 |")]
  assert len(rows) == 2 and rows[0][-2] == rows[1][-2]   # The first-step losses.
