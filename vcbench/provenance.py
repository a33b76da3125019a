"""Provenance of a result: the config hash and the code version behind it."""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import numbers
import pathlib
import subprocess
from typing import Any, Iterable, Mapping, Sequence

import numpy as np


def _canonical(value: Any, path: str) -> Any:
  """Converts a config value to plain JSON types, deterministically, or raises naming `path`."""
  if hasattr(value, "to_dict") and callable(value.to_dict):  # ml_collections.ConfigDict
    value = value.to_dict()
  if isinstance(value, Mapping):
    out = {}
    for k, v in value.items():
      if isinstance(k, bool) or not isinstance(k, (str, numbers.Integral)):
        raise TypeError(f"config_hash: key {k!r} at {path or '<root>'} must be a str or int, "
                        f"got {type(k).__name__}.")
      key = str(k)
      if key in out:
        raise TypeError(f"config_hash: keys {k!r} and {key!r} at {path or '<root>'} collide "
                        "once converted to JSON strings.")
      out[key] = _canonical(v, f"{path}.{key}" if path else key)
    return out
  if isinstance(value, (list, tuple)):
    return [_canonical(v, f"{path}[{i}]") for i, v in enumerate(value)]
  if isinstance(value, (set, frozenset)):
    items = [_canonical(v, f"{path}{{}}") for v in value]
    return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
  if value is None or isinstance(value, (str, bool)):
    return value
  if isinstance(value, np.ndarray) or isinstance(value, np.generic):
    return _canonical(value.tolist(), path)
  if isinstance(value, numbers.Integral):
    return int(value)
  if isinstance(value, numbers.Real):
    return float(value)
  raise TypeError(f"config_hash: value at {path or '<root>'} has type {type(value).__name__}, "
                  "which has no canonical JSON form; expected dict/list/str/number/bool/None.")


def canonical_json(config: Any) -> str:
  """The canonical JSON text of a config: sorted keys, no whitespace, tuples as lists."""
  # allow_nan: an `inf` budget is a legitimate config value; the text only feeds the hash.
  return json.dumps(_canonical(config, ""), sort_keys=True, separators=(",", ":"),
                    ensure_ascii=True, allow_nan=True)


def hashable(config: Any, not_hashed: Iterable[str] = (),
             added_later: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """The part of a config that decides what a run computes, as plain JSON types.

  not_hashed: dotted paths ('workdir', 'adapt.methods') of keys that do not change any result
    (where and how fast a run executes, which cells it contains); absent paths are ignored.
  added_later: dotted path -> value for keys added after results were stored, with the value
    that reproduces those results: at that value a key is left out, so old results keep their
    hash (and are still found done); at any other value it counts.
  """
  d = _canonical(config, "")
  if not isinstance(d, dict):
    raise TypeError(f"config_hash: expected a config dict, got {type(config).__name__}")
  for path in not_hashed:
    _drop(d, path, lambda _: True)
  for path, value in (added_later or {}).items():
    legacy = _canonical(value, path)
    _drop(d, path, lambda v, legacy=legacy: v == legacy)
  return d


def _drop(d: dict, path: str, when) -> None:
  *parents, leaf = path.split(".")
  for key in parents:
    d = d.get(key) if isinstance(d, dict) else None
  if isinstance(d, dict) and leaf in d and when(d[leaf]):
    del d[leaf]


def config_hash(config: Any, not_hashed: Iterable[str] = (),
                added_later: Mapping[str, Any] | None = None) -> str:
  """A stable sha256 (hex) of a config, independent of key order: the one policy every job and
  cache hashes by (`hashable` says what `not_hashed` and `added_later` leave out).

  Accepts dicts and ml_collections ConfigDicts (via `.to_dict()`, so FieldReferences are
  resolved). 1 and 1.0 hash differently on purpose: the config's types are part of it.
  """
  d = hashable(config, not_hashed, added_later) if (not_hashed or added_later) else config
  return hashlib.sha256(canonical_json(d).encode("utf-8")).hexdigest()


def _git(args: Sequence[str], cwd: pathlib.Path) -> str:
  out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                       check=True)
  return out.stdout.strip()


@functools.lru_cache(maxsize=None)
def code_version() -> str:
  """The version of the code producing a record, computed once per process.

  The git commit of the repository holding the vcbench package, with "-dirty" appended when
  tracked files have uncommitted changes (untracked files, e.g. results written into the work
  tree, are ignored). Outside git (an installed wheel) or before the first commit: the vcbench
  package version, or "unknown".
  """
  here = pathlib.Path(__file__).resolve().parent
  try:
    sha = _git(["rev-parse", "HEAD"], here)
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], here)
    return f"{sha}-dirty" if dirty else sha
  except (OSError, subprocess.SubprocessError):
    pass
  try:
    return importlib.metadata.version("vcbench")
  except importlib.metadata.PackageNotFoundError:
    pass
  try:
    import vcbench  # pylint: disable=g-import-not-at-top
    return str(getattr(vcbench, "__version__", "unknown"))
  except ImportError:
    return "unknown"
