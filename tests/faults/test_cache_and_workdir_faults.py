"""Frame shards carry checksums; one writer per workdir (a live holder refuses a second job, a
dead one never blocks); the grid re-checks the store before each unit; Ctrl-C and SIGTERM exit
with 130 and a re-run resumes."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import launching
from vcbench import files
from vcbench import jobs
from vcbench.data import frames
from vcbench.jobs import grid as grid_lib
from vcbench.store import Cell


def _shard(tmp_path):
  path = str(tmp_path / "s.npy")
  rng = np.random.default_rng(0)
  frames.write_shard(path, rng.integers(0, 255, (6, 8, 8, 3), np.uint8), {"source": "test"})
  return path


def test_frame_shard_modified_in_place_is_refused_and_rebuilt(tmp_path, monkeypatch):
  path = _shard(tmp_path)
  assert len(frames.ShardSource([path])) == 6
  data = bytearray(open(path, "rb").read())
  data[-5] ^= 0xFF                                    # Same size, one pixel changed.
  with open(path, "wb") as f:
    f.write(bytes(data))
  with pytest.raises(files.CorruptFileError, match="checksum .* does not match"):
    frames.ShardSource([path])
  with pytest.warns(UserWarning, match="frame shard .* Rebuilding it"):
    assert not frames.shard_is_current(path, {"source": "test"})
  monkeypatch.setenv(files.STRICT_ENV, "1")          # Strict: refused, not rebuilt.
  with pytest.raises(files.CorruptFileError, match="not rebuilt: VCBENCH_STRICT_CACHES"):
    frames.shard_is_current(path, {"source": "test"})


def test_shard_without_checksum_is_not_trusted(tmp_path):
  path = _shard(tmp_path)
  meta = frames.read_meta(path)
  del meta["sha256"]
  files.atomic_write(frames.meta_path(path), lambda f: f.write(__import__("json").dumps(
      meta).encode()))
  with pytest.raises(files.CorruptFileError, match="no checksum"):
    frames.ShardSource([path])


def test_a_live_lock_refuses_and_a_dead_one_does_not(tmp_path):
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time; from vcbench import files\n"
       f"with files.workdir_lock({str(tmp_path)!r}):\n  print('held', flush=True); "
       "time.sleep(600)"], stdout=subprocess.PIPE, text=True, cwd=launching.ROOT)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(files.WorkdirBusyError, match=f"pid {holder.pid}"):
      with files.workdir_lock(tmp_path):
        pass
  finally:
    holder.kill()                                     # kill -9: no clean-up runs.
    holder.wait()
  with files.workdir_lock(tmp_path):                  # The kernel released the dead holder's.
    with files.workdir_lock(tmp_path):                # A job inside a job nests.
      pass


def test_a_second_job_into_a_held_workdir_is_refused(tmp_path):
  from configs import zoo_demo  # pylint: disable=import-outside-toplevel
  c = zoo_demo.get_config("quick")
  c.workdir = str(tmp_path)
  job = jobs.resolve(c)
  with files.workdir_lock(tmp_path):
    held_here = subprocess.run(
        [sys.executable, "-m", "launch.main", "--config", "configs/zoo_demo.py:quick",
         f"--config.workdir={tmp_path}"], cwd=launching.ROOT, capture_output=True, text=True,
        timeout=300)
  assert held_here.returncode == 2 and "is in use by another run" in held_here.stderr
  assert job.name == "zoo_demo" and not (tmp_path / "results.jsonl").exists()


def test_grid_skips_a_unit_another_writer_finished(tmp_path):
  logs = []
  grid = grid_lib.Grid("g", tmp_path, "0" * 16, log=logs.append)
  cells = [Cell(benchmark="b", task=t, pvr="p", seed=0) for t in "xyz"]
  units = grid.todo([grid_lib.Unit((c.task,), (c,)) for c in cells])
  done = []
  for unit in grid.pending(units):
    if unit.key == ("x",):    # Meanwhile, another writer finishes z.
      grid_lib.Grid("g", tmp_path, "0" * 16).record(cells[2], {"score": 1.0})
    grid.record(unit.cells[0], {"score": 0.0})
    done.append(unit.key)
  assert done == [("x",), ("y",)]
  assert any("('z',) was finished by another run" in line for line in logs)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_exits_130_and_a_rerun_resumes(tmp_path, sig):
  args = ["--config", "configs/cortexbench.py:tiny", "--config.pvrs=('state_oracle',)",
          "--config.tasks=('button-press-topdown', 'drawer-open')",
          f"--config.workdir={tmp_path / 'run'}"]
  # Unbuffered: through a pipe the child's prints would arrive in blocks, at worst only when it
  # exits, and the signal would come too late to interrupt anything.
  env = {**os.environ, "VCBENCH_NO_PROGRESS": "1", "MUJOCO_GL": "egl",
         "VCBENCH_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
  # A shell that starts jobs in the background passes SIGINT on ignored, and Python then
  # installs no KeyboardInterrupt handler: the child gets the default disposition back.
  proc = subprocess.Popen([sys.executable, "-m", "launch.main", *args], cwd=launching.ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  lines = []
  for line in proc.stdout:         # Interrupt once the first cell is in the store.
    lines.append(line)
    if "test success" in line:
      break
  time.sleep(0.5)
  proc.send_signal(sig)
  out, err = proc.communicate(timeout=300)
  assert proc.returncode == 130, err[-2000:]
  assert "re-run the same command to resume" in err and "Traceback" not in err
  again = launching.main(*args, tmp_path=tmp_path, timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert "2 cells (1 already in" in again.stdout or "2 cells (2 already in" in again.stdout
