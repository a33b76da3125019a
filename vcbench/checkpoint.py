"""Orbax checkpointing for training loops, so that a killed run resumes to the same result.

docs/design.md asks every training loop to be "checkpointed with orbax, and resumable from its last
checkpoint to the same result". This module is the one place that talks to orbax:

  ckpt = Checkpointer(workdir / "ckpt", max_to_keep=3)
  step, state = ckpt.restore_or_init(lambda: init_state(key))
  while step < total_steps:
    state = train_chunk(state)          # jitted, pure
    step += chunk
    ckpt.save(step, state, metadata={"config_hash": h})
  ckpt.close()

Resumption is exact because the whole training state -- including the PRNG key, either a typed
key (`jax.random.key`) or a raw uint32 key (`jax.random.PRNGKey`) -- is one pytree that is saved
and restored bit for bit.

Atomicity: orbax writes each step into a temporary directory and renames it to `<step>` only
once complete, so a crash never leaves a half-written checkpoint that `latest_step` would pick.
By default `save` blocks until the write is finished (`wait=True`); with `wait=False` the write
continues in a background thread (orbax async checkpointing) and the next `save`, `restore`,
`wait()` or `close()` waits for it.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import jax
import orbax.checkpoint as ocp
from etils import epath

from vcbench import files
from vcbench.errors import CheckpointError

_STATE = "state"
_METADATA = "metadata"


class Checkpointer:
  """Saves and restores a training-state pytree by integer step, keeping the last few.

  Args:
    directory: where checkpoints live, one sub-directory per step (created if missing): a
      local path or a URL that `etils.epath` and orbax can write (`gs://bucket/run`).
    max_to_keep: how many most recent checkpoints to keep; None keeps all.
  """

  def __init__(self, directory: str | os.PathLike[str], max_to_keep: int | None = 3):
    if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 1):
      raise ValueError(f"Checkpointer: max_to_keep must be a positive int or None, "
                       f"got {max_to_keep!r}.")
    # orbax wants an absolute path; resolved once so a later chdir does not move the store.
    # A URL is kept as it is: made "absolute" by os.path it would become a local directory.
    self.directory: epath.Path = files.as_path(directory)
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True),
        # Named up front so that a fresh manager can read a saved state's tree (restore's check
        # against the target) before anything is restored.
        item_handlers={_STATE: ocp.StandardCheckpointHandler(),
                       _METADATA: ocp.JsonCheckpointHandler()},
    )

  def __repr__(self) -> str:
    return f"Checkpointer({str(self.directory)!r})"

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  # -- saving ---------------------------------------------------------------------------------

  def save(self, step: int, pytree: Any, metadata: Mapping[str, Any] | None = None, *,
           wait: bool = True) -> None:
    """Saves `pytree` (and JSON `metadata`) as checkpoint `step`.

    Args:
      step: the training step; must exceed every saved step (orbax refuses to overwrite).
      pytree: the state: nested dicts/lists/tuples/dataclasses of jax or numpy arrays/scalars.
      metadata: small JSON-serialisable dict stored beside the state (config hash, metrics).
      wait: block until the checkpoint is on disk. With False the write finishes in the
        background; call `wait()` (or `close()`) before relying on it.
    """
    step = _check_step(step)
    latest = self.latest_step()
    if latest is not None and step <= latest:
      raise ValueError(f"Checkpointer.save: step {step} is not after the latest saved step "
                       f"{latest} in {self.directory}.")
    items = {_STATE: ocp.args.StandardSave(pytree)}
    if metadata is not None:
      if not isinstance(metadata, Mapping):
        raise TypeError(f"Checkpointer.save: metadata must be a dict, got "
                        f"{type(metadata).__name__}.")
      items[_METADATA] = ocp.args.JsonSave(dict(metadata))
    self._manager.save(step, args=ocp.args.Composite(**items))
    if wait:
      self.wait()

  def wait(self) -> None:
    """Blocks until any background save has finished."""
    self._manager.wait_until_finished()

  def close(self) -> None:
    """Waits for pending saves and releases orbax's resources."""
    self._manager.close()

  # -- restoring ------------------------------------------------------------------------------

  def all_steps(self) -> list[int]:
    """The saved steps, ascending: those on disk when this Checkpointer was created, plus its
    own saves (orbax's view; one run owns a directory at a time)."""
    return sorted(self._manager.all_steps())

  def latest_step(self) -> int | None:
    """The newest complete checkpoint's step, or None if there is none."""
    steps = self.all_steps()
    return steps[-1] if steps else None

  def restore(self, step: int | None = None, target: Any = None) -> Any:
    """Restores the state saved at `step` (default: the latest).

    Args:
      step: which checkpoint; None for the latest.
      target: a pytree like the saved one (concrete arrays or `jax.ShapeDtypeStruct`s) giving
        the structure, dtypes and shardings to restore into. Without it, orbax rebuilds the
        tree from its own metadata: containers come back as dicts/lists (tuples become lists,
        dataclasses and NamedTuples become dicts), so pass a target to get the exact type back.

    Raises:
      FileNotFoundError: no checkpoint (or not `step`) in the directory.
      CheckpointError: the saved tree is not shaped like `target` (e.g. written by a version of
        the code whose state had other fields).
    """
    step = self._resolve_step(step)
    self.wait()
    if target is None:
      restore_args = ocp.args.StandardRestore()
    else:
      target = _abstract(target)
      if diff := _structure_diff(self._manager.item_metadata(step)[_STATE], target):
        raise CheckpointError(
            f"{self.directory / str(step)}: the saved state does not fit the one this code "
            f"builds (it was written by another version of the code or config): {diff}. Run "
            f"the version that wrote it, or delete {self.directory} to start this run over.")
      restore_args = ocp.args.StandardRestore(target)
    restored = self._manager.restore(step, args=ocp.args.Composite(**{_STATE: restore_args}))
    return restored[_STATE]

  def metadata(self, step: int | None = None) -> dict[str, Any] | None:
    """The metadata dict saved with `step` (default: latest), or None if none was given."""
    step = self._resolve_step(step)
    if not (self.directory / str(step) / _METADATA).exists():
      return None
    self.wait()
    restored = self._manager.restore(
        step, args=ocp.args.Composite(**{_METADATA: ocp.args.JsonRestore()}))
    return restored[_METADATA]

  def restore_or_init(self, init_fn: Callable[[], Any]) -> tuple[int, Any]:
    """(latest step, restored state) if a checkpoint exists, else (0, init_fn()).

    `init_fn()`'s result also serves as the restore target when resuming, so the state comes
    back with the same structure, dtypes and shardings as a fresh one. It is only traced
    (`jax.eval_shape`), not run, in that case, so resuming does not pay for initialisation.
    """
    step = self.latest_step()
    if step is None:
      return 0, init_fn()
    return step, self.restore(step, target=jax.eval_shape(init_fn))

  def _resolve_step(self, step: int | None) -> int:
    steps = self.all_steps()
    if not steps:
      raise FileNotFoundError(f"Checkpointer: no checkpoint in {self.directory}; "
                              "use restore_or_init() to start fresh when there is none.")
    if step is None:
      return steps[-1]
    step = _check_step(step)
    if step not in steps:
      raise FileNotFoundError(f"Checkpointer: no checkpoint for step {step} in "
                              f"{self.directory}; available steps: {steps}.")
    return step


def _check_step(step: Any) -> int:
  if isinstance(step, bool) or not hasattr(step, "__index__"):
    raise TypeError(f"Checkpointer: step must be an int, got {step!r} ({type(step).__name__}).")
  step = int(step)
  if step < 0:
    raise ValueError(f"Checkpointer: step must be >= 0, got {step}.")
  return step


def _abstract(target: Any) -> Any:
  """Shape/dtype(/sharding) structs for a restore target; keeps non-array leaves as they are."""
  def leaf(x):
    if isinstance(x, jax.ShapeDtypeStruct):
      return x
    if isinstance(x, jax.Array):
      return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # numpy arrays
      return jax.ShapeDtypeStruct(x.shape, x.dtype)
    return x
  return jax.tree_util.tree_map(leaf, target)


def _leaf_shapes(tree: Any) -> dict[str, tuple]:
  """{'a/b/0': shape} of a pytree's array leaves, with the same key names for a target (fields,
  tuple indices) and orbax's metadata of it (dicts, lists)."""
  def name(k):
    for attr in ("key", "name", "idx"):
      if hasattr(k, attr):
        return str(getattr(k, attr))
    return str(k)
  def shape(leaf):
    if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
      leaf = jax.eval_shape(jax.random.key_data, leaf)   # saved as its raw data
    return tuple(getattr(leaf, "shape", ()))
  return {"/".join(name(k) for k in path): shape(leaf)
          for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _structure_diff(saved: Any, target: Any, show: int = 5) -> str:
  """What differs between a saved tree's metadata and a restore target ('' when nothing):
  leaves only one side has, and leaves whose shapes differ, named by path."""
  have, want = _leaf_shapes(saved), _leaf_shapes(target)
  def some(names):
    names = sorted(names)
    return ", ".join(names[:show]) + (f" and {len(names) - show} more" if len(names) > show
                                      else "")
  parts = []
  if missing := set(want) - set(have):
    parts.append(f"not in the checkpoint: {some(missing)}")
  if extra := set(have) - set(want):
    parts.append(f"in the checkpoint but not in this code's state: {some(extra)}")
  if reshaped := [k for k in set(have) & set(want) if have[k] != want[k]]:
    parts.append("shapes differ (saved vs expected): " + some(
        f"{k} {have[k]} vs {want[k]}" for k in reshaped))
  return "; ".join(parts)
