"""Where a sweep's pieces run: `local` (this process, in turn), `ray` (a task per piece on a
local or remote Ray cluster) and `slurm` (a submitit job array). A backend is a function
`(config, pieces, plugins) -> iterator of (piece, records or the exception that ended it)`,
yielding as pieces finish (Slurm: in submission order).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import traceback
from typing import Any, Iterator, Optional, Sequence

from vcbench import sweep as sweep_lib
from vcbench.jobs.grid import Slice


def local(config, pieces: Sequence[Slice], plugins: Sequence[str] = ()) -> Iterator[tuple]:
  """Every piece in this process, one after the other (what `launch.main` would do, through the
  sweep's bookkeeping)."""
  for piece in pieces:
    try:
      yield piece, sweep_lib.run_piece(config, piece, plugins)
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc()
      yield piece, e


@dataclasses.dataclass
class RayOptions:
  """How pieces are submitted to Ray."""
  address: Optional[str] = None   # None: a local cluster in this process (`ray.init()`).
  num_cpus: float = 1.0           # Resources each piece asks for (Ray schedules on them).
  num_gpus: float = 0.0
  max_retries: int = 3            # Re-runs of a piece whose worker process or node died.
  local_cpus: Optional[int] = None  # The local cluster's CPUs (default: the machine's).


def ray(options: RayOptions):
  """The Ray backend: each piece is a task with `options`' resources. A worker that dies (killed,
  out of memory, node lost) is retried up to `max_retries` times, and the retry skips the cells
  its predecessor finished (they are in the piece's store); an exception inside the job is not
  retried (it would fail again) and is reported with the piece."""
  import ray as ray_lib  # pylint: disable=import-outside-toplevel

  def run(config, pieces: Sequence[Slice], plugins: Sequence[str] = ()) -> Iterator[tuple]:
    started = not ray_lib.is_initialized()
    if started:
      # Workers import vcbench from where this process does, and plugins by absolute path.
      path = os.pathsep.join(p for p in [os.getcwd(), os.environ.get("PYTHONPATH", "")] if p)
      ray_lib.init(address=options.address, num_cpus=options.local_cpus,
                   runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=True)
    plugins = [str(pathlib.Path(p).resolve()) if p.endswith(".py") else p for p in plugins]
    task = ray_lib.remote(sweep_lib.run_piece).options(
        num_cpus=options.num_cpus, num_gpus=options.num_gpus, max_retries=options.max_retries,
        retry_exceptions=False)
    try:
      refs = {task.remote(config, piece, plugins): piece for piece in pieces}
      while refs:
        done, _ = ray_lib.wait(list(refs), num_returns=1)
        piece = refs.pop(done[0])
        try:
          yield piece, ray_lib.get(done[0])
        except Exception as e:  # pylint: disable=broad-except
          yield piece, e
    finally:
      if started:
        ray_lib.shutdown()
  return run


@dataclasses.dataclass
class SlurmOptions:
  """How pieces are submitted to Slurm through submitit."""
  cluster: Optional[str] = None   # None: Slurm when `sbatch` exists; "local"/"debug": submitit's
                                  # own executors (subprocesses / in process), for tests.
  partition: str = ""
  timeout_min: int = 240
  cpus_per_task: int = 2
  gpus_per_node: int = 0
  max_jobs: int = 0               # >0: at most this many array tasks, pieces dealt round-robin.


def deal(pieces: Sequence[Slice], max_jobs: int) -> list[list[Slice]]:
  """`pieces` dealt round-robin into at most `max_jobs` non-empty groups (all pieces once,
  in order within a group); 0 = one group per piece."""
  n = len(pieces) if max_jobs <= 0 else min(max_jobs, len(pieces))
  return [list(pieces[i::n]) for i in range(n)]


def run_pieces_as_writer(config, pieces: Sequence[Slice],
                         plugins: Sequence[str]) -> list[list[dict]]:
  """One array task: its pieces in turn, each appending to its own writer file of the main
  store (no driver appends for Slurm workers); each piece's new records."""
  return [sweep_lib.run_piece(config, piece, plugins, writer=piece.name) for piece in pieces]


def slurm(options: SlurmOptions):
  """The Slurm backend: a submitit job array, a task per group of pieces (`deal`). Each piece
  appends to `<workdir>/results.jsonl.d/<piece>.jsonl`, so nothing is lost if the driver dies
  while it waits; the driver collects and reports as with the other backends."""
  import submitit  # pylint: disable=import-outside-toplevel

  def run(config, pieces: Sequence[Slice], plugins: Sequence[str] = ()) -> Iterator[tuple]:
    folder = pathlib.Path(config.workdir) / sweep_lib.SCRATCH / "submitit"
    executor = submitit.AutoExecutor(folder=folder, cluster=options.cluster)
    params: dict[str, Any] = {"timeout_min": options.timeout_min,
                              "cpus_per_task": options.cpus_per_task}
    if executor.cluster == "slurm":
      params.update(slurm_partition=options.partition or None,
                    gpus_per_node=options.gpus_per_node or None)
    executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
    plugins = [str(pathlib.Path(p).resolve()) if p.endswith(".py") else p for p in plugins]
    groups = deal(pieces, options.max_jobs)
    submitted = executor.map_array(run_pieces_as_writer, [config] * len(groups), groups,
                                   [plugins] * len(groups))
    print(f"sweep: {len(groups)} {executor.cluster} jobs ({submitted[0].job_id} ...), logs in "
          f"{folder}")
    for group, job in zip(groups, submitted):
      try:
        per_piece = job.result()
      except Exception as e:  # pylint: disable=broad-except
        per_piece = [e] * len(group)
      yield from zip(group, per_piece)
  return run
