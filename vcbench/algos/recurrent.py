"""What every learner of a recurrent navigation policy shares (PPO, imitation), fully jitted.

    trainer = recurrent.Trainer(config, env, algorithm)      # algorithm: ppo.PPO, nav_bc.BC
    state, metrics = trainer.train_chunk(trainer.init(key), n)  # or runner.run(trainer, ...)

The trainer builds the policy (`NavPolicy`, with a SimpleCNN or a zoo PVR, frozen or
fine-tuned), its optimiser, the device mesh and the shardings, and runs chunks of updates as one
jitted `lax.scan`; the algorithm supplies only its `update(trainer, state, env, frozen)`, built
from the pieces here (`rollout`, `minibatches`, `sgd_epochs`, `finished_episode_means`).

Design:
- The env is an argument of the jitted functions (it is a pytree), never a closure, so its
  data (scene pools) is not baked into the program as constants. The frozen PVR's variables
  are an argument too, kept outside the train state: they are not trained, not in the optimiser
  state and not checkpointed (the zoo reloads them).
- Fine-tuning (`policy.finetune_encoder`, VC-1's end-to-end adaptation): the zoo encoder's
  variables are instead the policy's param `nav_policy.PVR_PARAM`, initialised from the loaded
  ones: trained with their own Adam lr (`policy.encoder_lr`, annealed like `lr`; outside the
  policy's gradient clip, so a big encoder's gradient norm does not shrink the policy's steps),
  replicated and checkpointed with the rest of the params; it runs `policy.encoder_chunk`
  frames at a time, rematerialised in the backward pass.
- Episode ends: the env auto-resets, `start` marks the first obs of an episode; the policy
  zeroes its recurrent state there.
- Data parallel: a 1-D mesh over all devices. The per-env part of the state (env state,
  recurrent state, previous action, start) is sharded along the env axis; params, optimiser
  state and key are replicated; GSPMD turns the loss means into all-reduces, so gradients are
  averaged over all envs exactly as on one device. Minibatch m takes one env from each group
  of `num_minibatches` consecutive envs (random within the group, per epoch): the assignment
  does not depend on the device count, and each minibatch gathers only from envs on its own
  device (no all-to-all), since `num_envs / num_minibatches` is a multiple of the device count.
- Logging: `jax.debug.callback(log_fn, metrics)` every `log_every` updates from inside the scan.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Optional, Protocol

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

from vcbench import parallel
from vcbench.algos import finetune
from vcbench.config import ConfigError, require, require_choice
from vcbench.models import nav_policy, zoo
from vcbench.models.nav_policy import NavPolicy

EPISODE_METRICS = ("episode_return", "success", "spl", "episode_length")


def policy_config() -> ml_collections.ConfigDict:
  """The policy block of a navigation learner's config. Every field is documented."""
  p = ml_collections.ConfigDict()
  p.encoder = "cnn"             # 'cnn' (SimpleCNN from scratch) or a zoo PVR name.
  p.checkpoint = ml_collections.config_dict.placeholder(str)   # the zoo entry's weights file.
  p.img_size = 0                # PVR input size; 0: the zoo entry's default.
  p.encoder_seed = 0            # initialisation of random_* zoo entries.
  p.finetune_encoder = False    # train the zoo PVR with the policy (False: frozen).
  p.encoder_lr = 1e-5           # its Adam lr when fine-tuned (VC-1: 1e-5; the policy's: lr).
  p.encoder_chunk = 64          # fine-tuned: frames per encoder pass (bounds the activations
                                # kept for the backward pass, for one more forward); 0: all.
  p.compression_size = 2048     # flattened size of the compressed PVR token map.
  p.rnn = "lstm"                # 'lstm' or 'gru'.
  p.rnn_layers = 2
  p.hidden = 512                # visual feature and RNN width.
  p.embed_dim = 32              # previous-action / object-goal embedding width.
  p.prev_action = True          # feed the previous action (off for imitation: copycat).
  p.visual_norm = False         # LayerNorm on the visual features (on for imitation).
  p.embed_vectors = True        # embed rank-1 float observations (gps_compass) to embed_dim.
  p.vector_fourier = 0          # octaves of sin/cos features those embeddings also read.
  p.aux_goal_visible = False    # a head predicting whether the goal is in view (ObjectNav).
  p.aux_categories = 0          # K > 0: a head predicting which of the K object categories
                                # are in view, from the frame's features (ObjectNav: 6).
  p.aux_depth = 0               # G > 0: a head predicting the frame's depth on a G x G grid
                                # (RGB agents; the frame size must divide by G).
  p.num_object_categories = 7   # 'objectgoal' embedding rows (vcbench-nav: 0..6).
  p.ignore_obs = ()             # observation keys the policy does not see.
  return p


def num_updates(config) -> int:
  """config.num_updates, or the whole updates that fit in config.total_env_steps."""
  if config.num_updates > 0:
    return int(config.num_updates)
  return int(config.total_env_steps) // (config.num_envs * config.rollout_len)


def check_policy(config) -> None:
  """Raises ConfigError for a config.policy the trainer cannot build."""
  require_choice(config, "policy.rnn", nav_policy.RNN_TYPES)
  require_choice(config, "policy.encoder", ["cnn", *zoo.names()])
  require(config, "policy.encoder_lr", lambda v: v >= 0, "a number >= 0")
  require(config, "policy.encoder_chunk", lambda v: isinstance(v, int) and v >= 0,
          "an int >= 0")
  require(config, "policy.vector_fourier", lambda v: isinstance(v, int) and 0 <= v <= 16,
          "an int in [0, 16] (octaves)")
  for key, what in (("aux_categories", "object categories"), ("aux_depth", "grid side")):
    require(config, f"policy.{key}", lambda v: isinstance(v, int) and v >= 0,
            f"an int >= 0 ({what})")
  if config.policy.finetune_encoder and config.policy.encoder == "cnn":
    raise ConfigError("config.policy.finetune_encoder fine-tunes a zoo PVR, but "
                      "config.policy.encoder = 'cnn' is the SimpleCNN, which is always trained: "
                      "choose a zoo encoder or set finetune_encoder=False")


@struct.dataclass
class TrainState:
  """Everything a run needs to continue; per-env fields have the env axis first."""
  params: Any
  opt_state: Any
  env_state: Any           # the batched EnvState.
  carry: Any               # recurrent state before the current obs.
  prev_action: jax.Array   # int32 [num_envs], the action that led to the current obs.
  start: jax.Array         # bool [num_envs], the current obs begins an episode.
  key: jax.Array
  update: jax.Array        # int32 [], updates done.


class Algorithm(Protocol):
  """What a learner adds to the shared trainer."""

  def check_config(self, config, num_devices: int) -> None: ...

  def update(self, trainer: "Trainer", state: TrainState, env, frozen
             ) -> tuple[TrainState, dict]: ...

  def log_line(self, metrics: dict, steps: int, steps_per_second: str) -> str: ...


def finished_episode_means(done, metrics) -> dict:
  """Means of the env's episode metrics over the episodes that ended (NaN if none) + count."""
  count = jnp.sum(done)
  out = {k: jnp.where(count > 0, jnp.sum(jnp.where(done, metrics[k], 0.0)) / jnp.maximum(count, 1),
                      jnp.nan) for k in EPISODE_METRICS}
  return {**out, "episodes": count.astype(jnp.int32)}


class PrintLogger:
  """The default `log_fn`: the algorithm's line, with env steps/s since the previous line."""

  def __init__(self, steps_per_update: int, line: Callable[[dict, int, str], str]):
    self.steps_per_update, self.line = steps_per_update, line
    self._last = None

  def __call__(self, m: dict) -> None:
    m = {k: np.asarray(v) for k, v in m.items()}
    steps, now = int(m["update"]) * self.steps_per_update, time.perf_counter()
    sps = "-" if self._last is None else f"{(steps - self._last[0]) / (now - self._last[1]):,.0f}"
    self._last = (steps, now)
    print(self.line(m, steps, sps), flush=True)


class Trainer:
  """A recurrent navigation policy, its optimiser and mesh, trained by `algorithm`'s update;
  the `runner` contract (init, train_chunk, abstract_state, abstract_metrics)."""

  def __init__(self, config, env, algorithm: Algorithm, *, encoder=None,
               log_fn: Optional[Callable] = None, mesh=None):
    self.mesh = parallel.data_mesh() if mesh is None else mesh
    algorithm.check_config(config, self.mesh.shape[parallel.DATA])
    self.config, self.algorithm = config, algorithm
    self.num_updates = num_updates(config)
    self.steps_per_update = config.num_envs * config.rollout_len
    self._ignore = set(config.policy.ignore_obs)
    self._check_obs(env)
    p = config.policy
    if p.encoder != "cnn" and encoder is None:
      encoder = zoo.load(p.encoder, p.checkpoint, img_size=p.img_size or None, seed=p.encoder_seed)
    self.policy = NavPolicy(
        num_actions=int(env.num_actions), hidden=p.hidden, rnn=p.rnn, rnn_layers=p.rnn_layers,
        embed_dim=p.embed_dim, num_object_categories=p.num_object_categories,
        compression_size=p.compression_size, use_prev_action=p.prev_action,
        visual_norm=p.visual_norm, embed_vectors=p.embed_vectors,
        vector_fourier=p.vector_fourier, aux_goal_visible=p.aux_goal_visible,
        aux_categories=p.aux_categories, aux_depth=p.aux_depth, train_pvr=p.finetune_encoder,
        pvr_chunk=p.encoder_chunk or None,
        pvr=None if encoder is None else nav_policy.pvr_tokens(encoder))
    # The loaded encoder's variables: the argument of every call when frozen; when fine-tuned,
    # only the initial value of its param (`frozen` is then None).
    self._encoder = None if encoder is None else parallel.replicate(encoder.params, self.mesh)
    self.frozen = None if p.finetune_encoder else self._encoder
    self.env = parallel.replicate(env, self.mesh)
    self.tx, self.lr = self._optimizer()
    self.log_fn = (PrintLogger(self.steps_per_update, algorithm.log_line) if log_fn is None
                   else log_fn)
    rep, batch = parallel.replicated(self.mesh), parallel.batch_sharding(self.mesh)
    self.state_sharding = TrainState(params=rep, opt_state=rep, env_state=batch, carry=batch,
                                     prev_action=batch, start=batch, key=rep, update=rep)
    self._chunk_fns = {}
    self._init = jax.jit(self._init_fn, in_shardings=(rep, rep, rep),
                         out_shardings=self.state_sharding)

  # -- the runner's contract ------------------------------------------------------------------

  def init(self, key) -> TrainState:
    """A fresh state: params, optimiser, `num_envs` reset envs, zero recurrent state."""
    return self._init(key, self.env, self._encoder)

  def init_from(self, key, params) -> TrainState:
    """A fresh state (envs, optimiser) around given params: fine-tuning a trained policy."""
    state = self.init(key)
    # A copy: training donates the state, which must not delete the caller's params.
    params = jax.device_put(params, self.state_sharding.params, may_alias=False)
    return state.replace(params=params, opt_state=jax.jit(self.tx.init)(params))

  def train_chunk(self, state: TrainState, num_updates: int) -> tuple[TrainState, dict]:
    """`num_updates` updates in one jitted call (`state` is donated); metrics [n]."""
    return self._chunk_fn(int(num_updates))(state, self.env, self.frozen)

  def train(self, key) -> tuple[TrainState, dict]:
    """The whole run, `num_updates` updates from `init(key)`."""
    return self.train_chunk(self.init(key), self.num_updates)

  def abstract_state(self) -> TrainState:
    return jax.eval_shape(self._init, jax.random.key(0), self.env, self._encoder)

  def abstract_metrics(self, num_updates: int) -> dict:
    out = jax.eval_shape(lambda s: self._chunk_fn(1)(s, self.env, self.frozen),
                         self.abstract_state())[1]
    return {k: jax.ShapeDtypeStruct((num_updates,), v.dtype) for k, v in out.items()}

  # -- the pieces an algorithm's update is built from -------------------------------------------

  def policy_step(self, params, frozen, obs, carry, prev_action, start):
    """The policy's one-step path: (carry, logits [N, A], value [N])."""
    return self.policy.apply({"params": params}, self.obs(obs, frozen), carry, prev_action,
                             start, frozen, method=NavPolicy.step)

  def obs(self, obs: dict, frozen=None) -> dict:
    """The observations the policy sees (without `policy.ignore_obs`); with a frozen PVR
    (`frozen`: its variables) its images replaced by their tokens, so that a rollout records
    them and the SGD epochs do not encode every frame again. Idempotent."""
    obs = {k: v for k, v in obs.items() if k not in self._ignore}
    if frozen is not None and self.policy.pvr is not None:
      for k in nav_policy.PVR_KEYS:
        if k in obs:
          obs[k + nav_policy.TOKENS] = jax.lax.stop_gradient(
              self.policy.pvr(frozen, obs.pop(k)))
    return obs

  def rollout(self, state: TrainState, env, key, act):
    """`rollout_len` steps of the vmapped env from the state's envs and recurrent state.

    act(env_state, rnn, prev_action, start, key) -> (rnn, action, record) chooses the actions;
    `record(new_env_state)` is the step's record. Returns ((env_state, rnn, prev_action,
    start) after the rollout, the records [T, N, ...], the env's metrics [T, N])."""
    batch = lambda tree: parallel.constrain_batch(tree, self.mesh)

    def step(carry, key):
      env_state, rnn, prev_action, start = carry
      rnn, action, record = act(env_state, rnn, prev_action, start, key)
      new = batch(jax.vmap(env.step)(env_state, action))
      return (new, batch(rnn), action, new.done), (record(new), new.metrics)

    carry = (state.env_state, state.carry, state.prev_action, state.start)
    keys = jax.random.split(key, self.config.rollout_len)
    carry, (traj, ep_metrics) = jax.lax.scan(step, carry, keys)
    return carry, parallel.constrain_batch(traj, self.mesh, axis=1), ep_metrics

  def minibatches(self, key, data):
    """([T, N] per-step tree, [N] initial carry) -> [M, T, N/M] minibatches of whole sequences.

    Minibatch m takes, from each group of M consecutive envs, the env a per-group random
    permutation puts at m: independent of the device count and local to each device."""
    m = self.config.num_minibatches
    per_step, carry0 = data
    perm = jnp.argsort(jax.random.uniform(key, (self.config.num_envs // m, m)), axis=1)
    per_step = parallel.constrain_batch(
        jax.tree.map(lambda x: _split_envs(x, perm, axis=1), per_step), self.mesh, axis=2)
    carry0 = parallel.constrain_batch(
        jax.tree.map(lambda x: _split_envs(x, perm, axis=0), carry0), self.mesh, axis=1)
    return per_step, carry0

  def sgd_epochs(self, state: TrainState, data, frozen, key, loss):
    """`update_epochs` passes of `num_minibatches` SGD steps on `loss(params, minibatch,
    frozen) -> (loss, stats)` over `data` (see `minibatches`): ((params, opt_state), stats)."""
    def sgd_step(opt, minibatch):
      params, opt_state = opt
      grads, stats = jax.grad(loss, has_aux=True)(params, minibatch, frozen)
      updates, opt_state = self.tx.update(grads, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state), {
          **stats, "grad_norm": optax.tree.norm(grads)}

    def epoch(opt, key):
      return jax.lax.scan(sgd_step, opt, self.minibatches(key, data))

    return jax.lax.scan(epoch, (state.params, state.opt_state),
                        jax.random.split(key, self.config.update_epochs))

  def current_lr(self, state: TrainState):
    c = self.config
    return self.lr(state.update * c.update_epochs * c.num_minibatches)

  # -- internals ------------------------------------------------------------------------------

  def _check_obs(self, env) -> None:
    spec = {k: v for k, v in env.observation_spec().items() if k not in self._ignore}
    bad = nav_policy.unsupported_obs(spec)
    if bad:
      raise ConfigError(f"the policy cannot consume the observations {bad}; add their keys to "
                        "config.policy.ignore_obs")

  def _optimizer(self):
    c = self.config
    steps = self.num_updates * c.update_epochs * c.num_minibatches
    schedule = lambda peak: (optax.linear_schedule(peak, 0.0, steps) if c.anneal_lr
                             else optax.constant_schedule(peak))
    lr = schedule(c.lr)
    tx = optax.chain(optax.clip_by_global_norm(c.max_grad_norm), optax.adam(lr, eps=c.adam_eps))
    if c.policy.finetune_encoder:
      encoder_tx = optax.adam(schedule(c.policy.encoder_lr), eps=c.adam_eps)
      tx = finetune.split_optimizer(tx, encoder_tx, nav_policy.PVR_PARAM)
    return tx, lr

  def _init_fn(self, key, env, encoder) -> TrainState:
    n = self.config.num_envs
    k_params, k_env, k_train = jax.random.split(key, 3)
    env_state = jax.vmap(env.reset)(jax.random.split(k_env, n))
    prev_action, start = jnp.zeros((n,), jnp.int32), jnp.ones((n,), bool)
    first = lambda x: x[None, :1]
    params = self.policy.init(k_params, jax.tree.map(first, self.obs(env_state.obs)),
                              self.policy.initial_carry(1), first(prev_action), first(start),
                              encoder)["params"]
    return TrainState(params=params, opt_state=self.tx.init(params), env_state=env_state,
                      carry=self.policy.initial_carry(n), prev_action=prev_action, start=start,
                      key=k_train, update=jnp.zeros((), jnp.int32))

  def _chunk_fn(self, n: int):
    """The jitted chunk of n updates, compiled once per n."""
    if n not in self._chunk_fns:
      rep = parallel.replicated(self.mesh)
      self._chunk_fns[n] = jax.jit(functools.partial(self._chunk, num_updates=n),
                                   in_shardings=(self.state_sharding, rep, rep),
                                   out_shardings=(self.state_sharding, rep), donate_argnums=0)
    return self._chunk_fns[n]

  def _chunk(self, state, env, frozen, num_updates: int):
    def body(state, _):
      state, metrics = self.algorithm.update(self, state, env, frozen)
      self._maybe_log(state.update, metrics)
      return state, metrics
    return jax.lax.scan(body, state, None, length=num_updates)

  def _maybe_log(self, update, metrics) -> None:
    every = self.config.log_every
    if every <= 0 or not self.log_fn:
      return
    jax.lax.cond(update % every == 0, lambda m: jax.debug.callback(self.log_fn, m),
                 lambda m: None, {**metrics, "update": update})


def _split_envs(x, perm, axis: int):
  """Env axis `axis` of x -> a leading minibatch axis: [..., N, ...] -> [M, ..., N/M, ...]."""
  groups, m = perm.shape
  x = x.reshape(*x.shape[:axis], groups, m, *x.shape[axis + 1:])
  x = jax.vmap(lambda xg, p: jnp.take(xg, p, axis=axis), in_axes=(axis, 0), out_axes=axis)(x, perm)
  return jnp.moveaxis(x, axis + 1, 0)
