"""Checkpointed, resumable training for the jitted trainers (PPO, navigation BC).

A trainer has `num_updates`, `init(key)`, `train_chunk(state, n) -> (state, metrics [n])`,
`abstract_state()` and `abstract_metrics(n)`. `run` trains it in chunks of `chunk_updates`
updates, saving the whole state (PRNG key included) and the metrics so far with orbax after
each chunk; a restarted `run` continues from the latest checkpoint to the same result, bit for
bit on CPU. A checkpoint made under another config is refused, naming what changed.
"""
from __future__ import annotations

import copy
import json
import pathlib
from typing import Any, Callable, Optional

import jax
import numpy as np

from vcbench.checkpoint import Checkpointer

# Config fields that do not change the result.
_UNHASHED = ("log_every",)
# Fields added after runs were checkpointed (dotted paths), with the value that reproduces
# those runs: left out at that value, so the runs still resume and keep their hashes.
ADDED_LATER = {"policy.finetune_encoder": False, "policy.encoder_lr": 1e-5,
               "policy.encoder_chunk": 64}


def without_added_defaults(d: dict) -> dict:
  """A copy of the config dict `d` without the `ADDED_LATER` fields at their old value."""
  d = copy.deepcopy(d)
  for path, value in ADDED_LATER.items():
    *parents, leaf = path.split(".")
    node = d
    for key in parents:
      node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and leaf in node and node[leaf] == value:
      del node[leaf]
  return d


def fingerprint(config) -> str:
  """The config as JSON, minus fields that do not change the result."""
  d = config.to_dict()
  for key in _UNHASHED:
    d.pop(key, None)
  return json.dumps(without_added_defaults(d), sort_keys=True, default=str)


def _config_changes(saved: str, config) -> str:
  """'key: saved -> now' for every (flattened) config field that differs."""
  def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
      out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
    return out
  before, now = flat(json.loads(saved)), flat(json.loads(fingerprint(config)))
  keys = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
  return ", ".join(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in keys)


def run(trainer, config, workdir, chunk_updates: int = 100, *, max_to_keep: int = 2,
        stop_at: Optional[int] = None,
        after_chunk: Optional[Callable[[int, Any], None]] = None
        ) -> tuple[Any, dict[str, np.ndarray]]:
  """Trains `trainer` (built from `config`; the seed is config.seed) under `workdir`.

  stop_at: return once this many updates are done (a job's time slot; a later call resumes).
  after_chunk: called as after_chunk(updates_done, state) once each chunk is checkpointed
    (e.g. validation and best-checkpoint selection); it must be idempotent for a given
    `updates_done`, since a run killed inside it repeats it on resume.
  Returns (state, metrics {name: np.ndarray [updates done]}).
  """
  if not isinstance(chunk_updates, int) or chunk_updates < 1:
    raise ValueError(f"chunk_updates must be a positive int, got {chunk_updates!r}")
  with Checkpointer(pathlib.Path(workdir) / "checkpoints", max_to_keep=max_to_keep) as ckpt:
    done = ckpt.latest_step()
    if done is None:
      done, state, metrics = 0, trainer.init(jax.random.key(config.seed)), {}
    else:
      changed = _config_changes((ckpt.metadata(done) or {}).get("config", "{}"), config)
      if changed:
        raise ValueError(f"{ckpt.directory} holds a run with another config ({changed}); "
                         "resume with the same config or use a new workdir")
      target = {"state": trainer.abstract_state(), "metrics": trainer.abstract_metrics(done)}
      restored = ckpt.restore(done, target=target)
      state, metrics = restored["state"], jax.device_get(restored["metrics"])
      if after_chunk is not None:  # in case the run was killed inside it
        after_chunk(done, state)
    end = trainer.num_updates if stop_at is None else min(stop_at, trainer.num_updates)
    while done < end:
      n = min(chunk_updates, end - done)
      state, chunk = trainer.train_chunk(state, n)
      chunk = jax.device_get(chunk)
      metrics = {k: np.concatenate([metrics[k], v]) if metrics else v for k, v in chunk.items()}
      done += n
      ckpt.save(done, {"state": state, "metrics": metrics},
                metadata={"config": fingerprint(config), "updates": done})
      if after_chunk is not None:
        after_chunk(done, state)
  return state, metrics
