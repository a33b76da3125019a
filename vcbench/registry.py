"""Name -> object registries filled by decorators (big_vision style): one type for every name
table in vcbench (PVRs, suites, tasks, corruptions, factors, jobs, algorithms).

A registry refuses duplicate names (two modules silently shadowing each other is a bug that
shows up as wrong numbers much later) and, on a miss, lists the names it knows so a typo on the
command line is fixed in one go. Names keep their registration order (`names()`), which is the
order tables and galleries show them in.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import pathlib
import sys
from typing import Any, Callable, Iterator, Sequence

from vcbench.errors import UserError


class UnknownName(UserError, KeyError, ValueError):
  """A name a registry does not hold. Both a KeyError (a failed lookup) and a ValueError (a bad
  value, e.g. a config entry), so callers catch whichever they mean."""

  def __str__(self) -> str:  # KeyError would quote the message.
    return str(self.args[0]) if self.args else ""


class Registry:
  """A named table of objects, filled with `@registry.register("name")`."""

  def __init__(self, kind: str):
    self.kind = kind
    self._items: dict[str, Any] = {}

  def register(self, name: str) -> Callable[[Any], Any]:
    if not isinstance(name, str) or not name:
      raise TypeError(f"{self.kind} names are non-empty strings, got {name!r}")

    def decorator(obj):
      if name in self._items:
        raise ValueError(f"{self.kind} {name!r} is registered twice "
                         f"({self._items[name]!r} and {obj!r}).")
      self._items[name] = obj
      return obj
    return decorator

  def unregister(self, name: str) -> Any:
    """Removes and returns `name`'s object (tests that register their own entries clean up)."""
    self.get(name)
    return self._items.pop(name)

  @contextlib.contextmanager
  def temporarily(self, name: str, obj: Any) -> Iterator[Any]:
    """`obj` registered as `name` inside the `with` block only."""
    self.register(name)(obj)
    try:
      yield obj
    finally:
      self._items.pop(name, None)

  def get(self, name: str) -> Any:
    if name not in self._items:
      close = difflib.get_close_matches(str(name), self._items, n=3)
      hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
      raise UnknownName(f"unknown {self.kind} {name!r}.{hint} "
                        f"Known: {', '.join(self._items)}.")
    return self._items[name]

  __getitem__ = get

  def names(self) -> list[str]:
    """The registered names, in registration order."""
    return list(self._items)

  def items(self) -> list[tuple[str, Any]]:
    return list(self._items.items())

  def values(self) -> list[Any]:
    return list(self._items.values())

  def __contains__(self, name: object) -> bool:
    return name in self._items

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())

  def __len__(self) -> int:
    return len(self._items)


class PluginError(UserError, FileNotFoundError):
  """A plugin that cannot be found."""


def load_plugins(specs: Sequence[str]) -> None:
  """Imports each plugin, a module name or a .py file, for what it registers (a PVR, a suite, a
  corruption): a config can then name it, and a sweep worker on another host knows it too.
  Importing twice is a no-op."""
  for spec in specs:
    if not spec.endswith(".py"):
      try:
        importlib.import_module(spec)
      except ModuleNotFoundError as e:
        raise PluginError(f"plugin {spec!r}: {e} (a plugin is a module name on the path or a "
                          ".py file)") from None
      continue
    path = pathlib.Path(spec).resolve()
    name = f"vcbench_plugin_{path.stem}"
    if name in sys.modules:
      continue
    if not path.is_file():
      raise PluginError(f"plugin {spec}: no such file")
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
      module_spec.loader.exec_module(module)
    except BaseException:
      del sys.modules[name]   # A plugin that failed half way is not loaded: a retry re-runs it.
      raise
