"""Multi-process training: MAE pre-training as two processes of one CPU device each (gloo
collectives on localhost, `launch.main --coordinator`) gives the losses and parameters of one
process of two devices; each process reads only its rows of a batch; process 0 alone writes."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import launching
from vcbench import distributed
from vcbench.data import frames

pytest.importorskip("metaworld")


def _mae(tmp_path, workdir: str, *flags) -> subprocess.Popen:
  env = {**os.environ, "VCBENCH_NO_PROGRESS": "1", "MUJOCO_GL": "egl",
         "VCBENCH_CACHE": str(tmp_path / "cache")}
  args = ["--config", "configs/mae.py:tiny", f"--config.workdir={tmp_path / workdir}",
          f"--config.data.dir={tmp_path / 'frames'}", *flags]
  return subprocess.Popen([sys.executable, "-m", "launch.main", *args], cwd=launching.ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> str:
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-4000:]
  return out


def _curve(log: str) -> list[float]:
  return [float(x) for x in re.findall(r"mae step \d+/\d+  loss (\S+)", log)]


def test_mae_in_two_processes_matches_one_process_with_the_same_global_batch(tmp_path):
  one = _finish(_mae(tmp_path, "one", "--cpu_devices=2"))   # Also generates the frames.
  coordinator = f"localhost:{launching.free_port()}"
  procs = [_mae(tmp_path, "two", "--cpu_devices=1", f"--coordinator={coordinator}",
                "--num_processes=2", f"--process_id={rank}") for rank in (0, 1)]
  main, other = [_finish(p) for p in procs]
  assert len(_curve(one)) == 4 and _curve(main) == pytest.approx(_curve(one), rel=1e-4)
  assert "mae" not in other      # Process 1 does not log (gloo's C++ may print a line).
  a, b = np.load(tmp_path / "one" / "encoder.npz"), np.load(tmp_path / "two" / "encoder.npz")
  assert sorted(a.files) == sorted(b.files)
  for key in a.files:
    np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-6, err_msg=key)
  # (Collective checkpoints restored by a re-run: tests/test_parallel.py, through PPO.)


def test_the_shards_of_a_batch_are_the_batch_and_read_only_their_rows():
  rng = np.random.default_rng(0)
  a = rng.integers(0, 255, (50, 4, 4, 3), np.uint8)
  b = rng.integers(0, 255, (30, 4, 4, 3), np.uint8)
  read = []

  class Logged:
    def __init__(self, x):
      self.x = x

    def __len__(self):
      return len(self.x)

    def __getitem__(self, i):
      read.append(i)
      return self.x[i]
  whole = frames.dataset([a, b], [3, 1], 8, seed=1)
  shards = [frames.dataset([Logged(a), b], [3, 1], 8, seed=1, shard=(i, 4)) for i in range(4)]
  for step in (0, 1, 7):
    np.testing.assert_array_equal(np.concatenate([s[step] for s in shards]), whole[step])
  read.clear()
  _ = shards[1][0]
  assert len(read) <= 2   # Its 2 rows (of which 3/4 come from `a`), not the batch's 8.
  with pytest.raises(ValueError, match="shard"):
    frames.dataset([a], [1], 6, seed=0, shard=(0, 4))


def test_initialize_refuses_half_a_multi_process_spec():
  with pytest.raises(ValueError, match="without a coordinator"):
    distributed.initialize("", num_processes=2, process_id=0)
  with pytest.raises(ValueError, match="needs --num_processes"):
    distributed.initialize("localhost:1", num_processes=2)
  with pytest.raises(ValueError, match=r"not in \[0, 2\)"):
    distributed.initialize("localhost:1", num_processes=2, process_id=2)
  assert distributed.is_main() and distributed.process_share(8, "x") == (0, 1)
