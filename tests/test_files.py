"""Checksummed array files: round trip; truncation, bit flips and foreign configs refused."""
import os

import numpy as np
import pytest

from vcbench import files


def _save(tmp_path, key="k1"):
  base = str(tmp_path / "entry")
  arrays = {"a": np.arange(1000, dtype=np.float32).reshape(100, 10),
            "b": np.ones((7,), np.uint8)}
  files.save(base, arrays, {"note": "x"}, key)
  return base, arrays


def test_round_trip(tmp_path):
  base, arrays = _save(tmp_path)
  got, record = files.load(base, "k1")
  for k, v in arrays.items():
    np.testing.assert_array_equal(got[k], v)
  assert record["meta"] == {"note": "x"} and len(record["sha256"]) == 64
  assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_truncated_file_is_refused(tmp_path):
  base, _ = _save(tmp_path)
  data = open(base + ".npz", "rb").read()
  open(base + ".npz", "wb").write(data[: len(data) // 2])
  with pytest.raises(files.CorruptFileError, match="checksum"):
    files.load(base, "k1")


def test_flipped_byte_is_refused(tmp_path):
  base, _ = _save(tmp_path)
  data = bytearray(open(base + ".npz", "rb").read())
  data[len(data) // 2] ^= 0xFF
  open(base + ".npz", "wb").write(bytes(data))
  with pytest.raises(files.CorruptFileError, match="entry.npz: checksum"):
    files.load(base, "k1")


def test_entry_of_another_config_is_not_reused(tmp_path):
  base, _ = _save(tmp_path, key="render-128")
  with pytest.raises(files.CorruptFileError, match="made under config 'render-128'"):
    files.load(base, "render-256")


def test_missing_npz_and_bad_json(tmp_path):
  base, _ = _save(tmp_path)
  (tmp_path / "entry.npz").unlink()
  with pytest.raises(files.CorruptFileError, match="missing"):
    files.load(base, "k1")
  (tmp_path / "entry.json").write_text("{not json")
  with pytest.raises(files.CorruptFileError, match="unreadable"):
    files.load(base, "k1")


def test_atomic_write_to_a_url_goes_through_epath(tmp_path):
  """An object-store URL is written through etils.epath (here with its file system mocked
  onto a local directory), never as a local path named 'gs:'."""
  from etils.epath import testing as epath_testing  # pylint: disable=import-outside-toplevel
  local = lambda p: str(tmp_path / os.fspath(p).replace("gs://", "gs/"))
  with epath_testing.mock_epath(
      open=lambda orig, p, mode: orig(local(p), mode),
      makedirs=lambda orig, p, exist_ok: orig(local(p), exist_ok=exist_ok),
      mkdir=lambda orig, p, exist_ok: orig(local(p), exist_ok=exist_ok),
      exists=lambda orig, p: orig(local(p)),
      isdir=lambda orig, p: orig(local(p))):
    files.atomic_write("gs://bucket/run/validation.json", lambda f: f.write(b"{}"))
  assert (tmp_path / "gs" / "bucket" / "run" / "validation.json").read_bytes() == b"{}"
  assert not os.path.exists("gs:")
