"""Config checking shared by every job.

Configs are code (`configs/*.py`, `get_config(arg)`), overridden from the
command line (`--config.key=value`). ml_collections already refuses overrides
of keys a config lacks and values of the wrong type; what it cannot know is
which keys a *job* reads. A job therefore declares its schema (a ConfigDict of
defaults): `check_keys` refuses keys the job would silently ignore (a typo in
a config file is otherwise a run with the default), and `require` /
`require_choice` refuse values outside their allowed set, naming the key.

Config files share `variant` (the `:arg` of `--config=configs/x.py:arg`); `load_file` reads a
config file by path, as the command line does, for jobs that build on another job's configs.
"""
from __future__ import annotations

import difflib
import importlib.util
import os
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Iterable, Mapping, Sequence

import ml_collections

from vcbench.errors import UserError


class ConfigError(UserError, ValueError):
  """A config key or value the job cannot use."""


def _as_dict(config: Any) -> Mapping[str, Any]:
  if isinstance(config, ml_collections.ConfigDict):
    return config.to_dict()
  if isinstance(config, Mapping):
    return config
  raise ConfigError(f"config must be a ConfigDict or dict, got {type(config).__name__}")


def check_keys(config: Any, schema: Any, path: str = "config") -> None:
  """Raises ConfigError for any key of `config` that `schema` does not have. An empty mapping
  in the schema holds keys the job checks itself (e.g. per-suite overrides)."""
  cfg, ref = _as_dict(config), _as_dict(schema)
  for key, value in cfg.items():
    where = f"{path}.{key}"
    if key not in ref:
      close = difflib.get_close_matches(key, list(ref), n=3)
      hint = f" (did you mean {', '.join(close)}?)" if close else ""
      raise ConfigError(f"unknown key {where}{hint}; known keys of {path}: "
                        f"{', '.join(sorted(ref))}")
    if isinstance(ref[key], Mapping) and ref[key] and isinstance(value, Mapping):
      check_keys(value, ref[key], where)


def _lookup(config: Any, key: str) -> Any:
  """config['a']['b'] (or config.a.b) for key 'a.b'."""
  value = config
  for part in key.split("."):
    value = value[part] if isinstance(value, Mapping) else getattr(value, part)
  return value


def require(config: Any, key: str, ok: Callable[[Any], bool], expected: str) -> None:
  """Raises ConfigError naming `key` when `ok(value)` is false."""
  value = _lookup(config, key)
  if not ok(value):
    raise ConfigError(f"bad value for config.{key}: expected {expected}, got {value!r}")


def require_choice(config: Any, key: str, choices: Iterable[str]) -> None:
  """Every string in config.key (a string or a sequence of them) is one of `choices`."""
  choices = list(choices)
  raw = _lookup(config, key)
  for v in [raw] if isinstance(raw, str) else list(raw):
    if v not in choices:
      close = difflib.get_close_matches(str(v), choices, n=3)
      hint = f" (did you mean {', '.join(close)}?)" if close else ""
      raise ConfigError(f"bad value {v!r} in config.{key}{hint}; choose from "
                        f"{', '.join(choices)}")


def require_ints(config: Any, keys: Iterable[str], minimum: int = 1) -> None:
  """Each of `keys` is an int >= `minimum`."""
  what = "a positive int" if minimum == 1 else f"an int >= {minimum}"
  for key in keys:
    require(config, key, lambda v: isinstance(v, int) and not isinstance(v, bool)
            and v >= minimum, what)


def parse_mapping(config: Any, key: str, allowed: Sequence[str]) -> dict[str, str]:
  """config.key, a string "name=value[,name=value...]", as a dict; refuses malformed entries
  and names outside `allowed` (e.g. checkpoints of PVRs the run does not evaluate)."""
  out = {}
  for item in filter(None, str(_lookup(config, key)).split(",")):
    name, sep, value = item.partition("=")
    if not sep or not name or not value:
      raise ConfigError(f"bad value {item!r} in config.{key}; expected 'name=value', e.g. "
                        f"'vc1_vitb=/data/vc1_vitb.pth'")
    if name not in allowed:
      raise ConfigError(f"config.{key} names {name!r}, which is not one of {tuple(allowed)}")
    out[name] = value
  return out


def variant(arg: str | None, variants: Sequence[str], config_file: str) -> str:
  """The variant a config file's `get_config(arg)` builds: `arg`, or the first of `variants`
  (the default); an unknown one is refused with the list."""
  arg = arg or variants[0]
  if arg not in variants:
    name = pathlib.Path(config_file).name
    raise ConfigError(f"configs/{name}: unknown variant {arg!r}; variants: {', '.join(variants)}")
  return arg


def load_file(spec: str) -> ml_collections.ConfigDict:
  """`get_config(arg)` of the config file `spec` = "path/to/file.py[:arg]" (as
  `--config=...` on the command line). A relative path is tried from the working directory,
  then from the repository root."""
  path, _, arg = spec.partition(":")
  candidates = [pathlib.Path(path), pathlib.Path(__file__).resolve().parent.parent / path]
  found = next((p for p in candidates if p.is_file()), None)
  if found is None:
    raise ConfigError(f"config file {path!r} not found (looked in {os.getcwd()} and the "
                      "repository root)")
  module_spec = importlib.util.spec_from_file_location(f"_vcbench_config_{found.stem}", found)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  if not hasattr(module, "get_config"):
    raise ConfigError(f"config file {found} defines no get_config(arg)")
  return module.get_config(arg or None)


def require_grid(config: Any, keys: Iterable[str]) -> None:
  """Each of `keys` is a non-empty sequence without repeats: a sweep axis (tasks, PVRs, seeds).
  An empty one would run nothing and report nothing; a repeat would be silently merged."""
  for key in keys:
    value = _lookup(config, key)
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
      raise ConfigError(f"bad value for config.{key}: expected a non-empty tuple, got "
                        f"{value!r}")
    repeated = sorted({repr(v) for v in value if list(value).count(v) > 1})
    if repeated:
      raise ConfigError(f"bad value for config.{key}: {', '.join(repeated)} appear(s) more "
                        f"than once in {tuple(value)!r}")


def require_writable(config: Any, key: str) -> None:
  """The directory config.key (created if missing; "" = not used) accepts files: a probe file
  is written and removed, so an unwritable workdir fails now, not after hours of work."""
  directory = _lookup(config, key)
  if not directory:
    return
  try:
    os.makedirs(directory, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-probe-")
    os.close(fd)
    os.unlink(probe)
  except OSError as e:
    raise ConfigError(f"config.{key}={directory!r} is not a writable directory: "
                      f"{e.strerror or e}") from None


def require_free_space(directory: str, need_bytes: int, what: str) -> None:
  """The file system of `directory` (or of its nearest existing parent) has `need_bytes` free
  for `what`, so a run does not die of a full disk hours in."""
  probe = pathlib.Path(directory).absolute()
  while not probe.exists() and probe != probe.parent:
    probe = probe.parent
  free = shutil.disk_usage(probe).free
  if free < need_bytes:
    raise ConfigError(f"{directory}: {what} needs about {need_bytes / 1e9:.1f} GB, but its file "
                      f"system has {free / 1e9:.1f} GB free")
