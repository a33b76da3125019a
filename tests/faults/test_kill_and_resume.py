"""kill -9 at a random point of BC, MAE and PPO training (`killable_training.py`, a checkpoint
after every update, so the kill often lands inside orbax's write): a re-run of the same command
ends with the same state and the same metrics of every update as a run never killed, bit for
bit."""
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import launching

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killable_training.py")
UPDATES = 30


def _command(learner, workdir):
  return [sys.executable, SCRIPT, learner, str(workdir)]


def _env():
  return {**os.environ, "KT_UPDATES": str(UPDATES), "PYTHONPATH": launching.ROOT}


def _run(learner, workdir) -> dict:
  done = subprocess.run(_command(learner, workdir), env=_env(), capture_output=True, text=True,
                        timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  with np.load(workdir / "final.npz") as z:
    return {k: z[k] for k in z.files}


def _latest_step(workdir) -> int:
  try:
    return max((int(p) for p in os.listdir(workdir / "checkpoints") if p.isdigit()), default=0)
  except FileNotFoundError:
    return 0


def _kill_at_random(learner, workdir, rng) -> int:
  """Starts the run, SIGKILLs it a random 0-150 ms after a random checkpoint appears; returns
  that checkpoint's step."""
  after = rng.randrange(2, UPDATES - 8)
  proc = subprocess.Popen(_command(learner, workdir), env=_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 300
  while _latest_step(workdir) < after and proc.poll() is None and time.time() < deadline:
    time.sleep(0.005)
  time.sleep(rng.uniform(0.0, 0.15))
  proc.send_signal(signal.SIGKILL)
  _, err = proc.communicate(timeout=60)
  assert proc.returncode == -signal.SIGKILL, f"the run ended before the kill: {err[-3000:]}"
  assert not (workdir / "final.npz").exists()
  return after


# BC by default (the kill lands in the same runner and orbax writes as for every learner); MAE and
# PPO, 2-3 min each on 2 cores, with -m slow.
@pytest.mark.parametrize("learner", ["bc", pytest.param("mae", marks=pytest.mark.slow),
                                     pytest.param("ppo", marks=pytest.mark.slow)])
def test_kill_9_then_rerun_matches_an_uninterrupted_run(tmp_path, learner):
  seed = f"{learner}-{time.time_ns()}"           # Named in failures, to replay one.
  rng = random.Random(seed)
  killed_after = _kill_at_random(learner, tmp_path / "killed", rng)
  resumed = _run(learner, tmp_path / "killed")
  reference = _run(learner, tmp_path / "reference")
  assert resumed.pop("resumed_from") >= killed_after and reference.pop("resumed_from") == 0
  assert resumed.keys() == reference.keys()
  assert len(reference[next(k for k in reference if k.startswith("metrics/"))]) == UPDATES
  for name, value in reference.items():
    np.testing.assert_array_equal(resumed[name], value, err_msg=f"{name} (killed after "
                                  f"checkpoint {killed_after}, seed {seed!r})")
