"""The vcbench-nav job end to end on the tiny variant: train -> checkpoint -> evaluate on val
-> result store; a re-run resumes (no retraining, no re-evaluation); config refusals."""
import json

import pytest

import launching
from configs import nav as nav_config
from vcbench import config as config_lib
from vcbench import jobs
from vcbench import metrics
from vcbench import store as store_lib


@pytest.mark.parametrize("algo", ["ppo", "bc"])
def test_tiny_job_trains_evaluates_stores_and_resumes(tmp_path, algo):
  tensorboard = algo == "ppo"   # on for one learner, off (the default) for the other
  args = ["--config", "configs/nav.py:tiny", f"--config.workdir={tmp_path}",
          f"--config.algo={algo}", f"--config.tensorboard={tensorboard}"]
  first = launching.main(*args, tmp_path=tmp_path)
  assert first.returncode == 0, first.stderr[-3000:]
  assert "| SR | SPL | SR easy | SR medium | SR hard |" in first.stdout
  rows = store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()
  assert len(rows) == 1
  row = rows[0]
  assert (row["benchmark"], row["task"], row["pvr"], row["adaptation"]) == (
      "vcbench-nav", "pointnav", "scratch_cnn", "scratch")
  assert row["episodes"] == 6 and 0 <= row["success"] <= 100 and 0 <= row["spl"] <= 100
  curve = json.loads((tmp_path / "tiny" / "curve.json").read_text())
  assert len(curve["success"]) == 4
  again = launching.main(*args, tmp_path=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "update 1 " not in again.stdout                     # resumed: nothing retrained
  assert len(store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()) == 1
  assert json.loads((tmp_path / "tiny" / "curve.json").read_text()) == curve
  tb = tmp_path / "tiny" / "tb"
  assert tb.exists() == tensorboard
  if tensorboard:   # every update once, after the re-run too; curve.json's values
    scalars = metrics.read_scalars(tb)
    assert [s for s, _ in scalars["train/policy_loss"]] == [1, 2, 3, 4]
    assert [v for _, v in scalars["train/policy_loss"]] == pytest.approx(
        curve["policy_loss"], rel=1e-6)
    assert [s for s, _ in scalars["val/success"]] == [2, 4]


@pytest.mark.parametrize("override, message", [
    ({"task": "pointgoal"}, "task"),
    ({"algo": "dagger"}, "dagger.*bc, ppo|ppo, bc"),
    ({"sensors": ("lidar",)}, "sensors"),
    ({"hfov": 200.0}, "hfov"),
])
def test_bad_configs_are_refused_before_work(override, message):
  config = nav_config.get_config("tiny")
  for k, v in override.items():
    config[k] = v
  with pytest.raises((config_lib.ConfigError, ValueError), match=message):
    jobs.resolve(config)


def test_unknown_variant_is_named():
  with pytest.raises(ValueError, match="configs/nav.py: unknown variant 'pointnav_lidar'"):
    nav_config.get_config("pointnav_lidar")
