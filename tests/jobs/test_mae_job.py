"""The MAE job (configs/mae.py) end to end on its tiny variant: frame shards -> grain pipeline ->
MAE -> encoder.npz + summary; a re-run resumes instead of retraining; config refusals."""
import json

import numpy as np
import pytest

pytest.importorskip("metaworld")

from configs import mae as mae_config  # noqa: E402
from vcbench import jobs  # noqa: E402
from vcbench import config as config_lib  # noqa: E402
from vcbench.models import zoo  # noqa: E402


def tiny(tmp_path):
  c = mae_config.get_config("tiny")
  c.workdir = str(tmp_path / "run")
  c.data.dir = str(tmp_path / "frames")
  c.export_to = str(tmp_path / "exported" / "encoder.npz")
  return c


def test_tiny_job_trains_exports_and_resumes(tmp_path):
  config = tiny(tmp_path)
  result = jobs.resolve(config).run(config)
  assert len(result.losses) == config.mae.total_steps
  summary = json.loads((tmp_path / "run" / "summary.json").read_text())
  assert summary["steps"] == config.mae.total_steps and summary["images_per_second"] > 0
  assert (tmp_path / "frames" / "metaworld" / "button-press-topdown.npy").exists()
  assert (tmp_path / "frames" / "nav" / "frames.npy").exists()
  encoder = zoo.load(config.mae.encoder, checkpoint=config.export_to, img_size=32)
  assert encoder(np.zeros((1, 48, 48, 3), np.uint8))["cls"].shape == (1, 192)
  # Everything is on disk: a re-run restores the last checkpoint and trains no step.
  again = jobs.resolve(config).run(config)
  assert again.losses == result.losses


@pytest.mark.parametrize("key, value, match", [
    ("data.metaworld_tasks", "drawer-opn", "unknown MetaWorld task"),
    ("data.metaworld_tasks", "none", "names no task"),
    ("data.weights", (1.0,), "2 non-negative weights"),
    ("mae.encoder", "random_vit_x", "random_vit_x"),
])
def test_bad_values_are_refused(tmp_path, key, value, match):
  config = tiny(tmp_path)
  section, name = key.split(".")
  config[section][name] = value
  with pytest.raises((config_lib.ConfigError, KeyError), match=match):
    jobs.resolve(config)
