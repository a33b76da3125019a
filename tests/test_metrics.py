"""Metric writers: TensorBoard event files read back as written, each (tag, step) once across
writers on one directory (a resumed run), curve.json as the jobs write it, and a no-op writer
that leaves nothing on disk."""
import json

import numpy as np
import pytest

from vcbench import metrics

pytest.importorskip("tensorboardX")


def _steps(scalars, tag):
  return [s for s, _ in scalars[tag]]


def test_scalars_read_back_with_their_steps_and_values(tmp_path):
  loss = np.float32([0.9, 0.7, 0.55, 0.5])
  with metrics.TensorBoardWriter(tmp_path / "tb") as w:
    for step, value in enumerate(loss, start=1):
      w.write_scalars(step, {"train/loss": value, "train/lr": 1e-3 * step})
  got = metrics.read_scalars(tmp_path / "tb")
  assert got["train/loss"] == [(s, float(v)) for s, v in enumerate(loss, start=1)]
  assert _steps(got, "train/lr") == [1, 2, 3, 4]
  np.testing.assert_allclose([v for _, v in got["train/lr"]], [1e-3, 2e-3, 3e-3, 4e-3],
                             rtol=1e-6)


def test_non_finite_scalars_are_skipped(tmp_path):
  with metrics.TensorBoardWriter(tmp_path) as w:
    w.write_scalars(1, {"success": float("nan")})
    w.write_scalars(2, {"success": 0.5})
  assert metrics.read_scalars(tmp_path) == {"success": [(2, 0.5)]}


def test_images_and_histograms_are_written(tmp_path):
  with metrics.TensorBoardWriter(tmp_path) as w:
    w.write_images(3, {"recon": np.zeros((8, 8, 3), np.uint8)})
    w.write_histograms(3, {"weights": np.arange(10.0)})
  events = {(step, tag): value for step, tag, value in metrics.read_events(tmp_path)}
  assert events[(3, "recon")].image.height == 8
  assert events[(3, "weights")].histo.num == 10


def test_a_second_writer_on_the_directory_skips_the_steps_written(tmp_path):
  with metrics.TensorBoardWriter(tmp_path) as w:
    for step in (1, 2, 3):
      w.write_scalars(step, {"a": step, "b": -step})
  with metrics.TensorBoardWriter(tmp_path) as w:   # e.g. the same run, resumed at once
    w.write_scalars(2, {"a": 2})                    # repeated: skipped
    w.write_scalars(3, {"a": 3})
    w.write_scalars(4, {"a": 4, "b": -4})
  assert len(list(tmp_path.glob(metrics.EVENTS_GLOB))) == 2
  got = metrics.read_scalars(tmp_path)
  assert got == {"a": [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)],
                 "b": [(1, -1.0), (2, -2.0), (3, -3.0), (4, -4.0)]}


def test_a_record_cut_short_by_a_kill_ends_the_file(tmp_path):
  with metrics.TensorBoardWriter(tmp_path) as w:
    w.write_scalars(1, {"a": 1.0})
    w.write_scalars(2, {"a": 2.0})
  (path,) = tmp_path.glob(metrics.EVENTS_GLOB)
  path.write_bytes(path.read_bytes()[:-7])
  assert metrics.read_scalars(tmp_path) == {"a": [(1, 1.0)]}
  assert metrics.last_steps(tmp_path) == {"a": 1}


def test_the_no_op_writer_writes_nothing(tmp_path):
  writer = metrics.tensorboard_or_noop(False, tmp_path / "tb")
  with writer:
    writer.write_scalars(1, {"a": 1.0})
    writer.write_images(1, {"i": np.zeros((2, 2, 3), np.uint8)})
    writer.write_histograms(1, {"h": np.ones(3)})
  assert not (tmp_path / "tb").exists() and not list(tmp_path.iterdir())
  assert isinstance(metrics.tensorboard_or_noop(True, tmp_path / "tb"), metrics.TensorBoardWriter)


def test_the_tensorboard_writer_creates_no_file_before_its_first_point(tmp_path):
  metrics.TensorBoardWriter(tmp_path / "tb").close()
  assert not (tmp_path / "tb").exists()


def test_json_curve_is_the_format_of_curve_json(tmp_path):
  curve = {"loss": np.float32([0.5, 0.25, 0.125]), "success": [float("nan"), 1.0, 0.0]}
  with metrics.JsonCurveWriter(tmp_path / "curve.json") as w:
    for i in range(3):
      w.write_scalars(i + 1, {k: v[i] for k, v in curve.items()})
  text = (tmp_path / "curve.json").read_text()
  assert text == metrics.curve_json(curve)
  assert json.loads(text) == {"loss": [0.5, 0.25, 0.125], "success": [None, 1.0, 0.0]}


def test_json_curve_rewrites_a_step_in_place(tmp_path):
  w = metrics.JsonCurveWriter(tmp_path / "curve.json")
  w.write_scalars(2, {"a": 2.0})
  w.write_scalars(2, {"a": 2.0})
  w.write_scalars(1, {"a": 1.0})
  w.close()
  assert json.loads((tmp_path / "curve.json").read_text()) == {"a": [1.0, 2.0]}


def test_multi_writer_writes_to_each(tmp_path):
  with metrics.MultiWriter([metrics.JsonCurveWriter(tmp_path / "curve.json"),
                            metrics.TensorBoardWriter(tmp_path / "tb")]) as w:
    w.write_scalars(1, {"a": 0.5})
  assert json.loads((tmp_path / "curve.json").read_text()) == {"a": [0.5]}
  assert metrics.read_scalars(tmp_path / "tb") == {"a": [(1, 0.5)]}
