"""MAE training: the loss falls, a killed run resumes to the same curve, the optimiser is MAE's,
the trained encoder is a zoo ViT, and 4 (forced host) devices train as 1 does."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench import config as config_lib
from vcbench.algos import mae
from vcbench.data import frames
from vcbench.models import convert
from vcbench.models import mae as mae_model
from vcbench.models import zoo
from vcbench.models.vit import ViT

ROOT = pathlib.Path(__file__).resolve().parents[2]


# A one-block ViT keeps compiles short; the zoo's own ViT-Ti is trained by the other tests.
TINY_VIT = ViT(width=32, depth=1, heads=2, patch=8, img_size=32)


def tiny_config(**overrides):
  c = mae.default_config()
  c.encoder, c.img_size = "random_vit_ti", 32
  c.decoder_width, c.decoder_depth, c.decoder_heads = 32, 1, 2
  c.batch_size, c.base_lr, c.warmup_steps, c.total_steps = 8, 2e-2, 2, 20
  c.chunk, c.checkpoint_every, c.log_every = 5, 10, 10
  c.update(overrides)
  return c


def blob_frames(n=24, size=40, seed=0):
  """Smooth coloured blobs: structure a tiny MAE can learn to fill in within a few steps."""
  rng = np.random.default_rng(seed)
  yy, xx = np.mgrid[:size, :size] / size
  out = []
  for _ in range(n):
    cy, cx, r = rng.uniform(0.2, 0.8, 3)
    colour = rng.uniform(0, 255, 3)
    blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (0.05 + 0.1 * r))[..., None]
    out.append((blob * colour + (1 - blob) * 40).astype(np.uint8))
  return np.stack(out)


@pytest.fixture(scope="module")
def ds():
  return frames.dataset([blob_frames()], [1.0], batch_size=8, seed=0)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, ds):
  workdir = tmp_path_factory.mktemp("mae_full")
  return mae.train(tiny_config(), ds, str(workdir), encoder=TINY_VIT, log=lambda s: None)


def test_loss_falls(tmp_path, ds):
  result = mae.train(tiny_config(total_steps=60, warmup_steps=5, checkpoint_every=60), ds,
                     str(tmp_path), encoder=TINY_VIT, log=lambda s: None)
  losses = np.asarray(result.losses)
  assert len(losses) == 60 and np.all(np.isfinite(losses))
  # Measured: 1.06 -> 0.78 (with one visible patch of four there is only so much to infer).
  assert losses[-10:].mean() < 0.85 * losses[:5].mean(), losses


def test_killed_run_resumes_to_the_same_curve(tmp_path, ds, uninterrupted):
  first = mae.train(tiny_config(), ds, str(tmp_path), encoder=TINY_VIT, stop_at=10,
                    log=lambda s: None)
  assert len(first.losses) == 10
  resumed = mae.train(tiny_config(), ds, str(tmp_path), encoder=TINY_VIT, log=lambda s: None)
  assert resumed.losses == uninterrupted.losses   # bit for bit, the whole curve
  for a, b in zip(jax.tree.leaves(resumed.state.params),
                  jax.tree.leaves(uninterrupted.state.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_resume_refuses_another_config(tmp_path, ds, uninterrupted):
  workdir = tmp_path / "copy"
  shutil.copytree(os.path.dirname(uninterrupted.encoder_path), workdir)
  with pytest.raises(ValueError, match=r"another config \(mask_ratio: 0.75 -> 0.5, "
                                       r"total_steps: 20 -> 30\)"):
    mae.train(tiny_config(total_steps=30, mask_ratio=0.5), ds, str(workdir),
              encoder=TINY_VIT, log=lambda s: None)


def test_trained_encoder_loads_into_the_zoo_vit_unchanged(uninterrupted):
  # The exported file is a plain ViT's variables: the loader the zoo uses accepts it as is
  # (the shipped vcbench_vit_ti is loaded through zoo.load in tests/models/test_model_zoo.py).
  images = jnp.asarray(blob_frames(4, 32), jnp.float32) / 255.0
  expected = jax.eval_shape(TINY_VIT.init, jax.random.key(0), images)
  variables = convert.load_variables(uninterrupted.encoder_path, expected)
  trained = uninterrupted.state.params["encoder"]
  for a, b in zip(jax.tree.leaves(variables["params"]), jax.tree.leaves(trained)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  out, _ = TINY_VIT.apply(variables, images)
  # The MAE's own encoder on every patch (keep = all) is that ViT.
  full, _ = TINY_VIT.apply({"params": trained}, images, keep=jnp.tile(jnp.arange(16), (4, 1)))
  np.testing.assert_allclose(out["cls"], full["cls"], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out["tokens"], full["tokens"], rtol=1e-5, atol=1e-6)


def test_position_embedding_stays_sincos_and_decay_spares_biases(uninterrupted):
  params = uninterrupted.state.params
  table = mae_model.sincos_pos_embed(32, (4, 4))
  np.testing.assert_array_equal(np.asarray(params["encoder"]["pos_embed"])[0], table)
  labels = mae.param_labels(params)
  assert labels["encoder"]["pos_embed"] == "frozen"
  assert labels["encoder"]["blocks_0"]["attn"]["qkv"]["bias"] == "no_decay"
  assert labels["encoder"]["norm"]["scale"] == "no_decay"
  assert labels["encoder"]["blocks_0"]["attn"]["qkv"]["kernel"] == "decay"
  assert labels["mask_token"] == "decay"   # 3-D, as timm's rule decays it.


def test_schedule_is_warmup_then_cosine():
  c = tiny_config(warmup_steps=10, total_steps=110, min_lr=1e-5)
  fn, peak = mae.schedule(c), mae.peak_lr(c)
  assert peak == pytest.approx(2e-2 * 8 / 256)
  np.testing.assert_allclose([fn(0), fn(5), fn(10), fn(60), fn(110)],
                             [0, peak / 2, peak, 1e-5 + (peak - 1e-5) / 2, 1e-5], rtol=1e-5)


def test_init_from_the_zoo_keeps_its_weights():
  c = tiny_config(init="zoo", seed=3)
  state = mae.Trainer(c).init(jax.random.key(0))
  ref = zoo.load(c.encoder, img_size=32, seed=3).params["params"]
  for a, b in zip(jax.tree.leaves(state.params["encoder"]), jax.tree.leaves(ref)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_configs_are_refused():
  with pytest.raises(config_lib.ConfigError, match="ViT entries only"):
    mae.build_model(tiny_config(encoder="random_mobilenetv2"))
  with pytest.raises(config_lib.ConfigError, match="init"):
    mae.validate(tiny_config(init="imagenet"))
  with pytest.raises(config_lib.ConfigError, match="multiple of the patch"):
    mae.build_model(tiny_config(img_size=40))


SHARDED = r"""
import sys, json
sys.path.insert(0, sys.argv[1])
import vcbench, jax, numpy as np
from test_mae import tiny_config, blob_frames
from vcbench.algos import mae
from vcbench.data import frames
assert jax.device_count() == int(sys.argv[2]), jax.devices()
from test_mae import TINY_VIT
config = tiny_config(total_steps=6, chunk=3)
ds = frames.dataset([blob_frames()], [1.0], batch_size=8, seed=0)
trainer = mae.make_train(config, ds, encoder=TINY_VIT)
state = trainer.init(jax.random.key(0))
losses = []
for n, (chunk,) in trainer.inputs(0, 6, 3):
  state, m = trainer.train_chunk(state, n, chunk)
  losses += np.asarray(m["loss"]).tolist()
leaf = state.params["encoder"]["blocks_0"]["attn"]["qkv"]["kernel"]
assert leaf.sharding.is_fully_replicated
print(json.dumps({"losses": losses, "kernel": np.asarray(leaf).ravel()[:64].tolist()}))
"""


def _start_sharded(devices: int) -> subprocess.Popen:
  env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
         "JAX_PLATFORMS": "cpu"}
  return subprocess.Popen([sys.executable, "-c", SHARDED, str(ROOT / "tests" / "algos"),
                           str(devices)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  return json.loads(out.strip().splitlines()[-1])


def test_four_devices_train_like_one():
  # Both processes at once: each compiles single-threaded work for much of its life.
  one, four = _start_sharded(1), _start_sharded(4)
  one, four = _result(one), _result(four)
  np.testing.assert_allclose(four["losses"], one["losses"], rtol=1e-5)
  np.testing.assert_allclose(four["kernel"], one["kernel"], rtol=1e-4, atol=1e-6)


def test_tensorboard_holds_the_loss_curve(tmp_path, ds):
  pytest.importorskip("tensorboardX")
  from vcbench import metrics  # pylint: disable=import-outside-toplevel
  result = mae.train(tiny_config(total_steps=10, checkpoint_every=10), ds, str(tmp_path),
                     encoder=TINY_VIT, log=lambda s: None, tensorboard=True)
  scalars = metrics.read_scalars(tmp_path / "tb")
  assert scalars["train/loss"] == [(i + 1, v) for i, v in enumerate(result.losses)]
