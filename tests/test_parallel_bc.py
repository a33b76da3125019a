"""BC on frozen features and end-to-end fine-tuning with the minibatch split over 2 devices, in
one process or in two processes of one device each (`vcbench.distributed`, gloo on localhost),
train like one device: the same losses and parameters, checkpoints written by all processes."""
import os
import pathlib
import subprocess
import sys

import numpy as np

import launching

SCRIPT = r"""
import sys
import jax
import numpy as np
from vcbench import distributed

out, devices, coordinator, processes, rank = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
processes, rank = int(processes), int(rank)
distributed.initialize(coordinator, processes if coordinator else None,
                       rank if coordinator else None, cpu_devices=devices // processes)
import jax.numpy as jnp
from vcbench.algos import bc, finetune, runner
from vcbench.models import zoo
from vcbench.models.preprocess import Preprocess
from vcbench.models.vit import ViT
assert jax.device_count() == devices and jax.process_count() == processes

rng = np.random.default_rng(0)   # The same data in every process.
n, size = 48, 32
frames = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
episode = np.repeat(np.arange(3), 16)
proprio = rng.normal(size=(n, 2)).astype(np.float32)
actions = np.tanh(rng.normal(size=(n, 2))).astype(np.float32)
x = rng.normal(size=(n, 12)).astype(np.float32)

c = bc.default_config()
c.hidden, c.batch_size, c.epochs = (32, 32), 16, 4
trainer = bc.make_train(c, x, actions)
state, metrics = runner.run(trainer, out + "-bc", 2)
flat = {"bc/" + jax.tree_util.keystr(p): np.asarray(v)
        for p, v in jax.tree_util.tree_flatten_with_path(state.params)[0]}
flat["bc/loss"] = metrics["loss"]

module = ViT(width=32, depth=1, heads=2, patch=16, img_size=size)
variables = jax.jit(module.init)(jax.random.key(7), jnp.zeros((1, size, size, 3)))
encoder = zoo.Encoder(module, variables, Preprocess(size, size, "bilinear"))
f = finetune.default_config()
f.history, f.hidden, f.batch_size, f.epochs, f.encoder_lr = 3, (32, 32), 16, 2, 1e-3
ft = finetune.make_train(f, encoder, frames, episode, proprio, actions)
state, metrics = runner.run(ft, out + "-ft", 1)
flat.update({"ft/" + jax.tree_util.keystr(p): np.asarray(v)
             for p, v in jax.tree_util.tree_flatten_with_path(state.encoder)[0]})
flat["ft/loss"] = metrics["loss"]
if distributed.is_main():
  np.savez(out, **flat)
print("ok")
"""


def _start(tmp_path: pathlib.Path, devices: int, processes: int = 1, rank: int = 0,
           coordinator: str = ""):
  script = tmp_path / "run_bc.py"
  script.write_text(SCRIPT)
  out = tmp_path / f"d{devices}p{processes}.npz"
  proc = subprocess.Popen([sys.executable, str(script), str(out), str(devices), coordinator,
                           str(processes), str(rank)], env={**os.environ, "JAX_PLATFORMS": "cpu"},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  return proc, out


def test_bc_and_fine_tuning_on_2_devices_in_one_or_two_processes_match_1_device(tmp_path):
  coordinator = f"localhost:{launching.free_port()}"
  runs = [_start(tmp_path, 1), _start(tmp_path, 2)] + [
      _start(tmp_path, 2, 2, rank, coordinator) for rank in (0, 1)]
  for proc, _ in runs:
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
  one = np.load(tmp_path / "d1p1.npz")
  assert len(one["bc/loss"]) == 4 and len(one["ft/loss"]) == 2
  for name in ("d2p1", "d2p2"):
    other = np.load(tmp_path / f"{name}.npz")
    assert sorted(other.files) == sorted(one.files)
    for key in one.files:
      a, b = other[key], one[key]
      # Two encoder parameters have an exactly-zero gradient, so Adam's steps on them follow
      # the sign of float noise and are not compared: the attention's key bias (softmax ignores
      # a shift common to every key) and the final LayerNorm's bias (a shift of every
      # embedding cancels in the flare differences and in the policy's input BatchNorm).
      if key == "ft/['params']['norm']['bias']":
        continue
      if "qkv" in key and "bias" in key:
        width = a.shape[-1] // 3
        a, b = np.delete(a, np.s_[width:2 * width], -1), np.delete(b, np.s_[width:2 * width], -1)
      # Adam's step is lr (1e-3) whatever the gradient's size: on the encoder's parameters
      # with near-zero gradients, reduction-order noise moves a step's sign, so they are
      # compared to half a step; BC's and every loss to float tolerance.
      atol = 5e-4 if key.startswith("ft/[") else 1e-5
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=atol, err_msg=f"{name}: {key}")
