"""`runner.WriteMetrics`: a run's per-update metrics in TensorBoard at step = update number,
and a killed then resumed run's event files holding every step once, with the values of an
uninterrupted run."""
import numpy as np
import pytest

from vcbench import metrics
from vcbench.algos import bc, runner

pytest.importorskip("tensorboardX")

EPOCHS, CHUNK, EVERY = 10, 2, 4   # checkpoints at 4 and 8 (and at 10, the end)


class Killed(Exception):
  pass


def _trainer():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 5)).astype(np.float32)
  y = np.tanh(x @ rng.normal(size=(5, 2))).astype(np.float32)
  c = bc.default_config()
  c.batch_size, c.epochs, c.hidden = 16, EPOCHS, (8,)
  return bc.make_train(c, x, y)


def _kill_at(update):
  def callback(progress):
    if progress.done == update and progress.trained:
      raise Killed
  return callback


def _run(workdir, logdir, first=(), last=()):
  with metrics.TensorBoardWriter(logdir) as writer:
    return runner.run(_trainer(), workdir, CHUNK, checkpoint_every=EVERY,
                      callbacks=[*first, runner.WriteMetrics(writer), *last])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("full")
  _, curve = _run(None, tmp / "tb")
  return curve, metrics.read_scalars(tmp / "tb")


def test_every_update_is_a_point_with_its_value(uninterrupted):
  curve, scalars = uninterrupted
  assert scalars["train/loss"] == [(i + 1, float(v)) for i, v in enumerate(curve["loss"])]


# Killed after writing updates 5-6 past the checkpoint at 4 (they are trained and written
# again after the resume), or after the checkpoint at 8 but before writing updates 7-8.
@pytest.mark.parametrize("kill_at,before_writing", [(6, False), (8, True)])
def test_a_killed_and_resumed_run_writes_each_step_once(tmp_path, uninterrupted, kill_at,
                                                        before_writing):
  kill = [_kill_at(kill_at)]
  first, last = (kill, ()) if before_writing else ((), kill)
  with pytest.raises(Killed):
    _run(tmp_path, tmp_path / "tb", first, last)
  written = metrics.last_steps(tmp_path / "tb")["train/loss"]
  assert written == (kill_at - CHUNK if before_writing else kill_at)
  _, curve = _run(tmp_path, tmp_path / "tb")
  scalars = metrics.read_scalars(tmp_path / "tb")
  assert len(list((tmp_path / "tb").glob(metrics.EVENTS_GLOB))) == 2
  assert _steps(scalars) == list(range(1, EPOCHS + 1))
  assert scalars == uninterrupted[1]
  np.testing.assert_array_equal(curve["loss"], uninterrupted[0]["loss"])


def _steps(scalars):
  return [s for s, _ in scalars["train/loss"]]


def test_a_finished_run_run_again_writes_nothing_new(tmp_path):
  _run(tmp_path, tmp_path / "tb")
  before = metrics.read_scalars(tmp_path / "tb")
  _run(tmp_path, tmp_path / "tb")
  assert metrics.read_scalars(tmp_path / "tb") == before
  assert len(list((tmp_path / "tb").glob(metrics.EVENTS_GLOB))) == 1
