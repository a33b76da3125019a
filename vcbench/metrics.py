"""Metric writers: where training curves go (TensorBoard event files, curve.json, nowhere).

    writer = metrics.MultiWriter([metrics.JsonCurveWriter(workdir / "curve.json"),
                                  metrics.TensorBoardWriter(workdir / "tb")])
    writer.write_scalars(step, {"train/loss": 0.3})
    writer.close()

Every writer has `write_scalars(step, {tag: number})`, `write_images(step, {tag: [H, W, C]
uint8})`, `write_histograms(step, {tag: array})`, `flush()` and `close()`. Writers are called
on the host with values already fetched from the device (`algos.runner.WriteMetrics` does so
after each chunk), so nothing runs inside jitted code and a run's numbers do not depend on
whether or where it logs.

Writing is idempotent per (tag, step): `TensorBoardWriter` reads the last step of every tag
already in its directory's event files (a killed run's) and skips a point at or before it (a
tag's steps only grow), so a resumed run, which repeats the updates after its last
checkpoint, leaves every step in the event files once. A TensorBoard
directory may be a URL (`gs://...`): paths go through `etils.epath`, never `os.path`.
"""
from __future__ import annotations

import json
import math
import os
import struct
import time
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
from etils import epath

from vcbench import files

EVENTS_GLOB = "events.out.tfevents.*"


class MetricWriter:
  """The interface; every method here accepts and drops its input."""

  def write_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
    del step, scalars

  def write_images(self, step: int, images: Mapping[str, Any]) -> None:
    del step, images

  def write_histograms(self, step: int, values: Mapping[str, Any]) -> None:
    del step, values

  def flush(self) -> None:
    pass

  def close(self) -> None:
    self.flush()

  def __enter__(self) -> "MetricWriter":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


class NoOpWriter(MetricWriter):
  """Writes nothing (a run with its curves switched off)."""


class MultiWriter(MetricWriter):
  """Writes everything to each of `writers`, in order."""

  def __init__(self, writers: Iterable[MetricWriter]):
    self.writers = tuple(writers)

  def write_scalars(self, step, scalars):
    for w in self.writers:
      w.write_scalars(step, scalars)

  def write_images(self, step, images):
    for w in self.writers:
      w.write_images(step, images)

  def write_histograms(self, step, values):
    for w in self.writers:
      w.write_histograms(step, values)

  def flush(self):
    for w in self.writers:
      w.flush()

  def close(self):
    for w in self.writers:
      w.close()


def curve_json(curve: Mapping[str, Iterable[Any]]) -> str:
  """{name: values per update} as curve.json holds it: NaN as null (JSON has no NaN)."""
  return json.dumps({k: [None if v is None or v != v else float(v) for v in vals]
                     for k, vals in curve.items()})


class JsonCurveWriter(MetricWriter):
  """curve.json: {tag: [value of update 1, update 2, ...]} (NaN or a missing step: null),
  rewritten atomically on `flush`. Step s is list index s - 1 (steps count updates done).
  Images and histograms are not kept."""

  def __init__(self, path: str | os.PathLike[str]):
    self.path = path
    self.curve: dict[str, list] = {}
    self._dirty = False

  def write_scalars(self, step, scalars):
    if step < 1:
      raise ValueError(f"JsonCurveWriter: steps count updates from 1, got {step}")
    for tag, value in scalars.items():
      values = self.curve.setdefault(tag, [])
      values.extend([None] * (step - len(values)))
      values[step - 1] = float(value)
    self._dirty = True

  def flush(self):
    if self._dirty:
      text = curve_json(self.curve)
      files.atomic_write(self.path, lambda f: f.write(text.encode()))
      self._dirty = False


class TensorBoardWriter(MetricWriter):
  """TensorBoard event files under `logdir` (tensorboardX, imported on first write, so the
  package is needed only by runs that ask for TensorBoard).

  Steps already in `logdir`'s event files are skipped tag by tag (see the module docstring);
  non-finite scalars (an update where no episode ended) are skipped, as TensorBoard would
  draw them as a break in the line anyway.
  """

  def __init__(self, logdir: str | os.PathLike[str]):
    self.logdir = epath.Path(logdir)
    self._writer = None
    self._written = last_steps(self.logdir)

  def _summary_writer(self):
    if self._writer is None:
      import tensorboardX  # pylint: disable=import-outside-toplevel
      # A suffix unique to this writer: two writers opened within one second (a run resumed
      # at once) would otherwise share a file name and the second would overwrite the first.
      self._writer = tensorboardX.SummaryWriter(
          os.fspath(self.logdir), filename_suffix=f".{os.getpid()}.{time.time_ns()}")
    return self._writer

  def _new(self, tag: str, step: int) -> bool:
    if step <= self._written.get(tag, -1):
      return False
    self._written[tag] = step
    return True

  def write_scalars(self, step, scalars):
    for tag, value in scalars.items():
      value = float(value)
      if math.isfinite(value) and self._new(tag, step):
        self._summary_writer().add_scalar(tag, value, global_step=step)

  def write_images(self, step, images):
    for tag, image in images.items():
      if self._new(tag, step):
        self._summary_writer().add_image(tag, np.asarray(image), global_step=step,
                                         dataformats="HWC")

  def write_histograms(self, step, values):
    for tag, array in values.items():
      if self._new(tag, step):
        self._summary_writer().add_histogram(tag, np.asarray(array), global_step=step)

  def flush(self):
    if self._writer is not None:
      self._writer.flush()

  def close(self):
    if self._writer is not None:
      self._writer.close()
      self._writer = None


def tensorboard_or_noop(enabled: bool, logdir: str | os.PathLike[str]) -> MetricWriter:
  """A `TensorBoardWriter` on `logdir` when `enabled` (a config's `tensorboard`), else a
  writer that writes nothing (and creates no directory)."""
  return TensorBoardWriter(logdir) if enabled else NoOpWriter()


# -- reading event files back --------------------------------------------------------------------

def _records(data: bytes) -> Iterator[bytes]:
  """The payloads of a TFRecord file (length, its CRC, payload, its CRC); a record cut short
  by a killed writer ends the file."""
  pos = 0
  while pos + 12 <= len(data):
    (length,) = struct.unpack("<Q", data[pos:pos + 8])
    start, end = pos + 12, pos + 12 + length
    if end + 4 > len(data):
      return
    yield data[start:end]
    pos = end + 4


def read_events(logdir: str | os.PathLike[str]) -> Iterator[tuple[int, str, Any]]:
  """(step, tag, value) of every summary value in `logdir`'s event files (not recursive),
  file by file in name order; value: the float of a scalar, else the summary value proto."""
  logdir = epath.Path(logdir)
  paths = sorted(logdir.glob(EVENTS_GLOB)) if logdir.is_dir() else []
  if not paths:
    return
  from google.protobuf import message  # pylint: disable=import-outside-toplevel
  from tensorboardX.proto import event_pb2  # pylint: disable=import-outside-toplevel
  for path in paths:
    for record in _records(path.read_bytes()):
      try:
        event = event_pb2.Event.FromString(record)
      except message.DecodeError:   # Garbage where a killed writer's last record was cut.
        break
      for value in event.summary.value:
        kind = value.WhichOneof("value")
        yield event.step, value.tag, value.simple_value if kind == "simple_value" else value


def read_scalars(logdir: str | os.PathLike[str]) -> dict[str, list[tuple[int, float]]]:
  """{tag: [(step, value), ...]} of the scalars in `logdir`'s event files, in written order."""
  out: dict[str, list[tuple[int, float]]] = {}
  for step, tag, value in read_events(logdir):
    if isinstance(value, float):
      out.setdefault(tag, []).append((step, value))
  return out


def last_steps(logdir: str | os.PathLike[str]) -> dict[str, int]:
  """{tag: the last step written} over `logdir`'s event files; {} without any."""
  out: dict[str, int] = {}
  for step, tag, _ in read_events(logdir):
    out[tag] = max(step, out.get(tag, step))
  return out

