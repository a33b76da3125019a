"""Checksummed, atomically written array files: nothing half-written or corrupt is ever used.

An entry is `<dir>/<name>.npz` plus `<dir>/<name>.json`; the JSON holds the caller's metadata,
the config it was made under (`key`) and the npz's sha256. Both are written to temporary
files and renamed, the npz first, so a crash leaves either the old entry or none (a JSON
whose checksum does not match is treated as corrupt).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Mapping

import numpy as np

from vcbench.errors import UserError

FORMAT = "vcbench-arrays/1"


class CorruptFileError(UserError, ValueError):
  """An entry exists but is truncated, corrupt, or was made under another config."""


def sha256_file(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def atomic_write(path: str | os.PathLike[str], write) -> None:
  """Calls `write(f)` on a binary temporary file next to `path` (`os.replace` is atomic only
  within one file system), fsyncs it and renames it into place: readers see the old file or
  the whole new one, never a partial one, and a failed write leaves no temporary file."""
  path = os.fspath(path)
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-")
  try:
    with os.fdopen(fd, "wb") as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would make results private to this user.
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def save(base: str, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], key: str,
         compress: bool = True) -> dict:
  """Writes `base`.npz and `base`.json; returns the JSON record."""
  savez = np.savez_compressed if compress else np.savez
  atomic_write(base + ".npz", lambda f: savez(f, **arrays))
  record = {"format": FORMAT, "key": key, "sha256": sha256_file(base + ".npz"),
            "arrays": {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()},
            "meta": dict(meta)}
  atomic_write(base + ".json", lambda f: f.write(json.dumps(record, indent=1).encode()))
  return record


def exists(base: str) -> bool:
  return os.path.exists(base + ".json") or os.path.exists(base + ".npz")


def load(base: str, key: str) -> tuple[dict[str, np.ndarray], dict]:
  """Reads an entry, checking its checksum, key and array shapes; raises CorruptFileError
  naming the file and what is wrong."""
  try:
    with open(base + ".json") as f:
      record = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise CorruptFileError(f"{base}.json: unreadable metadata ({e}).") from e
  if record.get("format") != FORMAT:
    raise CorruptFileError(f"{base}.json: format {record.get('format')!r}, expected {FORMAT!r}.")
  if record.get("key") != key:
    raise CorruptFileError(f"{base}.json: made under config {record.get('key')!r}, expected "
                           f"{key!r}; refusing to reuse it.")
  if not os.path.exists(base + ".npz"):
    raise CorruptFileError(f"{base}.npz: missing (its metadata exists).")
  digest = sha256_file(base + ".npz")
  if digest != record.get("sha256"):
    raise CorruptFileError(f"{base}.npz: checksum {digest[:12]}... does not match the recorded "
                           f"{str(record.get('sha256'))[:12]}... (truncated or modified).")
  with np.load(base + ".npz") as z:
    arrays = {k: z[k] for k in z.files}
  want = record.get("arrays", {})
  got = {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()}
  if got != want:
    raise CorruptFileError(f"{base}.npz: arrays {got} differ from the recorded {want}.")
  return arrays, record


def remove(base: str) -> None:
  for ext in (".json", ".npz"):
    if os.path.exists(base + ext):
      os.unlink(base + ext)
