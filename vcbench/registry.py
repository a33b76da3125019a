"""Name -> object registries filled by decorators (big_vision style).

A registry refuses duplicate names (two modules silently shadowing each other is
a bug that shows up as wrong numbers much later) and, on a miss, lists the names
it knows so a typo on the command line is fixed in one go.
"""
from __future__ import annotations

import difflib
from typing import Any, Callable, Dict, Iterator


class Registry:
  """A named table of objects, filled with `@registry.register("name")`."""

  def __init__(self, kind: str):
    self.kind = kind
    self._items: Dict[str, Any] = {}

  def register(self, name: str) -> Callable[[Any], Any]:
    def decorator(obj):
      if name in self._items:
        raise ValueError(f"{self.kind} {name!r} is registered twice "
                         f"({self._items[name]!r} and {obj!r}).")
      self._items[name] = obj
      return obj
    return decorator

  def get(self, name: str) -> Any:
    if name not in self._items:
      close = difflib.get_close_matches(name, self._items, n=3)
      hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
      raise KeyError(f"unknown {self.kind} {name!r}.{hint} "
                     f"Known: {', '.join(sorted(self._items))}.")
    return self._items[name]

  def names(self) -> list[str]:
    return sorted(self._items)

  def __contains__(self, name: str) -> bool:
    return name in self._items

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())
