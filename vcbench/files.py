"""Checksummed, atomically written array files: nothing half-written or corrupt is ever used.

An entry is `<dir>/<name>.npz` plus `<dir>/<name>.json`; the JSON holds the caller's metadata,
the config it was made under (`key`) and the npz's sha256. Both are written to temporary
files and renamed, the npz first, so a crash leaves either the old entry or none (a JSON
whose checksum does not match is treated as corrupt).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import socket
import sys
import tempfile
import time
import warnings
from typing import Any, Iterator, Mapping

import numpy as np
from etils import epath

from vcbench.errors import UserError

FORMAT = "vcbench-arrays/1"


class CorruptFileError(UserError, ValueError):
  """An entry exists but is truncated, corrupt, or was made under another config."""


STRICT_ENV = "VCBENCH_STRICT_CACHES"


def rebuild_or_refuse(problem: str, action: str) -> None:
  """A corrupt cache entry is a miss: warns that it will be rebuilt (`action`, e.g.
  "Regenerating."). With $VCBENCH_STRICT_CACHES=1 it is an error instead, for runs that must
  not silently recompute (e.g. to find what corrupts a shared cache)."""
  if os.environ.get(STRICT_ENV, "") not in ("", "0"):
    raise CorruptFileError(f"{problem} (not rebuilt: {STRICT_ENV} is set)")
  warnings.warn(f"{problem} {action}", stacklevel=3)


def sha256_file(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def is_url(path: str | os.PathLike[str]) -> bool:
  """Whether `path` names a remote location (`gs://bucket/run`), not a local file."""
  return "://" in os.fspath(path)


def as_path(path: str | os.PathLike[str]) -> epath.Path:
  """`path` as an `epath.Path`: a URL stays a URL (`gs://...`; `file://` is the local path it
  names), a local path is made absolute so that a later chdir does not move it."""
  text = os.fspath(path)
  if text.startswith("file://"):
    text = text[len("file://"):]
  if is_url(text):
    return epath.Path(text)
  return epath.Path(os.path.abspath(os.path.expanduser(text)))


def atomic_write(path: str | os.PathLike[str], write) -> None:
  """Calls `write(f)` on a binary temporary file next to `path` (`os.replace` is atomic only
  within one file system), fsyncs it and renames it into place: readers see the old file or
  the whole new one, never a partial one, and a failed write leaves no temporary file.

  At a URL the bytes go to the object in one upload (object stores replace an object whole)."""
  target = as_path(path)
  if is_url(target):
    _write_object(target, write)
    return
  path = os.fspath(target)
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


def _write_object(path: epath.Path, write) -> None:
  buffer = io.BytesIO()
  write(buffer)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(buffer.getvalue())


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


# -- one writer per workdir ----------------------------------------------------------------------

LOCK_NAME = ".vcbench.lock"
_held: dict[str, int] = {}   # Real path -> depth, so a job that runs another in its workdir nests.


class WorkdirBusyError(UserError, RuntimeError):
  """Another live process holds the workdir."""


@contextlib.contextmanager
def workdir_lock(directory: str | os.PathLike[str]) -> Iterator[None]:
  """Holds `<directory>/.vcbench.lock` (an exclusive `flock`) for the block, so two jobs never
  write one workdir; a second is refused with the first's host, pid, start time and command.

  The kernel drops the lock when its holder dies (kill -9 included), so a stale lock file never
  blocks a re-run; the holder's details are only a note in the file. `flock` is reliable on local
  file systems; on NFS it depends on the server, so run one writer per workdir there."""
  directory = os.path.realpath(os.fspath(directory))
  if directory in _held:
    _held[directory] += 1
    try:
      yield
    finally:
      _held[directory] -= 1
    return
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, LOCK_NAME)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
      raise WorkdirBusyError(f"workdir {directory} is in use by another run ({holder}); wait "
                             "for it to finish or use another --config.workdir") from None
    note = (f"host {socket.gethostname()}, pid {os.getpid()}, since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}, command {' '.join(sys.argv)[:300]}")
    os.ftruncate(fd, 0)
    os.pwrite(fd, note.encode(), 0)
    _held[directory] = 1
    try:
      yield
    finally:
      del _held[directory]
  finally:
    os.close(fd)   # Releases the flock.
