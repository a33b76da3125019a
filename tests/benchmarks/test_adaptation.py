"""Adaptation choices of the CortexBench job: validation, the MAE configs they make, and the
MAE adaptation end to end (demo frames -> adapted encoder -> frozen BC -> store column)."""
import glob

import numpy as np
import pytest

import launching
from configs import cortexbench as cortexbench_config
from vcbench import config as config_lib
from vcbench import metrics
from vcbench.benchmarks import adaptation
from vcbench.models import zoo
from vcbench import store as store_lib

def test_state_oracle_is_always_frozen():
  assert adaptation.cell_adaptation("mae", "state_oracle") == "frozen"
  assert adaptation.cell_adaptation("finetune", "random_vit_ti") == "finetune"


def test_mae_adaptations_need_vits():
  c = cortexbench_config.get_config("tiny")
  c.pvrs = ("random_mobilenetv2",)
  c.adaptation = "mae"
  with pytest.raises(config_lib.ConfigError, match="needs a ViT"):
    adaptation.validate(c)
  c.adaptation = "finetune"
  adaptation.validate(c)
  c.adaptation = "lora"
  with pytest.raises(config_lib.ConfigError, match="lora"):
    adaptation.validate(c)


def test_mae_configs_continue_or_start_from_scratch():
  adapt = adaptation.default_config()
  cont = adaptation.mae_config(adapt, "mae", "vc1_vitb", 224, "/ckpt/vc1.pth")
  scratch = adaptation.mae_config(adapt, "mae_scratch", "vc1_vitb", 224, "/ckpt/vc1.pth")
  assert (cont.init, cont.checkpoint) == ("zoo", "/ckpt/vc1.pth")
  assert (scratch.init, scratch.checkpoint) == ("mae", "")
  assert cont.total_steps == scratch.total_steps == adapt.mae_steps
  assert cont.decoder_depth == 8 and cont.decoder_width == 512   # MAE's decoder by default
  with pytest.raises(ValueError, match="not an MAE adaptation"):
    adaptation.mae_config(adapt, "finetune", "vc1_vitb", 224, None)


def test_frozen_runs_keep_their_config_hash():
  from vcbench.jobs import cortexbench  # pylint: disable=import-outside-toplevel
  c = cortexbench_config.get_config("tiny")
  frozen = cortexbench.config_hash(c)
  c.adapt.mae_steps = 7     # Irrelevant to a frozen run.
  assert cortexbench.config_hash(c) == frozen
  c.adaptation = "mae"
  assert cortexbench.config_hash(c) != frozen


def _tiny_job(tmp_path, adaptation, *extra):
  out = launching.main("--config", "configs/cortexbench.py:tiny",
                       f"--config.workdir={tmp_path / 'run'}",
                       "--config.pvrs=('state_oracle', 'random_vit_ti')",
                       f"--config.adaptation={adaptation}", *extra, tmp_path=tmp_path,
                       timeout=1800)
  assert out.returncode == 0, out.stderr[-3000:]
  assert f"| random_vit_ti ({adaptation}) |" in out.stdout and "| state_oracle |" in out.stdout
  rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert sorted((r["pvr"], r["adaptation"]) for r in rows) == [
      ("random_vit_ti", adaptation), ("state_oracle", "frozen")]
  return rows


@pytest.mark.slow  # The tiny CortexBench job with an MAE run inside (~1-3 min).
def test_mae_adaptation_end_to_end(tmp_path):
  _tiny_job(tmp_path, "mae", "--config.adapt.mae_steps=4", "--config.adapt.mae_batch=4",
            "--config.adapt.mae_warmup=1", "--config.adapt.decoder_width=32",
            "--config.adapt.decoder_depth=1", "--config.adapt.decoder_heads=2",
            "--config.tensorboard=True")
  [path] = glob.glob(str(tmp_path / "run" / "data" / "adapted" / "*" / "*" / "encoder.npz"))
  [tb] = glob.glob(str(tmp_path / "run" / "data" / "adapted" / "*" / "*" / "tb"))
  assert [s for s, _ in metrics.read_scalars(tb)["train/loss"]] == [1, 2, 3, 4]
  adapted = zoo.load("random_vit_ti", checkpoint=path, img_size=32).params["params"]
  start = zoo.load("random_vit_ti", img_size=32).params["params"]
  # MAE moved the weights from the zoo's, but kept the (frozen) position embedding.
  np.testing.assert_array_equal(adapted["pos_embed"], start["pos_embed"])
  assert not np.allclose(adapted["blocks_0"]["attn"]["qkv"]["kernel"],
                         start["blocks_0"]["attn"]["qkv"]["kernel"])


@pytest.mark.slow  # The tiny CortexBench job fine-tuning a ViT-Ti in the BC loop (~1-3 min).
def test_finetune_end_to_end(tmp_path):
  rows = _tiny_job(tmp_path, "finetune", "--config.adapt.encoder_lr=1e-4",
                   "--config.tensorboard=True")
  [row] = [r for r in rows if r["pvr"] == "random_vit_ti"]
  [tb] = glob.glob(str(tmp_path / "run" / "tb" / "*" / "random_vit_ti" / "seed0"))
  scalars = metrics.read_scalars(tb)
  assert [s for s, _ in scalars["train/loss"]] == [1, 2, 3, 4]
  assert [s for s, _ in scalars["val/score"]] == [2, 4]
  assert row["extra/embedder"].endswith("/finetuned") and 0 <= row["score"] <= 100
