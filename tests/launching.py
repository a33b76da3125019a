"""Runs vcbench's command lines as a user does: `python -m <module> ...` in a subprocess from
the repository root, with the progress bars off and the converted-weights cache in tmp_path."""
import os
import pathlib
import socket
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(module: str, *args, tmp_path, timeout: int = 900, **env) -> subprocess.CompletedProcess:
  """`python -m module *args`; extra keyword arguments are environment variables."""
  env = {**os.environ, "VCBENCH_NO_PROGRESS": "1", "VCBENCH_CACHE": str(tmp_path / "cache"),
         "MUJOCO_GL": "egl", **env}
  return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=timeout)


def main(*args, tmp_path, timeout: int = 900, **env) -> subprocess.CompletedProcess:
  """`python -m launch.main *args`: a job."""
  return run("launch.main", *args, tmp_path=tmp_path, timeout=timeout, **env)


def free_port() -> int:
  """A TCP port free now on localhost (a multi-process run's coordinator)."""
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]
