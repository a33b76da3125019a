"""Behaviour cloning on frozen embeddings, as CortexBench's MuJoCo track (eai-vc `train_loop`).

- Features: the last `history` frame embeddings fused "flare"-style (differences of
  consecutive embeddings, then the latest: [e1-e0, e2-e1, e2]); at an episode's start the
  first embedding is repeated; proprioception is concatenated after.
- Policy: mjrl's BatchNormMLP: BatchNorm on the input, then 256-256-256 ReLU, linear output.
- Loss MSE, Adam lr 1e-3, batch 256; an epoch is one pass over a fresh permutation. The
  whole run of epochs between two evaluations is one jitted `lax.scan` (epochs) over a
  `lax.scan` (minibatches) with the train state donated.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct


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


@struct.dataclass
class TrainState:
  params: Any
  batch_stats: Any
  opt_state: Any
  step: jax.Array


def init_variables(model: BCPolicy, key, feat_dim: int) -> dict:
  """The policy's {'params', 'batch_stats'} for inputs of width `feat_dim`."""
  return model.init(key, jnp.zeros((2, feat_dim), jnp.float32), train=False)


def mse_loss(model: BCPolicy, params, batch_stats, x, y):
  """-> (MSE of the policy's actions on a minibatch, updated BatchNorm statistics)."""
  pred, updates = model.apply({"params": params, "batch_stats": batch_stats}, x, train=True,
                              mutable=["batch_stats"])
  return jnp.mean((pred - y) ** 2), updates["batch_stats"]


def make_act(model: BCPolicy):
  """act(state, x) -> actions in [-1, 1]; `state` needs only `params` and `batch_stats`."""
  def act(state, x):
    out = model.apply({"params": state.params, "batch_stats": state.batch_stats}, x,
                      train=False)
    return jnp.clip(out, -1.0, 1.0)
  return act


def run_epochs(sgd_step, state, key, num_epochs: int, num_samples: int, batch_size: int):
  """`num_epochs` passes, each a `lax.scan` of `sgd_step(state, idx [batch]) -> (state, loss)`
  over the minibatches of a fresh permutation. Returns (state, mean loss per epoch [E])."""
  batch = min(batch_size, num_samples)
  steps_per_epoch = max(num_samples // batch, 1)

  def epoch(state, key):
    # The remainder of a permutation is dropped (fixed shapes under scan); a new permutation
    # every epoch means every sample is still used.
    perm = jax.random.permutation(key, num_samples)[: steps_per_epoch * batch]
    state, losses = jax.lax.scan(sgd_step, state, perm.reshape(steps_per_epoch, batch))
    return state, jnp.mean(losses)

  return jax.lax.scan(epoch, state, jax.random.split(key, num_epochs))


def make_train(*, feat_dim: int, action_dim: int, num_samples: int, hidden=(256, 256, 256),
               lr: float = 1e-3, batch_size: int = 256):
  """-> (init(key) -> TrainState, train(state, key, x, y, num_epochs) -> (state, losses[E]),
  act(state, x) -> actions). `train` is jitted with `num_epochs` static and the state donated.
  """
  model = BCPolicy(action_dim=action_dim, hidden=tuple(hidden))
  tx = optax.adam(lr)

  def init(key) -> TrainState:
    variables = init_variables(model, key, feat_dim)
    return TrainState(params=variables["params"], batch_stats=variables["batch_stats"],
                      opt_state=tx.init(variables["params"]), step=jnp.zeros((), jnp.int32))

  def sgd_step(state: TrainState, x, y):
    (loss, stats), grads = jax.value_and_grad(mse_loss, argnums=1, has_aux=True)(
        model, state.params, state.batch_stats, x, y)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    return TrainState(params=optax.apply_updates(state.params, updates), batch_stats=stats,
                      opt_state=opt_state, step=state.step + 1), loss

  @functools.partial(jax.jit, static_argnums=4, donate_argnums=0)
  def train(state, key, x, y, num_epochs: int):
    step = lambda s, idx: sgd_step(s, x[idx], y[idx])
    return run_epochs(step, state, key, num_epochs, num_samples, batch_size)

  return init, train, make_act(model)


def make_policy_step(embed: Callable[[Any, dict], jax.Array], act, history: int,
                     use_proprio: bool):
  """A `rollout.PolicyStep` that embeds each observation on device, keeps the last `history`
  embeddings, fuses them as in training and acts. Carry: {'hist': [N, H, D], 'fresh': bool}
  plus the frozen params it closes over: {'embed': ..., 'policy': TrainState}."""

  def step(carry, obs):
    emb = embed(carry["embed"], obs)
    fresh = carry["fresh"]
    shifted = jnp.concatenate([carry["hist"][:, 1:], emb[:, None]], axis=1)
    repeated = jnp.repeat(emb[:, None], history, axis=1)
    hist = jnp.where(fresh, repeated, shifted)
    x = flare(hist)
    if use_proprio:
      x = jnp.concatenate([x, obs["proprio"]], axis=-1)
    action = act(carry["policy"], x)
    return {**carry, "hist": hist, "fresh": jnp.zeros_like(fresh)}, action

  return step


def initial_carry(embed_params, policy_state, num_envs: int, dim: int, history: int):
  return {"embed": embed_params, "policy": policy_state,
          "hist": jnp.zeros((num_envs, history, dim), jnp.float32),
          "fresh": jnp.ones((), bool)}
