"""The RobustNav job end to end on the tiny variant: a clean agent is trained, evaluated under
corruptions, adapted (PAD, fine-tune, augmentation) -> result store -> the report reads it; a
re-run redoes nothing; config refusals."""
import os
import subprocess
import sys

import pytest

from configs import robustnav as rn_config
from launch import jobs
from vcbench import config as config_lib
from vcbench.reports import store as store_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(module, *args, timeout=1500):
  return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                        text=True, timeout=timeout)


def test_tiny_protocol_writes_records_the_report_reads(tmp_path):
  args = ["--config", "configs/robustnav.py:tiny", f"--config.workdir={tmp_path}",
          f"--config.nav_workdir={tmp_path / 'nav'}"]
  first = _run("launch.main", *args)
  assert first.returncode == 0, first.stderr[-3000:]
  rows = store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()
  cells = {(r["adaptation"], r["corruption"], r["severity"]) for r in rows}
  config = rn_config.get_config("tiny")
  clean = {("none", name, 0 if name == "none" else 5) for name in config.only}
  adapted = {(m, "defocus_blur", 5) for m in config.adapt.methods} | {("augment", "none", 0)}
  assert cells == clean | adapted
  assert all(r["task"] == "tiny_rgbd" and r["episodes"] == 6 for r in rows)
  assert all(k in rows[0] for k in ("stop_failure_pos", "stop_failure_neg", "min_distance"))
  for method in ("pad_rp", "finetune", "augment"):
    assert len(list((tmp_path / "adapt" / "tiny_rgbd").glob(f"*/{method}"))) == 1
  again = _run("launch.main", *args)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "robustnav tiny_rgbd [" not in again.stdout           # every cell was stored
  assert len(store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()) == len(rows)
  report = _run("launch.robustnav_report", f"--store={tmp_path / 'results.jsonl'}",
                f"--out={tmp_path / 'report'}", timeout=300)
  assert report.returncode == 0, report.stderr[-3000:]
  assert "| 8 | spatter |" in report.stdout and "+ PAD rotation prediction" in report.stdout
  for name in ("table2.md", "table3.md", "severity.png", "behaviour.png"):
    assert (tmp_path / "report" / name).stat().st_size > 0


@pytest.mark.parametrize("key, value, message", [
    ("agents", ("pointnav_lidar",), "not a configs/nav.py variant"),
    ("only", ("fog",), "unknown RobustNav condition"),
    ("adapt.methods", ("tent",), "unknown 'tent'"),
])
def test_bad_configs_are_refused_before_work(key, value, message):
  config = rn_config.get_config("tiny")
  if "." in key:
    config.adapt[key.split(".")[1]] = value
  else:
    config[key] = value
  with pytest.raises((config_lib.ConfigError, ValueError), match=message):
    jobs.resolve(config)


def test_report_cli_names_a_missing_store(tmp_path):
  out = _run("launch.robustnav_report", f"--store={tmp_path / 'nope.jsonl'}",
             f"--out={tmp_path}", timeout=300)
  assert out.returncode != 0 and "does not exist" in out.stderr
