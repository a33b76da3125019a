"""Multi-process JAX: one process per host (or per accelerator), every device in one mesh.

    distributed.initialize("auto")                      # TPU pod slice, Slurm, Open MPI
    distributed.initialize("10.0.0.1:1234", 4, rank)    # anywhere else: coordinator, size, rank
    if distributed.is_main(): write(...)                # logs, exports, store records

`launch.main --coordinator=... [--num_processes --process_id]` calls `initialize` before any
other JAX call. After it, `jax.devices()` lists every process's devices, `parallel.data_mesh()`
spans them, and a jitted step runs as one SPMD program on all of them: each process feeds its own
share of a batch (`parallel.shard_batch` assembles the global array from every process's part,
`process_share` says which rows are this process's), gradients are all-reduced by XLA, and the
replicated parameters are the same everywhere. Orbax checkpoints are written collectively (every
process calls save; each writes the shards it holds). On CPUs the collectives go through gloo,
which is how the tests run two processes on one machine.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import jax
from jax.experimental import multihost_utils


def initialize(coordinator: str = "", num_processes: Optional[int] = None,
               process_id: Optional[int] = None, cpu_devices: int = 0) -> None:
  """Joins this process to a multi-process run (`coordinator` "" = run alone).

  coordinator: "auto" lets JAX find the cluster (Cloud TPU, Slurm, Open MPI, Kubernetes);
    "host:port" names process 0's coordinator service, with `num_processes` and `process_id`.
  cpu_devices: >0: this many CPU devices in this process (tests and CPU-only hosts).
  """
  explicit = coordinator not in ("", "auto")
  if not coordinator and (num_processes not in (None, 1) or process_id not in (None, 0)):
    raise ValueError(f"num_processes={num_processes} / process_id={process_id} without a "
                     "coordinator: pass --coordinator=host:port (or 'auto')")
  if explicit and (num_processes is None or process_id is None):
    raise ValueError(f"--coordinator={coordinator} needs --num_processes and --process_id")
  if explicit and not 0 <= process_id < num_processes:
    raise ValueError(f"process_id {process_id} is not in [0, {num_processes})")
  if cpu_devices:
    jax.config.update("jax_num_cpu_devices", int(cpu_devices))
  if not coordinator:
    return
  # Collectives between CPU devices of different processes (ignored by TPU and GPU backends).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if explicit:
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)
  else:
    jax.distributed.initialize()


def is_main() -> bool:
  """Whether this is process 0: the one that logs and writes what is written once."""
  return jax.process_index() == 0


def process_share(total: int, what: str) -> tuple[int, int]:
  """(this process's index, process count) for splitting `total` rows evenly (ValueError naming
  `what` when they do not split)."""
  count = jax.process_count()
  if total % count:
    raise ValueError(f"{what} = {total} is not divisible by the process count {count} (each "
                     "process feeds an equal share)")
  return jax.process_index(), count


def barrier(name: str) -> None:
  """Waits until every process reaches `name` (a no-op alone)."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)


@contextlib.contextmanager
def main_first(name: str) -> Iterator[bool]:
  """Process 0 runs the block first (e.g. generating a cache), the others after it has: yields
  whether this process should do the work (only process 0 does)."""
  try:
    yield is_main()
  finally:
    barrier(name)
