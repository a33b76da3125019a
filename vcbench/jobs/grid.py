"""The grid runner every job shares: cells -> store.pending -> run -> append -> report.

A job lists its work as `Unit`s, each the store cells one piece of work evaluates (one BC fit
scores one cell in CortexBench and sixteen test sets in the Colosseum), with coordinates to
group them by:

    grid = Grid("cortexbench", config.workdir, config_hash(config, NOT_HASHED))
    for task, units in grid.groups(grid.todo(units), by=lambda u: u.key[0]).items():
      demos = ...                                   # what the group shares, loaded once
      for unit in grid.pending(units):              # re-checked just before it runs
        grid.record(unit.cells[0], metrics, extra)  # appended (atomically) as it is done
    rows = grid.rows(benchmark="cortexbench")       # this config's records, for the report

`todo` keeps the units with cells not yet in the store under this config hash (a re-run skips
what is done; an interrupted sweep resumes), reduced to those cells. `config_hash` is the one
hashing policy of every job: the config minus the keys that never change a cell's numbers
(`not_hashed`: where and how fast it runs, which cells it contains), minus keys added later at
the value that reproduces older records (`added_later`), plus what else a cell depends on
(`extra`: a trained agent's identity, a benchmark's definitions).

A job that can be swept across processes and hosts (`vcbench.sweep`) also defines
`plan(config) -> list[Slice]`: its grid cut into the pieces one worker runs (a `Slice` is the
config overrides that restrict the job to that piece, e.g. one task and one PVR with every seed,
so the caches a piece builds are the ones it reuses), with the cells each piece stores. The
overrides may only touch keys outside the config hash, so a piece's records are the full
run's.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Optional

from vcbench import distributed
from vcbench import provenance
from vcbench.store import Cell, ResultStore


def config_hash(config, not_hashed: Iterable[str] = (),
                added_later: Optional[Mapping[str, Any]] = None, **extra: Any) -> str:
  """The hash a job's cells are stored under (see the module docstring)."""
  d = provenance.hashable(config)
  return provenance.config_hash({**d, **extra}, tuple(not_hashed), added_later)


@dataclasses.dataclass(frozen=True)
class Unit:
  """One piece of work: its coordinates (e.g. (task, pvr, seed)) and the cells it evaluates."""
  key: tuple
  cells: tuple[Cell, ...]


@dataclasses.dataclass(frozen=True)
class Slice:
  """One worker's piece of a job's grid: `overrides` restrict the config to it; `cells` are the
  store cells it evaluates, under `config_hash`."""
  key: tuple
  overrides: Mapping[str, Any]
  cells: tuple[Cell, ...]
  config_hash: str

  @property
  def name(self) -> str:
    """A file-name-safe label, unique within a plan (e.g. 'metaworld.assembly.in1k_mobilenetv2')."""
    return ".".join(str(k) for k in self.key).replace("/", "_").replace(" ", "_")


class Grid:
  """A job's view of its result store (`<workdir>/results.jsonl`) under one config hash."""

  def __init__(self, name: str, workdir: str | pathlib.Path, config_hash: str,
               log: Callable[[str], Any] = print):
    self.name, self.config_hash, self.log = name, config_hash, log
    self.store = ResultStore(pathlib.Path(workdir) / "results.jsonl")

  def todo(self, units: Iterable[Unit]) -> list[Unit]:
    """The units with pending cells, in order, each reduced to its pending cells."""
    units = list(units)
    cells = [c for u in units for c in u.cells]
    pending = set(self.store.pending(cells, self.config_hash))
    self.log(f"{self.name}: {len(cells)} cells ({len(cells) - len(pending)} already in "
             f"{self.store.path})")
    return [Unit(u.key, tuple(c for c in u.cells if c in pending)) for u in units
            if any(c in pending for c in u.cells)]

  def pending(self, units: Iterable[Unit]) -> Iterator[Unit]:
    """`units`, each re-checked against the store just before it is yielded (reduced to the
    cells still pending, skipped when none are): a cell another writer finished meanwhile is
    never computed twice."""
    for unit in units:
      left = set(self.store.pending(unit.cells, self.config_hash))
      if left:
        yield Unit(unit.key, tuple(c for c in unit.cells if c in left))
      else:
        self.log(f"{self.name}: {unit.key} was finished by another run; skipped")

  @staticmethod
  def groups(units: Iterable[Unit], by: Callable[[Unit], Hashable]) -> dict[Any, list[Unit]]:
    """`units` grouped by `by(unit)`, groups and units in their first-seen order."""
    out: dict[Any, list[Unit]] = {}
    for unit in units:
      out.setdefault(by(unit), []).append(unit)
    return out

  def record(self, cell: Cell, metrics: Mapping[str, Any],
             extra: Optional[Mapping[str, Any]] = None, *, allow_nonfinite: bool = False) -> dict:
    """Appends one cell's record (durable when this returns); in a multi-process run only
    process 0 writes (the others computed the same cell with it)."""
    if not distributed.is_main():
      return {}
    return self.store.append(cell, self.config_hash, metrics, extra,
                             allow_nonfinite=allow_nonfinite)

  def rows(self, **where: Any) -> list[dict[str, Any]]:
    """This config's latest record of every cell, as flat rows (`ResultStore.to_rows`)."""
    return self.store.to_rows(config_hash=self.config_hash, latest_only=True, **where)
