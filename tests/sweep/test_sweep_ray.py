"""The Ray backend on a local cluster: a worker killed mid-cell is retried, and the store ends
with every cell exactly once, with the numbers one process gets."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import launching
from sweep_grid import pointmass_args, pointmass_config
from vcbench import jobs
from vcbench import store as store_lib

pytest.importorskip("ray")

PIECE = "pointmass.reach.random_vit_ti"


def _cells(workdir) -> list[tuple]:
  records = store_lib.ResultStore(pathlib.Path(workdir) / "results.jsonl").records()
  return sorted((r["cell"]["pvr"], r["cell"]["seed"], r["metrics"]["score"]) for r in records)


def _wait_for(predicate, proc, timeout: float, what: str):
  t0 = time.time()
  while not predicate():
    if proc.poll() is not None:
      raise AssertionError(f"the sweep ended (status {proc.returncode}) before {what}:\n"
                           f"{proc.stdout.read()[-3000:]}")
    if time.time() - t0 > timeout:
      raise AssertionError(f"timed out waiting for {what}")
    time.sleep(0.2)


def test_a_worker_killed_mid_cell_is_retried_and_no_cell_is_lost_or_duplicated(tmp_path):
  scratch = tmp_path / "ray" / "sweep" / PIECE
  env = {**os.environ, "VCBENCH_NO_PROGRESS": "1", "MUJOCO_GL": "egl",
         "VCBENCH_CACHE": str(tmp_path / "cache")}
  proc = subprocess.Popen(
      [sys.executable, "-m", "launch.sweep", *pointmass_args(tmp_path / "ray", seeds=(0, 1, 2)),
       "--backend=ray",
       "--ray_local_cpus=2"], cwd=launching.ROOT, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True)
  try:
    # The piece has three seeds: once the first is in its store, the worker is in the second.
    _wait_for(lambda: len(store_lib.ResultStore(scratch / "results.jsonl").records()) >= 1,
              proc, 600, "the first cell of the piece")
    first = json.loads((scratch / "worker.json").read_text())
    os.kill(first["pid"], signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 0, out[-3000:]
  retried = json.loads((scratch / "worker.json").read_text())
  assert retried["pid"] != first["pid"]            # The piece ran again, in another process.
  assert "all 6 cells stored" in out
  ray_cells = _cells(tmp_path / "ray")
  assert [c[:2] for c in ray_cells] == sorted(
      (pvr, seed) for pvr in ("random_vit_ti", "state_oracle") for seed in (0, 1, 2))
  # The same numbers as one process running the job.
  one = pointmass_config(tmp_path / "one", seeds=(0, 1, 2))
  jobs.resolve(one).run(one)
  assert ray_cells == _cells(tmp_path / "one")
