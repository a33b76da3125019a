"""Training a task decoder on cached, frozen PVR features (G-VUE's probing recipe).

The PVR never runs here: its features are computed once per split and passed in as device
arrays, so a whole chunk of epochs is one jitted `lax.scan` (epochs) over a `lax.scan`
(minibatches) with the train state donated -- the `runner` contract, one update = one epoch.

Optimiser as G-VUE trains every decoder: AdamW (b1 0.9, b2 0.99, weight decay 1e-2), the
learning rate warmed up linearly over the first 2% of the steps to 1e-4 and decayed linearly to 0
over the rest, the gradient's global norm clipped to 1. Dropout draws from the run's key.

The task supplies the model and its loss: `loss_fn(model, variables, batch, key) ->
(loss, updated mutable collections)` where `batch` is the dict of data arrays indexed by one
minibatch's example indices (`Trainer.data`).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import struct

from vcbench.algos import bc

LossFn = Callable[[nn.Module, dict, dict, jax.Array], tuple[jax.Array, dict]]


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.lr = 1e-4
  c.b1 = 0.9
  c.b2 = 0.99
  c.weight_decay = 1e-2
  c.warmup_fraction = 0.02
  c.clip_norm = 1.0
  c.batch_size = 32
  c.epochs = 10
  return c


def schedule(lr: float, total_steps: int, warmup_fraction: float) -> optax.Schedule:
  """Linear warm-up over `warmup_fraction` of the steps to `lr`, then linear decay to 0."""
  warmup = max(int(round(warmup_fraction * total_steps)), 1)
  return optax.join_schedules(
      [optax.linear_schedule(0.0, lr, warmup),
       optax.linear_schedule(lr, 0.0, max(total_steps - warmup, 1))], [warmup])


def optimizer(config, total_steps: int) -> optax.GradientTransformation:
  return optax.chain(
      optax.clip_by_global_norm(config.clip_norm),
      optax.adamw(schedule(config.lr, total_steps, config.warmup_fraction), b1=config.b1,
                  b2=config.b2, weight_decay=config.weight_decay))


def steps_per_epoch(num_samples: int, batch_size: int) -> int:
  return max(num_samples // min(batch_size, num_samples), 1)


@struct.dataclass
class TrainState:
  params: Any
  mutable: Any          # Collections the loss updates (BatchNorm statistics), or {}.
  opt_state: Any
  step: jax.Array
  key: jax.Array

  def variables(self) -> dict:
    return {"params": self.params, **self.mutable}


class Trainer(bc.EpochTrainer):
  """A decoder trained on `data` ({name: array [N, ...]}, all indexed by example)."""

  def __init__(self, config, model: nn.Module, init_batch: Mapping[str, Any],
               loss_fn: LossFn, data: Mapping[str, Any]):
    sizes = {k: len(v) for k, v in data.items()}
    if len(set(sizes.values())) != 1:
      raise ValueError(f"decoder training: every data array needs the same number of examples, "
                       f"got {sizes}")
    self.config, self.model, self.loss_fn = config, model, loss_fn
    self.data = {k: jnp.asarray(v) for k, v in data.items()}
    self.num_samples = next(iter(sizes.values()))
    self.num_updates = int(config.epochs)
    total = self.num_updates * steps_per_epoch(self.num_samples, config.batch_size)
    self.tx = optimizer(config, total)
    self._init_batch = init_batch
    self._train = jax.jit(self._epochs, static_argnums=2, donate_argnums=0)

  def init(self, key) -> TrainState:
    key, init_key = jax.random.split(key)
    variables = self.model.init({"params": init_key, "dropout": init_key},
                                **self._init_batch, train=False)
    params = variables.pop("params")
    return TrainState(params=params, mutable=dict(variables),
                      opt_state=self.tx.init(params), step=jnp.zeros((), jnp.int32), key=key)

  def train_chunk(self, state: TrainState, num_epochs: int) -> tuple[TrainState, dict]:
    return self._train(state, self.data, int(num_epochs))

  def _sgd_step(self, state: TrainState, batch: dict):
    key, dropout_key = jax.random.split(jax.random.fold_in(state.key, state.step))

    def loss(params):
      return self.loss_fn(self.model, {"params": params, **state.mutable}, batch, dropout_key)

    (value, mutable), grads = jax.value_and_grad(loss, has_aux=True)(state.params)
    updates, opt_state = self.tx.update(grads, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates),
                         mutable={**state.mutable, **mutable}, opt_state=opt_state,
                         step=state.step + 1), value

  def _epochs(self, state: TrainState, data: dict, num_epochs: int):
    key, k = jax.random.split(state.key)
    step = lambda s, idx: self._sgd_step(s, {name: v[idx] for name, v in data.items()})
    state, losses = bc.run_epochs(step, state.replace(key=key), k, num_epochs, self.num_samples,
                                  self.config.batch_size)
    return state, {"loss": losses}


def make_train(config, model: nn.Module, init_batch: Mapping[str, Any], loss_fn: LossFn,
               data: Mapping[str, Any]) -> Trainer:
  """A decoder trainer (`default_config`): `model.init(**init_batch, train=False)` builds the
  variables; `loss_fn` scores a minibatch of `data`."""
  return Trainer(config, model, init_batch, loss_fn, data)


def predict(apply: Callable[[dict, dict], Any], variables: dict, data: Mapping[str, Any],
            batch_size: int = 64) -> Any:
  """`apply(variables, batch)` over `data` in batches of `batch_size` (the last one padded by
  repeating, so one compiled shape serves every batch), outputs concatenated."""
  data = {k: jnp.asarray(v) for k, v in data.items()}
  n = len(next(iter(data.values())))
  fn = jax.jit(lambda variables, data, idx: apply(
      variables, {k: v[idx] for k, v in data.items()}))
  outs = []
  for start in range(0, n, batch_size):
    out = fn(variables, data, jnp.minimum(jnp.arange(start, start + batch_size), n - 1))
    outs.append(jax.tree.map(lambda x: x[: min(batch_size, n - start)], out))
  return jax.tree.map(lambda *xs: jnp.concatenate(xs), *outs)
