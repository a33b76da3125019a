"""CortexBench's few-shot BC protocol for one cell (task x PVR x seed), on a host-bridged sim.

Train BC on cached frozen embeddings of the demos; every `eval_every` epochs roll the policy
out on the validation episodes (simulator on host; preprocessing, encoder and policy on device;
one jitted `lax.scan` per batch of episodes); score the best validation epoch on the test
episodes. eai-vc picks the best epoch on the test rollouts themselves; vcbench selects on
held-out validation seeds and reports test (DESIGN.md).

Success is MetaWorld's `success` flag reached at any step within the horizon, and an episode
stops there (MetaWorld's own evaluation convention; eai-vc reads the flag at the last of 500
steps, which also counts policies that succeed and then undo it as failures).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.algos import bc
from vcbench.data.demos import Demos, episode_seeds
from vcbench.envs import host, rollout
from vcbench.models.embedder import Embedder


@dataclasses.dataclass(frozen=True)
class Protocol:
  epochs: int = 100
  eval_every: int = 5
  val_episodes: int = 10
  test_episodes: int = 25
  horizon: int = 500
  history: int = 3
  use_proprio: bool = True
  batch_size: int = 256
  lr: float = 1e-3
  hidden: tuple[int, ...] = (256, 256, 256)
  eval_envs: int = 10       # Episodes simulated side by side in one rollout.
  num_workers: int = 0      # Simulator worker processes (0: in the main process).


class Evaluator:
  """Rollouts of BC policies: one host env batch (for one task at a time, `switch` moves on),
  one compiled rollout per embedder (policy params are arguments, so every evaluation epoch,
  seed and task reuses it)."""

  def __init__(self, make_sim: Callable[[], host.HostSim], protocol: Protocol):
    self.protocol = protocol
    self.env = host.HostEnv(self._batch(make_sim))
    self._compiled: dict[str, Callable] = {}

  def _batch(self, make_sim) -> host.SimBatch:
    p = self.protocol
    return host.SimBatch(make_sim, p.eval_envs, horizon=p.horizon, num_workers=p.num_workers)

  def switch(self, make_sim: Callable[[], host.HostSim]) -> None:
    """Moves to another task with the same observation shapes, keeping compiled rollouts."""
    self.env.rebind(self._batch(make_sim)).close()

  def _rollout_fn(self, embedder: Embedder, act):
    if embedder.fingerprint not in self._compiled:
      p = self.protocol
      step = bc.make_policy_step(embedder.fn, act, p.history, p.use_proprio)
      fn = lambda carry, seeds: rollout.rollout(self.env, step, carry, seeds, p.horizon)[1]
      self._compiled[embedder.fingerprint] = jax.jit(fn)
    return self._compiled[embedder.fingerprint]

  def episodes(self, embedder: Embedder, act, policy_state, seeds: list[int]) -> dict:
    """Per-episode `success` (bool) and `length` over `seeds`, in order (the last batch padded
    with idle slots)."""
    n = self.env.num_envs
    fn = self._rollout_fn(embedder, act)
    succ, lengths = [], []
    for start in range(0, len(seeds), n):
      chunk = list(seeds[start:start + n])
      chunk += [-1] * (n - len(chunk))  # Idle slots: never stepped or rendered.
      carry = bc.initial_carry(embedder.params, policy_state, n, embedder.dim,
                               self.protocol.history)
      traj = fn(carry, jnp.asarray(chunk, jnp.int32))
      keep = min(n, len(seeds) - start)
      succ.append(np.asarray(traj.success[-1])[:keep])
      lengths.append(np.asarray(traj.active).sum(0)[:keep])
    return {"success": np.concatenate(succ), "length": np.concatenate(lengths)}

  def success(self, embedder: Embedder, act, policy_state, seeds: list[int]) -> dict:
    """Success rate and mean episode length over `seeds`."""
    out = self.episodes(embedder, act, policy_state, seeds)
    return {"success_rate": float(out["success"].mean()),
            "mean_length": float(out["length"].mean())}

  def close(self):
    self.env.close()


@dataclasses.dataclass
class Fitted:
  """A BC policy trained on one cell's demos, at its best validation epoch."""
  act: Callable
  state: Any
  val_score: float
  best_epoch: int
  train_loss: float
  val_curve: list
  num_samples: int


def fit(protocol: Protocol, evaluator: Evaluator, embedder: Embedder, demos: Demos,
        emb: np.ndarray, seed: int, log: Callable[[str], Any] = print) -> Fitted:
  """Trains BC on the demos' embeddings; keeps the state of the best validation epoch."""
  p = protocol
  proprio = demos.proprio if p.use_proprio else None
  x = bc.features(emb, demos.episode, proprio, p.history).astype(np.float32)
  y = demos.actions.astype(np.float32)
  init, train, act = bc.make_train(feat_dim=x.shape[1], action_dim=y.shape[1],
                                   num_samples=len(x), hidden=p.hidden, lr=p.lr,
                                   batch_size=p.batch_size)
  key = jax.random.key(seed)
  key, init_key = jax.random.split(key)
  xj, yj = jnp.asarray(x), jnp.asarray(y)
  val_seeds = episode_seeds("val", p.val_episodes)
  best_state, summary = train_and_select(
      p, init(init_key), key, lambda state, k, n: train(state, k, xj, yj, n),
      lambda state: evaluator.success(embedder, act, state, val_seeds)["success_rate"], log)
  return Fitted(act=act, state=best_state, num_samples=len(x), **summary)


def train_and_select(protocol: Protocol, state, key, train_epochs: Callable,
                     validate: Callable[[Any], float], log: Callable[[str], Any] = print,
                     keep: Callable[[Any], Any] = lambda state: state) -> tuple[Any, dict]:
  """Trains `protocol.epochs` epochs, validating every `eval_every`.

  train_epochs(state, key, n) -> (state, losses [n]) trains n more epochs (it may donate
  `state`); validate(state) -> the validation success rate. Returns (the host copy of
  `keep(state)` at the best validation epoch, the earliest on ties; the `Fitted` fields
  val_score, best_epoch, train_loss (the last epoch's) and val_curve).
  """
  curve, best, best_state, loss, trained = [], -1.0, None, float("nan"), 0
  for done_epochs in _eval_points(protocol.epochs, protocol.eval_every):
    key, k = jax.random.split(key)
    state, losses = train_epochs(state, k, done_epochs - trained)
    trained = done_epochs
    loss = float(losses[-1])
    val = validate(state)
    curve.append([done_epochs, val])
    log(f"  epoch {done_epochs:3d}  loss {loss:.4f}  val success {100 * val:5.1f}%")
    if val > best:  # The earliest epoch wins ties.
      best, best_epoch = val, done_epochs
      best_state = jax.device_get(keep(state))
  return best_state, {"val_score": 100.0 * best, "best_epoch": best_epoch, "train_loss": loss,
                      "val_curve": curve}


def run_cell(protocol: Protocol, evaluator: Evaluator, embedder: Embedder, demos: Demos,
             emb: np.ndarray, seed: int, log: Callable[[str], Any] = print) -> dict:
  """Trains and evaluates one (task, PVR, seed) cell; returns its metrics for the store."""
  t0 = time.time()
  fitted = fit(protocol, evaluator, embedder, demos, emb, seed, log)
  return score(protocol, evaluator, embedder, fitted, demos, t0)


def score(protocol: Protocol, evaluator: Evaluator, embedder: Embedder, fitted: Fitted,
          demos: Demos, t0: float) -> dict:
  """A fitted cell's metrics for the store: its test success, fit summary and the time since
  `t0`."""
  p = protocol
  test = evaluator.success(embedder, fitted.act, fitted.state,
                           episode_seeds("test", p.test_episodes))
  return {"score": 100.0 * test["success_rate"], "success_rate": test["success_rate"],
          "val_score": fitted.val_score, "best_epoch": fitted.best_epoch,
          "episodes": p.test_episodes, "mean_length": test["mean_length"],
          "train_loss": fitted.train_loss, "val_curve": fitted.val_curve,
          "num_demos": demos.num_episodes, "num_samples": fitted.num_samples,
          "expert_success_rate": demos.meta["expert_success_rate"],
          "seconds": time.time() - t0}


def _eval_points(epochs: int, every: int) -> list[int]:
  """Epoch counts after which validation runs: every `every`, and always the last."""
  points = list(range(every, epochs + 1, every)) if every > 0 else []
  if not points or points[-1] != epochs:
    points.append(epochs)
  return points

