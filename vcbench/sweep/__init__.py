"""Sweeps: a job's grid run as independent pieces on Ray, Slurm or in this process.

    python -m launch.sweep --config configs/colosseum.py --backend=ray [--address=auto]

A job that defines `plan(config)` (`jobs.grid.Slice`) can be swept. The driver

1. takes the workdir's lock and *harvests*: records that workers of an earlier, interrupted
   sweep finished but the driver never stored are appended to the store first;
2. asks the store which pieces still have pending cells, and submits those (one piece = one
   worker task: the job restricted by the piece's overrides, so the caches a piece builds are
   reused inside it);
3. appends each finished piece's new records to `<workdir>/results.jsonl` as it arrives, from
   the driver only (the Ray backend; no two hosts ever append to one file), skipping any cell the
   store already holds;
4. when every cell is stored, runs the job once more on the full config, which computes nothing
   and writes the report.

A worker runs its piece in `<workdir>/sweep/<piece>/` (its own workdir, lock and result store,
seeded with the main store's records, so it skips what is done; shared caches such as
`data_dir` keep their place). Its store is on disk as it goes, so a worker killed mid-piece and
retried redoes only the cell it was in, and a driver killed at any point loses no finished cell:
the next sweep harvests it. On a cluster, `<workdir>` must be on a file system every host sees.

Slurm (`--backend=slurm`, through submitit) has no driver process to append for the workers:
each piece's worker appends its records to its own file, `<workdir>/results.jsonl.d/<piece>.jsonl`
(`ResultStore(..., writer=...)`), which every reader of the store merges.
"""
from __future__ import annotations

import json
import os
import pathlib
import socket
import time
from typing import Any, Callable, Iterable, Sequence

from vcbench import files, jobs, registry
from vcbench.errors import UserError
from vcbench.jobs.grid import Slice
from vcbench.store import ResultStore, record_key, record_line

SCRATCH = "sweep"            # <workdir>/sweep/<piece>/: a worker's own workdir.
STORE = "results.jsonl"
WORKER_NOTE = "worker.json"  # Which host and process hold (or last held) a piece.


class SweepError(UserError, RuntimeError):
  """A sweep cannot start, or ended with cells that no worker could finish."""


def plan(job: jobs.Job, config) -> list[Slice]:
  if job.plan is None:
    sweepable = [n for n in jobs.names() if jobs.get(n).plan is not None]
    raise SweepError(f"job {job.name!r} cannot be swept (it defines no plan(config)); "
                     f"sweepable jobs: {', '.join(sweepable)}")
  return job.plan(config)


def pending(pieces: Iterable[Slice], store: ResultStore) -> list[Slice]:
  """The pieces with cells the store lacks, each reduced to those cells."""
  done = store.completed()
  out = []
  for piece in pieces:
    left = tuple(c for c in piece.cells if (c, piece.config_hash) not in done)
    if left:
      out.append(Slice(piece.key, piece.overrides, left, piece.config_hash))
  return out


# -------------------------------------------------------------------------------------------
# The worker side: one piece, in its own workdir.
# -------------------------------------------------------------------------------------------


def _seed_scratch(main: ResultStore, scratch: ResultStore) -> None:
  """Writes the scratch store as its own records plus the main store's others (atomically):
  the piece then skips every cell that is already done, here or there."""
  own = scratch.records()
  have = {record_key(r) for r in own}
  records = own + [r for r in main.records() if record_key(r) not in have]
  files.atomic_write(scratch.path, lambda f: f.write(b"".join(map(record_line, records))))


def absolute_dirs(config):
  """`config` with its workdir and data_dir absolute: a worker may start elsewhere."""
  config = config.copy_and_resolve_references()
  for key in ("workdir", "data_dir"):
    if config.get(key):
      config[key] = os.path.abspath(config[key])
  return config


def subconfig(config, piece: Slice, scratch: str | os.PathLike[str]):
  """`config` restricted to `piece`, writing to `scratch`."""
  sub = config.copy_and_resolve_references()
  with sub.unlocked():
    for key, value in {**piece.overrides, "workdir": os.fspath(scratch)}.items():
      *parents, leaf = key.split(".")   # 'adapt.methods': a nested key.
      node = sub
      for p in parents:
        node = node[p]
      node[leaf] = value
  return sub


def run_piece(config, piece: Slice, plugins: Sequence[str] = (),
              writer: str | None = None) -> list[dict]:
  """Runs `piece` of `config`'s job in `<workdir>/sweep/<piece>/`; returns the records it made
  that the main store lacked when it started (with `writer`, also appends them to the main
  store's file of that writer). Safe to run again after a kill: finished cells are kept."""
  registry.load_plugins(plugins)
  scratch_dir = pathlib.Path(config.workdir) / SCRATCH / piece.name
  main = ResultStore(pathlib.Path(config.workdir) / STORE)
  scratch = ResultStore(scratch_dir / STORE)
  sub = subconfig(config, piece, scratch_dir)
  job = jobs.resolve(sub)
  with files.workdir_lock(scratch_dir):
    note = {"host": socket.gethostname(), "pid": os.getpid(), "start": time.time()}
    files.atomic_write(scratch_dir / WORKER_NOTE, lambda f: f.write(json.dumps(note).encode()))
    known = main.completed()
    _seed_scratch(main, scratch)
    job.run(sub)
  new = [r for r in scratch.records() if record_key(r) not in known]
  if writer is not None:
    ResultStore(main.path, writer=writer).append_new(new)
  return new


# -------------------------------------------------------------------------------------------
# The driver side.
# -------------------------------------------------------------------------------------------


def harvest(config, store: ResultStore) -> int:
  """Appends what earlier workers finished but no driver stored; returns how many."""
  n = 0
  for path in sorted((pathlib.Path(config.workdir) / SCRATCH).glob(f"*/{STORE}")):
    n += store.append_new(ResultStore(path).records())
  return n


Backend = Callable[..., Iterable[tuple[Slice, Any]]]


def sweep(config, backend: Backend, plugins: Sequence[str] = (), log=print) -> str:
  """Runs every pending piece of `config`'s job through `backend` (see `backends`), storing
  results as they arrive; then the job's report. Raises SweepError naming the pieces that
  failed (their finished cells are stored; a re-run retries the rest)."""
  registry.load_plugins(plugins)
  config = absolute_dirs(config)
  job = jobs.resolve(config)
  pieces = plan(job, config)
  with files.workdir_lock(config.workdir):
    store = ResultStore(pathlib.Path(config.workdir) / STORE)
    if n := harvest(config, store):
      log(f"sweep: stored {n} records that an earlier sweep's workers finished")
    todo = pending(pieces, store)
    cells = sum(len(p.cells) for p in pieces)
    log(f"sweep {job.name}: {len(pieces)} pieces, {cells} cells; {len(todo)} pieces "
        f"({sum(len(p.cells) for p in todo)} cells) to run")
    t0, failed = time.time(), []
    results = backend(config, todo, plugins) if todo else ()
    for i, (piece, result) in enumerate(results, start=1):
      if isinstance(result, BaseException):
        failed.append(f"{piece.name}: {type(result).__name__}: {result}".splitlines()[0])
        log(f"sweep: piece {piece.name} failed: {failed[-1]}")
        continue
      n = store.append_new(result)
      log(f"sweep: [{i}/{len(todo)}] {piece.name}: {n} records stored "
          f"({time.time() - t0:.0f} s)")
    harvest(config, store)
    left = pending(pieces, store)
    if left:
      raise SweepError(f"sweep: {sum(len(p.cells) for p in left)} cells of {len(left)} pieces "
                       f"are not stored ({'; '.join(failed) or 'see the log'}); their finished "
                       "cells are kept, and the same command retries the rest")
    log(f"sweep: all {cells} cells stored ({time.time() - t0:.0f} s); the report:")
    return job.run(config)
