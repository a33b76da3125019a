"""End-to-end fine-tuning of a zoo encoder with its policy (VC-1 paper, section 6: the encoder
at a small learning rate, 1e-5, the policy at its own, 1e-3).

- `split_optimizer`: the optimiser split shared by BC here and PPO
  (`config.policy.finetune_encoder`): the encoder's 'params' collection gets its own transform,
  its other collections (frozen BatchNorm statistics) never change, the rest is the policy's.
- BC (`make_train`, `fit`, `run_cell`): CortexBench's BC loop (`bc`, `bc_protocol`) with the
  frame embeddings computed inside every minibatch by the trainable encoder instead of cached:
  each sample's `history` frames (`bc.history_indices`, computed on host) are encoded (the
  encoder's `cls`), fused by `bc.flare`, concatenated with the proprioception and fed to
  `bc.BCPolicy`; the MSE's gradient reaches both. With encoder_lr=0 the run is
  `bc.make_train` on the frozen embeddings (same key, permutations and updates; equal up to
  XLA's batch-shape-dependent rounding of the embeddings, bit for bit in the CPU tests).
- The policy part of the state is a `bc.TrainState`, so `bc.make_policy_step` and the
  `bc_protocol.Evaluator` roll it out unchanged; `embedder_of` wraps the fine-tuned weights
  as the `Embedder` they evaluate with.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from vcbench.algos import bc
from vcbench.benchmarks import bc_protocol
from vcbench.data.demos import Demos, episode_seeds
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
  policy: bc.TrainState   # What `bc.make_policy_step` acts with; its opt_state is ().
  encoder: Any            # The encoder's variables, being fine-tuned.
  opt_state: Any          # `split_optimizer`'s state over {ENCODER: ..., POLICY: ...}.
  # The shared Adam state lives here, not in `policy`, so that rollouts are not handed the
  # encoder's moments.


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


def make_train(*, encoder: zoo.Encoder, action_dim: int, proprio_dim: int, history: int,
               num_samples: int, hidden: Sequence[int] = (256, 256, 256),
               policy_lr: float = 1e-3, encoder_lr: float = 1e-5, batch_size: int = 256,
               encoder_chunk: int | None = 64):
  """-> (init(key) -> TrainState,
         train(state, key, frames [T, S, S, 3] uint8, episode [T], proprio [T, P] or None,
               actions [T, A], num_epochs) -> (state, losses [E]),
         act(policy_state, x) -> actions).

  `train` runs one jitted `lax.scan` over epochs of a `lax.scan` over minibatches with the
  state donated (as `bc.make_train`); pass `frames` as a device array to avoid copying them
  in every call. proprio_dim=0 means no proprio (pass None). encoder_chunk: frames per
  encoder pass (`remat.apply_in_chunks`; None: the minibatch's batch_size x history at once).
  """
  if encoder_lr < 0 or policy_lr < 0:
    raise ValueError(f"learning rates must be >= 0, got policy_lr={policy_lr}, "
                     f"encoder_lr={encoder_lr}")
  if encoder_chunk is not None and encoder_chunk < 1:
    raise ValueError(f"encoder_chunk must be a positive number of frames or None, got "
                     f"{encoder_chunk}")
  spec = embedder_of(encoder, "finetune", encoder.params)
  model = bc.BCPolicy(action_dim=action_dim, hidden=tuple(hidden))
  tx = split_optimizer(optax.adam(policy_lr), optax.adam(encoder_lr), ENCODER)

  def init(key) -> TrainState:
    variables = bc.init_variables(model, key, history * spec.dim + proprio_dim)
    # A copy: training donates the state, which must not delete the caller's encoder.
    enc = jax.tree.map(jnp.copy, encoder.params)
    return TrainState(
        policy=bc.TrainState(params=variables["params"], batch_stats=variables["batch_stats"],
                             opt_state=(), step=jnp.zeros((), jnp.int32)),
        encoder=enc, opt_state=tx.init({ENCODER: enc, POLICY: variables["params"]}))

  def sgd_step(state: TrainState, idx, data):
    frames, windows, proprio, actions = data

    def loss_fn(trained, batch_stats):
      x = features(spec.fn, trained[ENCODER], frames, windows, proprio, idx, encoder_chunk)
      return bc.mse_loss(model, trained[POLICY], batch_stats, x, actions[idx])

    trained = {ENCODER: state.encoder, POLICY: state.policy.params}
    (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        trained, state.policy.batch_stats)
    updates, opt_state = tx.update(grads, state.opt_state, trained)
    trained = optax.apply_updates(trained, updates)
    policy = state.policy.replace(params=trained[POLICY], batch_stats=stats,
                                  step=state.policy.step + 1)
    return TrainState(policy=policy, encoder=trained[ENCODER], opt_state=opt_state), loss

  @functools.partial(jax.jit, static_argnums=3, donate_argnums=0)
  def train_jit(state, key, data, num_epochs: int):
    return bc.run_epochs(lambda s, idx: sgd_step(s, idx, data), state, key, num_epochs,
                         num_samples, batch_size)

  def train(state, key, frames, episode, proprio, actions, num_epochs: int):
    _check_data(frames, episode, proprio, actions, num_samples, proprio_dim)
    windows = jnp.asarray(bc.history_indices(np.asarray(episode), history))
    return train_jit(state, key, (frames, windows, proprio, actions), num_epochs)

  return init, train, bc.make_act(model)


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
    raise ValueError(f"proprio has width {width} (None: 0), make_train's proprio_dim is "
                     f"{proprio_dim}")


def fit(protocol: bc_protocol.Protocol, evaluator: bc_protocol.Evaluator,
        encoder: zoo.Encoder, name: str, demos: Demos, seed: int, encoder_lr: float = 1e-5,
        log: Callable[[str], Any] = print, encoder_chunk: int | None = 64
        ) -> tuple[bc_protocol.Fitted, Embedder]:
  """`bc_protocol.fit` with the encoder fine-tuned (policy lr: protocol.lr; encoder_chunk:
  see `make_train`). Returns the best validation epoch's policy (`Fitted.state`, a
  `bc.TrainState`) and its encoder, as the `Embedder` to evaluate it with."""
  p = protocol
  proprio = jnp.asarray(demos.proprio, jnp.float32) if p.use_proprio else None
  num_samples = len(demos.actions)
  init, train, act = make_train(
      encoder=encoder, action_dim=demos.actions.shape[1],
      proprio_dim=0 if proprio is None else proprio.shape[1], history=p.history,
      num_samples=num_samples, hidden=p.hidden, policy_lr=p.lr, encoder_lr=encoder_lr,
      batch_size=p.batch_size, encoder_chunk=encoder_chunk)
  # The same key use as bc_protocol.fit: at encoder_lr=0 both give the same policy.
  key = jax.random.key(seed)
  key, init_key = jax.random.split(key)
  data = (jnp.asarray(demos.frames), demos.episode, proprio,
          jnp.asarray(demos.actions, jnp.float32))
  val_seeds = episode_seeds("val", p.val_episodes)

  def validate(state: TrainState) -> float:
    return evaluator.success(embedder_of(encoder, name, state.encoder), act, state.policy,
                             val_seeds)["success_rate"]

  (policy, params), summary = bc_protocol.train_and_select(
      p, init(init_key), key, lambda state, k, n: train(state, k, *data, n), validate, log,
      keep=lambda state: (state.policy, state.encoder))
  fitted = bc_protocol.Fitted(act=act, state=policy, num_samples=num_samples, **summary)
  return fitted, embedder_of(encoder, name, params)


def run_cell(protocol: bc_protocol.Protocol, evaluator: bc_protocol.Evaluator,
             encoder: zoo.Encoder, name: str, demos: Demos, seed: int,
             encoder_lr: float = 1e-5, log: Callable[[str], Any] = print,
             encoder_chunk: int | None = 64) -> dict:
  """`bc_protocol.run_cell` with the encoder fine-tuned: the cell's metrics for the store."""
  t0 = time.time()
  fitted, embedder = fit(protocol, evaluator, encoder, name, demos, seed, encoder_lr, log,
                         encoder_chunk)
  return bc_protocol.score(protocol, evaluator, embedder, fitted, demos, t0)
