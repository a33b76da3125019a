"""Data parallelism: PPO sharded over 4 (forced host) devices, in one process or in two
processes of 2 devices each (`vcbench.distributed`, gloo collectives on localhost), trains
exactly like 1 device.

The device count is fixed when JAX starts, so each run is its own process, its device count
set before jax is initialised.
"""
import os
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

import launching

TESTS = pathlib.Path(__file__).resolve().parent

# Runs a short PPO training on the toy nav env and saves its params and metrics; the runs of
# several processes share the checkpoint directory.
SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import jax
import numpy as np
from vcbench import distributed, parallel

out, devices, coordinator, processes, rank = sys.argv[2], int(sys.argv[3]), *sys.argv[4:7]
processes, rank = int(processes), int(rank)
distributed.initialize(coordinator, processes if coordinator else None,
                       rank if coordinator else None, cpu_devices=devices // processes)

from toy_nav_env import make_env  # Builds arrays: after the devices are set.
from vcbench.algos import ppo, runner
assert jax.device_count() == devices and jax.process_count() == processes, jax.devices()
config = ppo.default_config()
config.num_envs, config.rollout_len, config.num_updates = 8, 8, 3
config.num_minibatches, config.update_epochs, config.log_every = 2, 2, 0
config.lr = 3e-3
config.policy.hidden, config.policy.rnn_layers = 16, 1
trainer = ppo.make_train(config, make_env())
state = trainer.init(jax.random.key(0))

# The env batch (and recurrent state) is split over all devices; params are replicated.
for leaf in jax.tree.leaves((state.env_state, state.carry, state.start)):
  assert len(leaf.sharding.device_set) == devices, leaf.sharding
  assert leaf.addressable_shards[0].data.shape[0] == 8 // devices, leaf.sharding
for leaf in jax.tree.leaves(state.params):
  assert leaf.sharding.is_fully_replicated, leaf.sharding
# Through the runner: chunks of 2 and 1 updates, orbax checkpoints of the sharded state
# (written collectively by every process), then a resume that restores the last one.
workdir = out[:-len(".npz")]
state, metrics = runner.run(trainer, workdir, 2)
resumed, again = runner.run(trainer, workdir, 2)
assert runner.updates_done(workdir) == 3 and len(metrics["policy_loss"]) == 3
for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(resumed.params)):
  assert np.array_equal(np.asarray(a), np.asarray(b))
assert state.env_state.obs["rgb"].sharding.spec == parallel.batch_sharding(
    parallel.data_mesh()).spec
assert len(state.env_state.obs["rgb"].sharding.device_set) == devices

flat = {jax.tree_util.keystr(path): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(state.params)[0]}
if distributed.is_main():
  np.savez(out, **flat, **{"metric/" + k: np.asarray(v) for k, v in metrics.items()})
print("ok", devices)
"""


def _start(tmp_path, devices: int, processes: int = 1, rank: int = 0,
           coordinator: str = "") -> tuple[subprocess.Popen, pathlib.Path]:
  script = tmp_path / "run_ppo.py"
  script.write_text(SCRIPT)
  out = tmp_path / f"devices{devices}-processes{processes}.npz"
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  proc = subprocess.Popen([sys.executable, str(script), str(TESTS / "algos"), str(out),
                           str(devices), coordinator, str(processes), str(rank)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  return proc, out


def test_ppo_on_4_devices_in_one_or_two_processes_matches_1_device(tmp_path):
  coordinator = f"localhost:{launching.free_port()}"
  runs = [_start(tmp_path, 1), _start(tmp_path, 4)] + [
      _start(tmp_path, 4, 2, rank, coordinator) for rank in (0, 1)]
  results = {}
  for proc, out in runs:
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-4000:]
    assert stdout.strip().endswith("ok " + out.stem.split("-")[0][len("devices"):])
    results[out.stem] = np.load(out)
  one = results["devices1-processes1"]
  assert any(k.startswith("metric/") for k in one.files)
  for name in ("devices4-processes1", "devices4-processes2"):
    assert sorted(results[name].files) == sorted(one.files)
    for key in one.files:
      np.testing.assert_allclose(results[name][key], one[key], rtol=1e-4, atol=1e-5,
                                 err_msg=f"{name}: {key}")


def test_parallel_helpers_place_and_check():
  import jax  # pylint: disable=g-import-not-at-top
  from vcbench import parallel  # pylint: disable=g-import-not-at-top
  mesh = parallel.data_mesh()
  assert mesh.axis_names == (parallel.DATA,) and mesh.size == jax.device_count()
  tree = {"x": np.arange(6.0).reshape(2, 3), "y": np.ones((2,), np.int32)}
  placed = parallel.shard_batch(tree, mesh)
  assert placed["x"].sharding.spec == parallel.batch_sharding(mesh).spec
  on_axis1 = parallel.shard_batch(tree["x"], mesh, axis=1)
  assert on_axis1.sharding.spec == parallel.batch_sharding(mesh, axis=1).spec
  assert parallel.replicate(tree, mesh)["x"].sharding.is_fully_replicated
  with pytest.raises(ValueError, match="cannot shard axis 1 of an array of shape"):
    parallel.shard_batch(np.ones((2,)), mesh, axis=1)
  with pytest.raises(ValueError, match="= 6 is not divisible by the device count 4"):
    parallel.check_divisible(6, types.SimpleNamespace(shape={parallel.DATA: 4}), "num_envs")
