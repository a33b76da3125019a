"""End-to-end fine-tuning of a zoo encoder with its policy (VC-1 paper, section 6: the encoder
at a small learning rate, 1e-5, the policy at its own, 1e-3).

- `split_optimizer`: the optimiser split shared by BC here and PPO
  (`config.policy.finetune_encoder`): the encoder's 'params' collection gets its own transform,
  its other collections (frozen BatchNorm statistics) never change, the rest is the policy's.
- BC (`make_train`): CortexBench's BC loop (`bc`) with the frame embeddings computed inside
  every minibatch by the trainable encoder instead of cached: each sample's `history` frames
  (`bc.history_indices`, computed on host) are encoded (the encoder's `cls`), fused by
  `bc.flare`, concatenated with the proprioception and fed to `bc.BCPolicy`; the MSE's gradient
  reaches both. With encoder_lr=0 the run is `bc.make_train` on the frozen embeddings (same
  key, permutations and updates; equal up to XLA's batch-shape-dependent rounding of the
  embeddings, bit for bit in the CPU tests). The protocol around it (selection on validation
  rollouts, the test score) is `benchmarks.bc_protocol`'s.
- The policy part of the state is a `bc.Variables`, so `bc.make_policy_step` rolls it out
  unchanged; `embedder_of` wraps the fine-tuned weights as the `Embedder` they evaluate with.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

from vcbench import parallel
from vcbench.algos import bc
from vcbench.models import embedder as embedder_lib
from vcbench.models import remat, zoo
from vcbench.models.embedder import Embedder

ENCODER, POLICY, FROZEN = "encoder", "policy", "frozen"


def split_optimizer(policy_tx: optax.GradientTransformation,
                    encoder_tx: optax.GradientTransformation,
                    encoder_key: str) -> optax.GradientTransformation:
  """`optax.multi_transform` over a params dict holding an encoder's Flax variables under
  `encoder_key`: their 'params' collection by `encoder_tx`, their other collections
  (BatchNorm statistics, which the zoo encoders use in inference mode) left unchanged, every
  other top-level entry by `policy_tx` (so e.g. its gradient clipping sees only those)."""

  def labels(params):
    if encoder_key not in params:
      raise ValueError(f"split_optimizer: no encoder variables under {encoder_key!r}; the "
                       f"params hold {sorted(params)}")

    def label(path, _):
      if path[0].key != encoder_key:
        return POLICY
      return ENCODER if len(path) > 1 and path[1].key == "params" else FROZEN
    return jax.tree_util.tree_map_with_path(label, params)

  return optax.multi_transform(
      {POLICY: policy_tx, ENCODER: encoder_tx, FROZEN: optax.set_to_zero()}, labels)


def embedder_of(encoder: zoo.Encoder, name: str, params: Any) -> Embedder:
  """The `Embedder` of `encoder`'s cls with (fine-tuned) `params`. Its fingerprint names the
  function (entry, input size), not the weights: the Evaluator's compiled rollout is reused
  across evaluation epochs, the weights being its argument. Never cache embeddings under it."""
  return embedder_lib.of_encoder(name, encoder, params=params,
                                 fingerprint=f"{name}/{encoder.preprocess.size}/finetuned")


@struct.dataclass
class TrainState:
  policy: bc.Variables   # What `bc.make_policy_step` acts with.
  encoder: Any           # The encoder's variables, being fine-tuned.
  opt_state: Any         # `split_optimizer`'s state over {ENCODER: ..., POLICY: ...}; here, not
                         # in `policy`, so that rollouts are not handed the encoder's moments.
  step: jax.Array
  key: jax.Array         # The run's key, as `bc.TrainState.key`.


def features(embed: Callable, encoder_params, frames, windows, proprio, idx,
             chunk: int | None = None) -> jax.Array:
  """The BC input of samples `idx` [B]: their window frames (`windows` [T, H] indices into
  `frames` [T, S, S, 3]) embedded by `embed(params, obs)` (`chunk` frames at a time:
  `remat.apply_in_chunks`), flare-fused, then proprio [T, P] (or None) -> [B, H*D (+P)]."""
  win = windows[idx]
  emb = remat.apply_in_chunks(lambda p, x: embed(p, {"rgb": x}), encoder_params,
                              frames[win.reshape(-1)], chunk)
  x = bc.flare(emb.reshape(*win.shape, emb.shape[-1]))
  return x if proprio is None else jnp.concatenate([x, proprio[idx]], axis=-1)


def default_config() -> ml_collections.ConfigDict:
  """`bc.default_config` plus the encoder's learning rate and the frames per encoder pass."""
  c = bc.default_config()
  c.history = 3
  c.encoder_lr = 1e-5        # VC-1's; the policy keeps `lr`.
  c.encoder_chunk = 64       # Frames per encoder pass (`remat.apply_in_chunks`); 0: all at once.
  return c


class Trainer(bc.EpochTrainer):
  """BC with `encoder` fine-tuned, on demo `frames` [T, S, S, 3] uint8, `episode` [T],
  `proprio` [T, P] (or None) and `actions` [T, A]; the `runner` contract, one update = one
  epoch. Pass `frames` as a device array to avoid copying them."""

  def __init__(self, config, encoder: zoo.Encoder, frames, episode, proprio, actions,
               mesh=None):
    if config.encoder_lr < 0 or config.lr < 0:
      raise ValueError(f"learning rates must be >= 0, got lr={config.lr}, "
                       f"encoder_lr={config.encoder_lr}")
    if config.encoder_chunk < 0:
      raise ValueError(f"encoder_chunk must be a number of frames >= 0 (0: all), got "
                       f"{config.encoder_chunk}")
    num_samples = len(actions)
    proprio_dim = 0 if proprio is None else proprio.shape[-1]
    _check_data(frames, episode, proprio, actions, num_samples, proprio_dim)
    self.config, self.num_updates = config, int(config.epochs)
    self.encoder = encoder
    self.spec = embedder_of(encoder, "finetune", encoder.params)
    self.model = bc.BCPolicy(action_dim=actions.shape[1], hidden=tuple(config.hidden))
    self.tx = split_optimizer(optax.adam(config.lr), optax.adam(config.encoder_lr), ENCODER)
    self.act = bc.make_act(self.model)
    self._feat_dim = config.history * self.spec.dim + proprio_dim
    windows = jnp.asarray(bc.history_indices(np.asarray(episode), config.history))
    self.mesh = parallel.data_mesh() if mesh is None else mesh
    bc.check_batch(config.batch_size, num_samples, self.mesh)
    self.data = parallel.replicate((frames, windows, proprio, jnp.asarray(actions, jnp.float32)),
                                   self.mesh)
    rep = parallel.replicated(self.mesh)
    self._train = jax.jit(self._epochs, static_argnums=2, donate_argnums=0,
                          in_shardings=(rep, rep), out_shardings=(rep, rep))

  def init(self, key) -> TrainState:
    key, init_key = jax.random.split(key)   # The same key use as `bc.Trainer`.
    variables = bc.init_variables(self.model, init_key, self._feat_dim)
    # A copy: training donates the state, which must not delete the caller's encoder.
    enc = jax.tree.map(jnp.copy, self.encoder.params)
    return parallel.replicate(TrainState(
        policy=bc.Variables(params=variables["params"], batch_stats=variables["batch_stats"]),
        encoder=enc, opt_state=self.tx.init({ENCODER: enc, POLICY: variables["params"]}),
        step=jnp.zeros((), jnp.int32), key=key), self.mesh)

  def train_chunk(self, state: TrainState, num_epochs: int) -> tuple[TrainState, dict]:
    return self._train(state, self.data, int(num_epochs))

  def embedder(self, encoder_params, name: str) -> Embedder:
    """The `Embedder` to evaluate the policy with, holding fine-tuned `encoder_params`."""
    return embedder_of(self.encoder, name, encoder_params)

  def _sgd_step(self, state: TrainState, idx, data):
    frames, windows, proprio, actions = data
    chunk = self.config.encoder_chunk or None

    def loss_fn(trained, batch_stats):
      x = features(self.spec.fn, trained[ENCODER], frames, windows, proprio, idx, chunk)
      return bc.mse_loss(self.model, trained[POLICY], batch_stats, x, actions[idx])

    trained = {ENCODER: state.encoder, POLICY: state.policy.params}
    (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        trained, state.policy.batch_stats)
    updates, opt_state = self.tx.update(grads, state.opt_state, trained)
    trained = optax.apply_updates(trained, updates)
    policy = bc.Variables(params=trained[POLICY], batch_stats=stats)
    return state.replace(policy=policy, encoder=trained[ENCODER], opt_state=opt_state,
                         step=state.step + 1), loss

  def _epochs(self, state: TrainState, data, num_epochs: int):
    key, k = jax.random.split(state.key)
    state, losses = bc.run_epochs(lambda s, idx: self._sgd_step(s, idx, data),
                                  state.replace(key=key), k, num_epochs, len(data[3]),
                                  self.config.batch_size, self.mesh)
    return state, {"loss": losses}


def make_train(config, encoder: zoo.Encoder, frames, episode, proprio, actions,
               mesh=None) -> Trainer:
  """A fine-tuning BC trainer (`default_config`) of `encoder` on the demo arrays; minibatches
  split over `mesh`'s devices (default: all, of every process)."""
  return Trainer(config, encoder, frames, episode, proprio, actions, mesh)


def _check_data(frames, episode, proprio, actions, num_samples: int, proprio_dim: int):
  if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != jnp.uint8:
    raise ValueError(f"frames must be uint8 [T, S, S, 3], got {frames.dtype} {frames.shape}")
  lengths = {"frames": len(frames), "episode": len(episode), "actions": len(actions)}
  if proprio is not None:
    lengths["proprio"] = len(proprio)
  if set(lengths.values()) != {num_samples}:
    raise ValueError(f"every array needs num_samples = {num_samples} steps, got {lengths}")
  width = 0 if proprio is None else proprio.shape[-1]
  if width != proprio_dim:
    raise ValueError(f"proprio has width {width} (None: 0), the trainer's proprio_dim is "
                     f"{proprio_dim}")
