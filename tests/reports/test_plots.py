"""Report figures: PNGs are written whole (atomically) at a sensible size."""
import os
import struct

import pytest

from vcbench.benchmarks import cortexbench_scores
from vcbench import files
from vcbench.reports import plots


def _png_size(path):
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", data[16:24])  # IHDR width, height.


def test_rank_distribution_png(tmp_path):
  ranks = {"mvp": [1, 1, 1, 2, 3, 3, 4], "r3m": [2, 2.5, 1], "clip": [3, 4, 4], "none": []}
  path = plots.rank_distribution(ranks, tmp_path / "out" / "ranks.png", title="Figure 5")
  assert path == tmp_path / "out" / "ranks.png"
  width, height = _png_size(path)
  assert 300 < width < 2000 and 150 < height < 1000
  assert os.stat(path).st_size > 2000
  assert os.listdir(tmp_path / "out") == ["ranks.png"]  # No temporary file left behind.
  assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)


def test_task_bars_png(tmp_path):
  S = cortexbench_scores.SuiteScore
  scores = {"a": {"mw/x": S(50.0, 2.0, 2, 1, 1, True), "mw/y": S(60.0, float("nan"), 1, 1, 1,
                                                                  True)},
            "b": {"mw/x": S(70.0, 1.0, 2, 1, 1, True)}}
  path = plots.task_bars(scores, tmp_path / "bars.png")
  width, height = _png_size(path)
  assert width > 300 and height > 200


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path):
  target = tmp_path / "ranks.png"
  target.write_bytes(b"old")

  def crash(f):
    f.write(b"half")
    raise RuntimeError("crash mid-write")

  with pytest.raises(RuntimeError):
    files.atomic_write(target, crash)
  assert target.read_bytes() == b"old"
  assert os.listdir(tmp_path) == ["ranks.png"]


def test_write_text_replaces(tmp_path):
  plots.write_text(tmp_path / "a.md", "one")
  plots.write_text(tmp_path / "a.md", "two ±")
  assert (tmp_path / "a.md").read_text(encoding="utf-8") == "two ±"
  assert os.listdir(tmp_path) == ["a.md"]
