"""Behaviour cloning on frozen embeddings, as CortexBench's MuJoCo track (eai-vc `train_loop`).

- Features: the last `history` frame embeddings fused "flare"-style (differences of
  consecutive embeddings, then the latest: [e1-e0, e2-e1, e2]); at an episode's start the
  first embedding is repeated; proprioception is concatenated after.
- Policy: mjrl's BatchNormMLP: BatchNorm on the input, then 256-256-256 ReLU, linear output.
- Loss MSE, Adam lr 1e-3, batch 256; an epoch is one pass over a fresh permutation. The
  whole run of epochs between two evaluations is one jitted `lax.scan` (epochs) over a
  `lax.scan` (minibatches) with the train state donated: the trainer's `train_chunk`, one
  update = one epoch, run by `runner.run` (`benchmarks.bc_protocol.fit` selects the epoch).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

from vcbench import parallel


def flare(history: jax.Array) -> jax.Array:
  """[..., H, D] -> [..., H*D]: consecutive differences, then the latest embedding."""
  deltas = history[..., 1:, :] - history[..., :-1, :]
  fused = jnp.concatenate([deltas, history[..., -1:, :]], axis=-2)
  return fused.reshape(*history.shape[:-2], -1)


def history_indices(episode: np.ndarray, history: int) -> np.ndarray:
  """[T] episode index of every step of concatenated episodes -> [T, history] int32 step
  indices of each step's window, oldest first; steps before an episode's start repeat its
  first step (eai-vc's `max(t - k, 0)`)."""
  t = np.arange(len(episode))
  first = np.r_[0, np.flatnonzero(np.diff(episode)) + 1]
  start = first[np.searchsorted(first, t, side="right") - 1]
  idx = np.maximum(t[:, None] - np.arange(history - 1, -1, -1)[None, :], start[:, None])
  return idx.astype(np.int32)


def history_windows(emb: np.ndarray, episode: np.ndarray, history: int) -> np.ndarray:
  """[T, D] embeddings of concatenated episodes -> [T, history, D] (`history_indices`)."""
  return emb[history_indices(episode, history)]


def features(emb: np.ndarray, episode: np.ndarray, proprio: np.ndarray | None,
             history: int) -> np.ndarray:
  """The BC policy's input for every demo step."""
  fused = np.asarray(flare(jnp.asarray(history_windows(emb, episode, history))))
  return fused if proprio is None else np.concatenate([fused, proprio], axis=-1)


class BCPolicy(nn.Module):
  """mjrl's BatchNormMLP: input BatchNorm (torch momentum 0.1), ReLU MLP, linear head."""
  action_dim: int
  hidden: Sequence[int] = (256, 256, 256)

  @nn.compact
  def __call__(self, x, train: bool = False):
    x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)(x)
    for width in self.hidden:
      x = nn.relu(nn.Dense(width)(x))
    return nn.Dense(self.action_dim)(x)


def default_config() -> ml_collections.ConfigDict:
  """CortexBench's BC hyper-parameters (eai-vc's `mujoco_vc` BC config)."""
  c = ml_collections.ConfigDict()
  c.hidden = (256, 256, 256)
  c.lr = 1e-3
  c.batch_size = 256
  c.epochs = 100
  c.seed = 0
  return c


@struct.dataclass
class Variables:
  """What the policy acts with (`make_act`)."""
  params: Any
  batch_stats: Any


@struct.dataclass
class TrainState:
  params: Any
  batch_stats: Any
  opt_state: Any
  step: jax.Array
  key: jax.Array     # The run's key; every chunk of epochs splits its draws off it.

  def variables(self) -> Variables:
    return Variables(params=self.params, batch_stats=self.batch_stats)


def init_variables(model: BCPolicy, key, feat_dim: int) -> dict:
  """The policy's {'params', 'batch_stats'} for inputs of width `feat_dim`."""
  return model.init(key, jnp.zeros((2, feat_dim), jnp.float32), train=False)


def mse_loss(model: BCPolicy, params, batch_stats, x, y):
  """-> (MSE of the policy's actions on a minibatch, updated BatchNorm statistics)."""
  pred, updates = model.apply({"params": params, "batch_stats": batch_stats}, x, train=True,
                              mutable=["batch_stats"])
  return jnp.mean((pred - y) ** 2), updates["batch_stats"]


def make_act(model: BCPolicy):
  """act(variables, x) -> actions in [-1, 1] (`variables`: anything with `params` and
  `batch_stats`, e.g. `Variables` or a `TrainState`)."""
  def act(state, x):
    out = model.apply({"params": state.params, "batch_stats": state.batch_stats}, x,
                      train=False)
    return jnp.clip(out, -1.0, 1.0)
  return act


def run_epochs(sgd_step, state, key, num_epochs: int, num_samples: int, batch_size: int,
               mesh=None):
  """`num_epochs` passes, each a `lax.scan` of `sgd_step(state, idx [batch]) -> (state, loss)`
  over the minibatches of a fresh permutation. Returns (state, mean loss per epoch [E]).

  mesh: the minibatch rows are split over its devices (each computes its rows' forward and
  backward; the loss mean, hence the gradient, is all-reduced), the data and state whole on
  every device."""
  batch = min(batch_size, num_samples)
  steps_per_epoch = max(num_samples // batch, 1)

  def epoch(state, key):
    # The remainder of a permutation is dropped (fixed shapes under scan); a new permutation
    # every epoch means every sample is still used.
    perm = jax.random.permutation(key, num_samples)[: steps_per_epoch * batch]
    perm = perm.reshape(steps_per_epoch, batch)
    if mesh is not None:
      perm = parallel.constrain_batch(perm, mesh, axis=1)
    state, losses = jax.lax.scan(sgd_step, state, perm)
    return state, jnp.mean(losses)

  return jax.lax.scan(epoch, state, jax.random.split(key, num_epochs))


def check_batch(batch_size: int, num_samples: int, mesh) -> None:
  """The minibatch (`batch_size`, or every sample when there are fewer) splits over the mesh."""
  parallel.check_divisible(min(batch_size, num_samples), mesh,
                           f"the BC minibatch (batch_size {batch_size}, {num_samples} samples)")


class EpochTrainer:
  """The `runner` contract's shape queries for a trainer whose update is one epoch and whose
  metrics are that epoch's mean loss; subclasses give `init` and `train_chunk`."""

  def abstract_state(self):
    shapes = jax.eval_shape(self.init, jax.random.key(0))
    mesh = getattr(self, "mesh", None)
    if mesh is None:
      return shapes
    rep = parallel.replicated(mesh)   # Restored whole onto every device, as `init` places it.
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=rep), shapes)

  def abstract_metrics(self, n: int) -> dict:
    return {"loss": jax.ShapeDtypeStruct((n,), jnp.float32)}


class Trainer(EpochTrainer):
  """BC on fixed features `x` [N, F] and actions `y` [N, A] (device arrays, arguments of the
  jitted chunk, not constants in it); the `runner` contract, one update = one epoch."""

  def __init__(self, config, x, y, mesh=None):
    self.config, self.num_updates = config, int(config.epochs)
    if np.ndim(x) != 2 or np.ndim(y) != 2 or len(x) != len(y):
      raise ValueError(f"BC: features [N, F] and actions [N, A] of one length expected, got "
                       f"{np.shape(x)} and {np.shape(y)}")
    self.mesh = parallel.data_mesh() if mesh is None else mesh
    check_batch(config.batch_size, len(x), self.mesh)
    self.x, self.y = parallel.replicate((jnp.asarray(x, jnp.float32),
                                         jnp.asarray(y, jnp.float32)), self.mesh)
    self.model = BCPolicy(action_dim=self.y.shape[1], hidden=tuple(config.hidden))
    self.tx = optax.adam(config.lr)
    self.act = make_act(self.model)
    rep = parallel.replicated(self.mesh)
    self._train = jax.jit(self._epochs, static_argnums=3, donate_argnums=0,
                          in_shardings=(rep, rep, rep), out_shardings=(rep, rep))

  def init(self, key) -> TrainState:
    key, init_key = jax.random.split(key)
    variables = init_variables(self.model, init_key, self.x.shape[1])
    return parallel.replicate(TrainState(
        params=variables["params"], batch_stats=variables["batch_stats"],
        opt_state=self.tx.init(variables["params"]), step=jnp.zeros((), jnp.int32), key=key),
        self.mesh)

  def train_chunk(self, state: TrainState, num_epochs: int) -> tuple[TrainState, dict]:
    return self._train(state, self.x, self.y, int(num_epochs))

  def _sgd_step(self, state: TrainState, x, y):
    (loss, stats), grads = jax.value_and_grad(mse_loss, argnums=1, has_aux=True)(
        self.model, state.params, state.batch_stats, x, y)
    updates, opt_state = self.tx.update(grads, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates), batch_stats=stats,
                         opt_state=opt_state, step=state.step + 1), loss

  def _epochs(self, state: TrainState, x, y, num_epochs: int):
    key, k = jax.random.split(state.key)
    step = lambda s, idx: self._sgd_step(s, x[idx], y[idx])
    state, losses = run_epochs(step, state.replace(key=key), k, num_epochs, len(x),
                               self.config.batch_size, self.mesh)
    return state, {"loss": losses}


def make_train(config, x, y, mesh=None) -> Trainer:
  """A BC trainer (`default_config`) on features `x` and actions `y`; minibatches split over
  `mesh`'s devices (default: all devices, of every process)."""
  return Trainer(config, x, y, mesh)


def make_policy_step(embed: Callable[[Any, dict], jax.Array], act, history: int,
                     use_proprio: bool):
  """A `rollout.PolicyStep` that embeds each observation on device, keeps the last `history`
  embeddings, fuses them as in training and acts. Carry: {'hist': [N, H, D], 'fresh': [N] bool}
  plus the frozen params it closes over: {'embed': ..., 'policy': Variables}."""

  def step(carry, obs):
    emb = embed(carry["embed"], obs)
    fresh = carry["fresh"][:, None, None]
    shifted = jnp.concatenate([carry["hist"][:, 1:], emb[:, None]], axis=1)
    repeated = jnp.repeat(emb[:, None], history, axis=1)
    hist = jnp.where(fresh, repeated, shifted)
    x = flare(hist)
    if use_proprio:
      x = jnp.concatenate([x, obs["proprio"]], axis=-1)
    action = act(carry["policy"], x)
    return {**carry, "hist": hist, "fresh": jnp.zeros_like(carry["fresh"])}, action

  return step


def initial_carry(embed_params, policy_state, num_envs: int, dim: int, history: int):
  return {"embed": embed_params, "policy": policy_state,
          "hist": jnp.zeros((num_envs, history, dim), jnp.float32),
          "fresh": jnp.ones((num_envs,), bool)}


def restart(carry, first: jax.Array):
  """The carry with the envs flagged in `first` ([N] bool) starting a new episode: their
  history is refilled from their next frame (an episode stream's refilled slots)."""
  return {**carry, "fresh": carry["fresh"] | first}
