"""One resumable runner for every learner: BC, end-to-end fine-tuning, MAE, PPO, navigation
imitation and PAD.

Every algorithm's `make_train(config, ...)` returns a trainer with

  config                     what the run is; a checkpoint must match it (minus `not_hashed`)
  num_updates                updates in a whole run (epochs, SGD steps, PPO updates, rounds)
  init(key) -> state         a fresh train state: one pytree, its PRNG key included
  train_chunk(state, n, *inputs) -> (state, metrics {name: [n]})
                             n updates as one jitted nested `lax.scan`, `state` donated
  abstract_state()           shapes, dtypes and shardings of the state   } restore
  abstract_metrics(n)        shapes and dtypes of n updates' metrics      } targets

and optionally `not_hashed` (config keys that never change a result; default ("log_every",))
and `inputs(start, end, chunk)`, an iterator of (n, inputs) for data fed from the host per chunk
(MAE's frames; the others keep their data on device).

`run` trains in chunks. With a `workdir` it saves the whole state and the metrics so far with
orbax after every chunk (or every `checkpoint_every` updates), and a restarted `run` continues
from the latest checkpoint to the same result, bit for bit on CPU; a checkpoint made under
another config is refused, naming what changed. Without one (a minute-long BC cell) nothing
is written; a workdir may be a URL (`gs://bucket/run`, through `etils.epath`). Callbacks run
after every chunk as `callback(Progress)`: model selection on validation (`SelectBest`),
metrics to a writer (`WriteMetrics`: TensorBoard, curve.json), logging. After a restore they
are called once more with `trained` 0 (a run killed inside a callback repeats it), so they
must be idempotent for a given `done`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import time
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import jax
import numpy as np
from etils import epath

from vcbench import files
from vcbench import metrics as metrics_lib
from vcbench import provenance
from vcbench.checkpoint import Checkpointer



@dataclasses.dataclass(frozen=True)
class Progress:
  """What a callback sees after a chunk: updates done, updates this chunk trained (0 right after
  a restore), the state and the metrics of every update so far."""
  done: int
  trained: int
  state: Any
  metrics: dict


Callback = Callable[[Progress], None]
# Fields added to the navigation configs after runs were checkpointed (dotted paths), with the
# value that reproduces those runs: left out at that value, so the runs still resume and keep
# their hashes.
ADDED_LATER = {"policy.finetune_encoder": False, "policy.encoder_lr": 1e-5,
               "policy.encoder_chunk": 64, "policy.embed_vectors": False, "objects": "boxes",
               # nav_bc's critic (off): under a nav job config and in the learner's own.
               "bc.critic": {"coef": 0.0, "gamma": 0.99, "gae_lambda": 0.95},
               "critic": {"coef": 0.0, "gamma": 0.99, "gae_lambda": 0.95}, "init_from": "",
               "bc.near_goal_weight": 0.0, "bc.near_goal_radius": 0.5,
               "near_goal_weight": 0.0, "near_goal_radius": 0.5, "policy.vector_fourier": 0,
               "bc.teacher": "expert", "teacher": "expert", "odometry": False,
               "policy.aux_goal_visible": False, "bc.aux_coef": 0.0, "aux_coef": 0.0,
               "policy.aux_categories": 0, "policy.aux_depth": 0}


def with_added_later(config, template):
  """`config` (e.g. read back from a file written before some fields existed) with each
  ADDED_LATER field that `template` (today's config of the same kind) has and `config` lacks set
  to the value that reproduces the old runs."""
  config = config.copy_and_resolve_references()
  for dotted, value in ADDED_LATER.items():
    *parents, leaf = dotted.split(".")
    node, have = config, template
    for name in parents:
      if name not in node or name not in have:
        break
      node, have = node[name], have[name]
    else:
      if leaf in have and leaf not in node:
        with node.unlocked():
          node[leaf] = value
  return config


def fingerprint(config, not_hashed: Sequence[str] = ("log_every",)) -> str:
  """The config as JSON, minus fields that do not change the result."""
  return json.dumps(provenance.hashable(config, not_hashed, ADDED_LATER), sort_keys=True,
                    default=str)


def _config_changes(saved: str, now: str) -> str:
  """'key: saved -> now' for every (flattened) config field that differs."""
  def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
      out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
    return out
  before, after = flat(json.loads(saved)), flat(json.loads(now))
  keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
  return ", ".join(f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys)


def chunks(start: int, end: int, chunk: int) -> Iterator[tuple[int, tuple]]:
  """(n, no inputs) for the chunks from `start` to `end` updates: the default `inputs`."""
  while start < end:
    n = min(chunk, end - start)
    yield n, ()
    start += n


def checkpoints_dir(workdir: str | pathlib.Path) -> epath.Path:
  """<workdir>/checkpoints; a URL workdir stays a URL (pathlib would fold `gs://` to `gs:/`)."""
  return files.as_path(workdir) / "checkpoints"


def run(trainer, workdir: Optional[str | pathlib.Path], chunk: int, *,
        key: Optional[jax.Array] = None, init: Optional[Callable[[jax.Array], Any]] = None,
        callbacks: Iterable[Callback] = (), stop_at: Optional[int] = None,
        checkpoint_every: Optional[int] = None, max_to_keep: Optional[int] = 2
        ) -> tuple[Any, dict[str, np.ndarray]]:
  """Trains `trainer` for its `num_updates` in chunks of `chunk` updates.

  workdir: checkpoints go to <workdir>/checkpoints (None: none; the run cannot resume).
  key: the run's key (default: jax.random.key(trainer.config.seed)).
  init: builds the first state from the key (default `trainer.init`; e.g. `trainer.init_from`
    to fine-tune given params).
  stop_at: return once this many updates are done (a job's time slot; a later call resumes).
  checkpoint_every: updates between checkpoints, rounded up to whole chunks (default: every
    chunk); the last chunk is always saved.
  Returns (state, metrics {name: np.ndarray [updates done]}).
  """
  if not isinstance(chunk, int) or chunk < 1:
    raise ValueError(f"chunk must be a positive int, got {chunk!r}")
  key = jax.random.key(trainer.config.seed) if key is None else key
  init = trainer.init if init is None else init
  callbacks = tuple(callbacks)
  every = chunk * math.ceil((checkpoint_every or chunk) / chunk)
  end = trainer.num_updates if stop_at is None else min(stop_at, trainer.num_updates)
  config = fingerprint(trainer.config, getattr(trainer, "not_hashed", ("log_every",)))
  ckpt = None if workdir is None else Checkpointer(
      checkpoints_dir(workdir), max_to_keep=max_to_keep)
  try:
    done, state, metrics = _start(trainer, ckpt, config, key, init)
    # Training time over every process that worked on the run (resumes included).
    wall0, t0 = (((ckpt.metadata(done) or {}).get("wall_seconds", 0.0)) if done else 0.0,
                 time.monotonic())
    if done:
      for callback in callbacks:  # In case the run was killed inside one.
        callback(Progress(done, 0, state, metrics))
    inputs = getattr(trainer, "inputs", None)
    for n, args in (inputs or chunks)(done, end, chunk):
      state, out = trainer.train_chunk(state, n, *args)
      out = jax.device_get(out)
      metrics = {k: np.concatenate([metrics[k], v]) if metrics else np.asarray(v)
                 for k, v in out.items()}
      done += n
      if ckpt is not None and (done % every == 0 or done == end):
        ckpt.save(done, {"state": state, "metrics": metrics},
                  metadata={"config": config, "updates": done,
                            "wall_seconds": round(wall0 + time.monotonic() - t0, 1)})
      for callback in callbacks:
        callback(Progress(done, n, state, metrics))
  finally:
    if ckpt is not None:
      ckpt.close()
  return state, metrics


def updates_done(workdir: str | pathlib.Path) -> int:
  """Updates of the run in `workdir` up to its latest checkpoint (0 without one)."""
  if not checkpoints_dir(workdir).is_dir():
    return 0
  with Checkpointer(checkpoints_dir(workdir), max_to_keep=None) as ckpt:
    return ckpt.latest_step() or 0


def wall_seconds(workdir: str | pathlib.Path) -> Optional[float]:
  """Seconds spent training the run in `workdir` up to its latest checkpoint, over all the
  processes that resumed it (None for checkpoints written before this was recorded)."""
  with Checkpointer(checkpoints_dir(workdir), max_to_keep=None) as ckpt:
    done = ckpt.latest_step()
    return (ckpt.metadata(done) or {}).get("wall_seconds") if done is not None else 0.0


def restore(trainer, workdir: str | pathlib.Path, strict: bool = True
            ) -> tuple[int, Any, dict[str, np.ndarray]]:
  """(updates done, state, metrics) of the latest checkpoint of `trainer`'s run in `workdir`,
  read only (a reader never deletes a checkpoint of a run still training). `strict=False`
  skips the config check: `trainer` only gives the state's structure."""
  directory = checkpoints_dir(workdir)
  if not directory.is_dir():
    raise FileNotFoundError(f"{directory}: no checkpoints")
  with Checkpointer(directory, max_to_keep=None) as ckpt:
    if ckpt.latest_step() is None:
      raise FileNotFoundError(f"{ckpt.directory} holds no complete checkpoint")
    config = fingerprint(trainer.config, getattr(trainer, "not_hashed", ("log_every",)))
    return _start(trainer, ckpt, config if strict else None, None, None)


def _start(trainer, ckpt, config: str, key, init):
  """(updates done, state, metrics so far): fresh, or from the latest checkpoint."""
  done = None if ckpt is None else ckpt.latest_step()
  if done is None:
    return 0, init(key), {}
  changed = config and _config_changes((ckpt.metadata(done) or {}).get("config", "{}"), config)
  if changed:
    raise ValueError(f"{ckpt.directory} holds a run with another config ({changed}); "
                     "resume with the same config or use a new workdir")
  target = {"state": trainer.abstract_state(), "metrics": trainer.abstract_metrics(done)}
  restored = ckpt.restore(done, target=target)
  return done, restored["state"], jax.device_get(restored["metrics"])


class SelectBest:
  """A `run` callback: validates after every chunk and keeps the best state (by `score`, a
  tuple or number compared with `>`: the earliest wins ties), so that a late collapse does not
  decide the result; test data, never seen in selection, gives the reported numbers.

  `evaluate(state) -> dict` scores a state; `keep(state)` is what is kept of it (host copy).
  With a `directory` the record (validation.json) and the kept params (an orbax checkpoint) are
  on disk, so selection resumes with the run; without one they live in memory.
  """

  def __init__(self, evaluate: Callable[[Any], dict], score: Callable[[dict], Any], *,
               keep: Callable[[Any], Any] = lambda state: state.params,
               directory: Optional[str | pathlib.Path] = None,
               log: Optional[Callable[[dict, Progress], None]] = None):
    self.evaluate, self.score, self.keep, self.log = evaluate, score, keep, log
    self.directory = None if directory is None else files.as_path(directory)
    self.record = {"history": [], "best": None}
    self._kept = None
    if self.directory is not None:
      self._ckpt = Checkpointer(self.directory / "params", max_to_keep=1)
      path = self.directory / "validation.json"
      if path.exists():
        self.record = json.loads(path.read_text())

  def __call__(self, progress: Progress) -> None:
    update = progress.done
    if any(h["update"] == update for h in self.record["history"]):
      return
    entry = {"update": update, **self.evaluate(progress.state)}
    best = self.record["best"]
    if best is None or self.score(entry) > self.score(best):
      kept = jax.device_get(self.keep(progress.state))
      if self.directory is None:
        self._kept = kept
      else:
        self._ckpt.save(update, kept)
      self.record["best"] = entry
    self.record["history"].append(entry)
    if self.log is not None:
      self.log(entry, progress)
    if self.directory is not None:
      text = json.dumps(self.record, indent=1)
      files.atomic_write(self.directory / "validation.json", lambda f: f.write(text.encode()))

  @property
  def best(self) -> Optional[dict]:
    return self.record["best"]

  def best_state(self, target=None):
    """What `keep` kept of the best state (from disk: `target` gives its structure)."""
    if self.best is None:
      raise ValueError("SelectBest: nothing validated yet")
    if self.directory is None:
      return self._kept
    return self._ckpt.restore(self.best["update"], target=target)


class WriteMetrics:
  """A `run` callback: the metrics of every update to `writer` as scalars `<prefix><name>` at
  step = the update's number (1 for the first), then a flush, all on the host after a chunk.

  Its first call writes every update the run has done (after a restore: those of the
  checkpoint, which a run killed after its checkpoint but before this callback has not
  written); later calls write the chunk's. Points already written are the writer's to skip
  (`metrics.TensorBoardWriter` skips the steps in its event files), so a killed and resumed run
  leaves each step once.
  """

  def __init__(self, writer: metrics_lib.MetricWriter, prefix: str = "train/"):
    self.writer, self.prefix = writer, prefix
    self._written = 0   # Updates this callback has written.

  def __call__(self, progress: Progress) -> None:
    for index in range(self._written, progress.done):
      self.writer.write_scalars(index + 1, {self.prefix + k: v[index]
                                            for k, v in progress.metrics.items()})
    self._written = max(self._written, progress.done)
    self.writer.flush()
