"""Config checking shared by every job.

Configs are code (`configs/*.py`, `get_config(arg)`), overridden from the
command line (`--config.key=value`). ml_collections already refuses overrides
of keys a config lacks and values of the wrong type; what it cannot know is
which keys a *job* reads. A job therefore declares its schema (a ConfigDict of
defaults): `check_keys` refuses keys the job would silently ignore (a typo in
a config file is otherwise a run with the default), and `require` /
`require_choice` refuse values outside their allowed set, naming the key.
"""
from __future__ import annotations

import difflib
from typing import Any, Callable, Iterable, Mapping

import ml_collections


class ConfigError(ValueError):
  """A config key or value the job cannot use."""


def _as_dict(config: Any) -> Mapping[str, Any]:
  if isinstance(config, ml_collections.ConfigDict):
    return config.to_dict()
  if isinstance(config, Mapping):
    return config
  raise ConfigError(f"config must be a ConfigDict or dict, got {type(config).__name__}")


def check_keys(config: Any, schema: Any, path: str = "config") -> None:
  """Raises ConfigError for any key of `config` that `schema` does not have."""
  cfg, ref = _as_dict(config), _as_dict(schema)
  for key, value in cfg.items():
    where = f"{path}.{key}"
    if key not in ref:
      close = difflib.get_close_matches(key, list(ref), n=3)
      hint = f" (did you mean {', '.join(close)}?)" if close else ""
      raise ConfigError(f"unknown key {where}{hint}; known keys of {path}: "
                        f"{', '.join(sorted(ref))}")
    if isinstance(ref[key], Mapping) and isinstance(value, Mapping):
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
