"""Meshes and shardings for data parallelism over all devices (GSPMD).

    mesh = parallel.data_mesh()                 # every device on one axis, 'data'
    batch = parallel.shard_batch(batch, mesh)   # leading axis split over devices
    params = parallel.replicate(params, mesh)   # a full copy on every device

A jitted function given such inputs (or `in_shardings` built from `batch_sharding` /
`replicated`) is partitioned by XLA's SPMD partitioner: per-example work stays on the device
holding the example, and reductions over the batch axis (loss means, hence gradients) become
all-reduces, so the result is that of one device up to float summation order.
`constrain_batch` pins intermediate values (rollout buffers, minibatches) to the same layout
where propagation could otherwise pick another one. Single-host only: `shard_batch` and
`replicate` place host (numpy) data, which multi-host runs would do per process.
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


def _batch_leaf_sharding(x, mesh: Mesh, axis: int) -> NamedSharding:
  if np.ndim(x) <= axis:
    raise ValueError(f"cannot shard axis {axis} of an array of shape {np.shape(x)}")
  check_divisible(np.shape(x)[axis], mesh, f"batch axis {axis} of an array {np.shape(x)}")
  return batch_sharding(mesh, axis)


def shard_batch(tree: Any, mesh: Mesh, axis: int = 0) -> Any:
  """Places every leaf of `tree` with its axis `axis` split over the devices."""
  return jax.tree.map(lambda x: jax.device_put(x, _batch_leaf_sharding(x, mesh, axis)), tree)


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Places every leaf of `tree` whole on every device."""
  return jax.device_put(tree, replicated(mesh))


def constrain_batch(tree: Any, mesh: Mesh, axis: int = 0) -> Any:
  """Inside jit: asks that every leaf's axis `axis` be split over 'data'."""
  return jax.tree.map(
      lambda x: jax.lax.with_sharding_constraint(x, batch_sharding(mesh, axis)), tree)


def constrain_replicated(tree: Any, mesh: Mesh) -> Any:
  """Inside jit: asks that every leaf be whole on every device."""
  return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, replicated(mesh)), tree)
