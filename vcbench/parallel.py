"""Meshes and shardings for data parallelism over all devices (GSPMD).

    mesh = parallel.data_mesh()                 # every device on one axis, 'data'
    batch = parallel.shard_batch(batch, mesh)   # leading axis split over devices
    params = parallel.replicate(params, mesh)   # a full copy on every device

A jitted function given such inputs (or `in_shardings` built from `batch_sharding` /
`replicated`) is partitioned by XLA's SPMD partitioner: per-example work stays on the device
holding the example, and reductions over the batch axis (loss means, hence gradients) become
all-reduces, so the result is that of one device up to float summation order.
`constrain_batch` pins intermediate values (rollout buffers, minibatches) to the same layout
where propagation could otherwise pick another one.

Multi-process runs (`vcbench.distributed`): the mesh spans every process's devices; each
process passes `shard_batch` only its own part of the batch (`distributed.process_share` rows),
from which the global array is assembled without copying across hosts; `replicate` takes a
value that every process computed identically (same seed, same file).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA = "data"


def data_mesh(devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
  """A 1-D mesh over `devices` (default: all) with the axis 'data'."""
  devices = jax.devices() if devices is None else list(devices)
  return Mesh(np.asarray(devices), (DATA,))


def replicated(mesh: Mesh) -> NamedSharding:
  """The sharding of a value copied on every device."""
  return NamedSharding(mesh, PartitionSpec())


def batch_sharding(mesh: Mesh, axis: int = 0) -> NamedSharding:
  """The sharding that splits array axis `axis` over 'data' (other axes whole)."""
  return NamedSharding(mesh, PartitionSpec(*([None] * axis), DATA))


def check_divisible(size: int, mesh: Mesh, what: str) -> None:
  """Raises ValueError unless `size` splits evenly over the mesh's devices."""
  n = mesh.shape[DATA]
  if size % n:
    raise ValueError(f"{what} = {size} is not divisible by the device count {n} "
                     f"(it is split evenly over the '{DATA}' mesh axis)")


def _local_part(x, mesh: Mesh, axis: int):
  """The global array of which `x` is this process's part along `axis`."""
  if np.ndim(x) <= axis:
    raise ValueError(f"cannot shard axis {axis} of an array of shape {np.shape(x)}")
  local = len(mesh.local_devices)
  if np.shape(x)[axis] % local:
    raise ValueError(f"batch axis {axis} of an array {np.shape(x)} is not divisible by this "
                     f"process's device count {local} (it is split evenly over the "
                     f"'{DATA}' mesh axis)")
  return jax.make_array_from_process_local_data(batch_sharding(mesh, axis), np.asarray(x))


def shard_batch(tree: Any, mesh: Mesh, axis: int = 0) -> Any:
  """Places every leaf of `tree` with its axis `axis` split over the devices. With several
  processes each passes its own part (its share of the rows, in process order); the result is
  the global array."""
  return jax.tree.map(lambda x: _local_part(x, mesh, axis), tree)


def _replicate_leaf(x, sharding: NamedSharding):
  if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    # A typed key cannot be placed on devices of other processes; its raw data can.
    return jax.random.wrap_key_data(jax.device_put(jax.random.key_data(x), sharding),
                                    impl=jax.random.key_impl(x))
  return jax.device_put(x, sharding)


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Places every leaf of `tree` whole on every device (of every process: each must pass the
  same value)."""
  sharding = replicated(mesh)
  return jax.tree.map(lambda x: _replicate_leaf(x, sharding), tree)


def constrain_batch(tree: Any, mesh: Mesh, axis: int = 0) -> Any:
  """Inside jit: asks that every leaf's axis `axis` be split over 'data'."""
  return jax.tree.map(
      lambda x: jax.lax.with_sharding_constraint(x, batch_sharding(mesh, axis)), tree)


def constrain_replicated(tree: Any, mesh: Mesh) -> Any:
  """Inside jit: asks that every leaf be whole on every device."""
  return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, replicated(mesh)), tree)
