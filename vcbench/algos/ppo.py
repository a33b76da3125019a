"""Recurrent PPO for JAX-native navigation envs, fully jitted (PureJaxRL / brax design).

Usage:

    from vcbench.algos import ppo
    config = ppo.default_config()
    config.num_envs, config.num_updates = 64, 2000
    config.policy.encoder = "vc1_vitb"; config.policy.checkpoint = "vc1_vitb.pth"
    trainer = ppo.make_train(config, env)
    state, metrics = trainer.train(jax.random.key(config.seed))   # one program, no checkpoints
    # or: chunks of updates, checkpointed after each, resumed from the latest on restart
    state, metrics = ppo.run(config, env, workdir, chunk_updates=100)

`metrics` maps names to arrays [num_updates]: episode_return / success / spl /
episode_length (means over the episodes that finished in that update; NaN when none did) and
episodes (their count), reward, the losses, entropy, approx_kl, clip_frac, grad_norm, lr.

Design:
- The env is an argument of the jitted functions (it is a pytree), never a closure, so its
  data (scene pools) is not baked into the program as constants. The frozen PVR's variables
  are an argument too, kept outside the train state: they are not trained, not in the optimiser
  state and not checkpointed (the zoo reloads them).
- Fine-tuning (`policy.finetune_encoder`, VC-1's end-to-end adaptation): the zoo encoder's
  variables are instead the policy's param `nav_policy.PVR_PARAM`, initialised from the loaded
  ones: trained by the PPO loss with their own Adam lr (`policy.encoder_lr`, annealed like
  `lr`; outside the policy's gradient clip, so a big encoder's gradient norm does not shrink
  the policy's steps), replicated and checkpointed with the rest of the params; it runs
  `policy.encoder_chunk` frames at a time, rematerialised in the backward pass.
- `train_chunk(state, n)` is one jitted, nested `lax.scan`: n updates, each a rollout (a scan
  over `rollout_len` env steps of the vmapped env with the policy's one-step path), GAE, then
  `update_epochs` x `num_minibatches` SGD steps. Minibatches split the envs and keep every
  rollout sequence whole; the policy's sequence path re-runs the RNN from the rollout's initial
  state with the per-step episode starts. The train state is donated.
- Episode ends: the env auto-resets, `start` marks the first obs of an episode; the policy
  zeroes its recurrent state there and GAE does not bootstrap across a `done` (time-limit
  ends are treated as terminal, as in habitat-baselines).
- Data parallel: a 1-D mesh over all devices. The per-env part of the state (env state,
  recurrent state, previous action, start) is sharded along the env axis; params, optimiser
  state and key are replicated; GSPMD turns the loss means into all-reduces, so gradients are
  averaged over all envs exactly as on one device. Minibatch m takes one env from each group
  of `num_minibatches` consecutive envs (random within the group, per epoch): the assignment
  does not depend on the device count, and each minibatch gathers only from envs on its own
  device (no all-to-all), since `num_envs / num_minibatches` is a multiple of the device count.
- Resume: the whole state, PRNG key included, is one pytree saved by `vcbench.checkpoint` after
  every chunk with the metrics so far; a restarted `run` continues from the latest checkpoint
  to the same result, bit for bit on CPU.
- Logging: `jax.debug.callback(log_fn, metrics)` every `log_every` updates from inside the scan.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

from vcbench import parallel
from vcbench.algos import finetune, runner
from vcbench.config import ConfigError, check_keys, require, require_choice
from vcbench.models import nav_policy, zoo
from vcbench.models.nav_policy import NavPolicy

EPISODE_METRICS = ("episode_return", "success", "spl", "episode_length")


def default_config() -> ml_collections.ConfigDict:
  """PPO defaults (habitat-baselines PPO; CortexBench nav policy). Every field is documented."""
  c = ml_collections.ConfigDict()
  c.seed = 0                    # PRNG seed of `run` (train(key) takes its own key).
  c.num_envs = 16               # parallel envs; divisible by num_minibatches * device count.
  c.rollout_len = 64            # env steps per env per update (habitat num_steps).
  c.num_updates = 0             # PPO updates; 0: derived from total_env_steps.
  c.total_env_steps = 1_000_000  # used when num_updates == 0 (rounded down to whole updates).
  c.update_epochs = 2           # passes over each rollout (habitat ppo_epoch).
  c.num_minibatches = 2         # minibatches per epoch, split over envs (habitat num_mini_batch).
  c.lr = 2.5e-4                 # Adam learning rate.
  c.adam_eps = 1e-5
  c.anneal_lr = True            # linear decay to 0 over the run.
  c.gamma = 0.99                # discount.
  c.gae_lambda = 0.95           # GAE lambda (habitat tau).
  c.clip_eps = 0.2              # PPO ratio clip, also the value clip.
  c.clip_value_loss = True      # clipped value loss (False: plain squared error).
  c.normalize_advantage = True  # per minibatch.
  c.vf_coef = 0.5               # value loss weight.
  c.ent_coef = 0.01             # entropy bonus weight.
  c.max_grad_norm = 0.5         # global grad-norm clip.
  c.log_every = 10              # updates between log lines; <= 0 turns logging off.
  c.policy = p = ml_collections.ConfigDict()
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
  p.num_object_categories = 7   # 'objectgoal' embedding rows (vcbench-nav: 0..6).
  p.ignore_obs = ()             # observation keys the policy does not see.
  return c


def num_updates(config) -> int:
  """config.num_updates, or the whole updates that fit in config.total_env_steps."""
  if config.num_updates > 0:
    return int(config.num_updates)
  return int(config.total_env_steps) // (config.num_envs * config.rollout_len)


def check_config(config, num_devices: int = 1) -> None:
  """Raises ConfigError, naming the field and the numbers, for a config PPO cannot run."""
  check_keys(config, default_config())
  positive = lambda v: isinstance(v, int) and v > 0
  for key in ("num_envs", "rollout_len", "update_epochs", "num_minibatches",
              "policy.rnn_layers", "policy.hidden", "policy.embed_dim"):
    require(config, key, positive, "a positive int")
  for key in ("gamma", "gae_lambda"):
    require(config, key, lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]")
  for key in ("lr", "clip_eps", "max_grad_norm"):
    require(config, key, lambda v: v > 0, "a positive number")
  check_policy(config)
  n, m = config.num_envs, config.num_minibatches
  if n % m:
    raise ConfigError(f"config.num_envs = {n} is not divisible by config.num_minibatches = {m}")
  if n % num_devices or (n // m) % num_devices:
    raise ConfigError(
        f"config.num_envs = {n} with config.num_minibatches = {m} gives minibatches of {n // m} "
        f"envs, which must split evenly over the {num_devices} devices: use a num_envs that "
        f"is a multiple of num_minibatches * devices = {m * num_devices}")
  if num_updates(config) < 1:
    raise ConfigError(
        f"no PPO update to run: config.num_updates = {config.num_updates} and "
        f"config.total_env_steps = {config.total_env_steps} < num_envs * rollout_len = "
        f"{n * config.rollout_len}")


def check_policy(config) -> None:
  """Raises ConfigError for a config.policy the trainer cannot build."""
  require_choice(config, "policy.rnn", nav_policy.RNN_TYPES)
  require_choice(config, "policy.encoder", ["cnn", *zoo.names()])
  require(config, "policy.encoder_lr", lambda v: v >= 0, "a number >= 0")
  require(config, "policy.encoder_chunk", lambda v: isinstance(v, int) and v >= 0,
          "an int >= 0")
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


@struct.dataclass
class Transition:
  """One rollout step, leaves [T, num_envs, ...]."""
  obs: dict
  prev_action: jax.Array
  start: jax.Array
  action: jax.Array
  log_prob: jax.Array
  value: jax.Array
  reward: jax.Array
  done: jax.Array


def gae(rewards, values, dones, last_value, gamma: float, lam: float):
  """Generalised advantage estimation over [T, ...]; no bootstrapping across a done.

  Returns (advantages, returns = advantages + values)."""
  def backward(carry, x):
    next_adv, next_value = carry
    reward, value, done = x
    live = 1.0 - done.astype(jnp.float32)
    delta = reward + gamma * next_value * live - value
    adv = delta + gamma * lam * live * next_adv
    return (adv, value), adv
  init = (jnp.zeros_like(last_value), last_value)
  _, adv = jax.lax.scan(backward, init, (rewards, values, dones), reverse=True)
  return adv, adv + values


def finished_episode_means(done, metrics) -> dict:
  """Means of the env's episode metrics over the episodes that ended (NaN if none) + count."""
  count = jnp.sum(done)
  out = {k: jnp.where(count > 0, jnp.sum(jnp.where(done, metrics[k], 0.0)) / jnp.maximum(count, 1),
                      jnp.nan) for k in EPISODE_METRICS}
  return {**out, "episodes": count.astype(jnp.int32)}


class PrintLogger:
  """The default `log_fn`: one line per call, with env steps/s since the previous line."""

  def __init__(self, steps_per_update: int):
    self.steps_per_update = steps_per_update
    self._last = None

  def __call__(self, m: dict) -> None:
    m = {k: np.asarray(v) for k, v in m.items()}
    update = int(m["update"])
    steps, now = update * self.steps_per_update, time.perf_counter()
    sps = "-" if self._last is None else f"{(steps - self._last[0]) / (now - self._last[1]):,.0f}"
    self._last = (steps, now)
    print(f"update {update} | env steps {steps:,} | return {m['episode_return']:.3f} "
          f"success {m['success']:.3f} spl {m['spl']:.3f} (n={int(m['episodes'])}) | "
          f"pg {m['policy_loss']:.4f} vf {m['value_loss']:.4f} ent {m['entropy']:.3f} "
          f"kl {m['approx_kl']:.4f} | {sps} steps/s", flush=True)


class Trainer:
  """Jitted PPO on one env and config; build with `make_train`."""

  check_config = staticmethod(check_config)

  def __init__(self, config, env, encoder=None, log_fn: Optional[Callable] = None, mesh=None):
    self.mesh = parallel.data_mesh() if mesh is None else mesh
    self.check_config(config, self.mesh.shape[parallel.DATA])
    self.config = config
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
        visual_norm=p.visual_norm, train_pvr=p.finetune_encoder,
        pvr_chunk=p.encoder_chunk or None,
        pvr=None if encoder is None else nav_policy.pvr_tokens(encoder))
    # The loaded encoder's variables: the argument of every call when frozen; when fine-tuned,
    # only the initial value of its param (`frozen` is then None).
    self._encoder = None if encoder is None else parallel.replicate(encoder.params, self.mesh)
    self.frozen = None if p.finetune_encoder else self._encoder
    self.env = parallel.replicate(env, self.mesh)
    self.tx, self._lr = self._optimizer()
    self.log_fn = (PrintLogger(self.steps_per_update) if log_fn is None else log_fn)
    rep, batch = parallel.replicated(self.mesh), parallel.batch_sharding(self.mesh)
    self.state_sharding = TrainState(params=rep, opt_state=rep, env_state=batch, carry=batch,
                                     prev_action=batch, start=batch, key=rep, update=rep)
    self._chunk_fns = {}
    self._init = jax.jit(self._init_fn, in_shardings=(rep, rep, rep),
                         out_shardings=self.state_sharding)

  # -- public -------------------------------------------------------------------------------

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
    """`num_updates` PPO updates in one jitted call (`state` is donated); metrics [n]."""
    return self._chunk_fn(int(num_updates))(state, self.env, self.frozen)

  def train(self, key) -> tuple[TrainState, dict]:
    """The whole run, `num_updates` updates from `init(key)`."""
    return self.train_chunk(self.init(key), self.num_updates)

  def abstract_state(self) -> TrainState:
    """Shapes, dtypes and shardings of the state (a restore target)."""
    return jax.eval_shape(self._init, jax.random.key(0), self.env, self._encoder)

  def abstract_metrics(self, num_updates: int) -> dict:
    """Shapes and dtypes of `num_updates` updates' metrics."""
    out = jax.eval_shape(lambda s: self._chunk_fn(1)(s, self.env, self.frozen),
                         self.abstract_state())[1]
    return {k: jax.ShapeDtypeStruct((num_updates,), v.dtype) for k, v in out.items()}

  # -- jitted pieces --------------------------------------------------------------------------

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

  def _obs(self, obs):
    return {k: v for k, v in obs.items() if k not in self._ignore}

  def _init_fn(self, key, env, encoder) -> TrainState:
    n = self.config.num_envs
    k_params, k_env, k_train = jax.random.split(key, 3)
    env_state = jax.vmap(env.reset)(jax.random.split(k_env, n))
    prev_action, start = jnp.zeros((n,), jnp.int32), jnp.ones((n,), bool)
    first = lambda x: x[None, :1]
    params = self.policy.init(k_params, jax.tree.map(first, self._obs(env_state.obs)),
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
      state, metrics = self._update(state, env, frozen)
      self._maybe_log(state.update, metrics)
      return state, metrics
    return jax.lax.scan(body, state, None, length=num_updates)

  def _maybe_log(self, update, metrics) -> None:
    every = self.config.log_every
    if every <= 0 or not self.log_fn:
      return
    jax.lax.cond(update % every == 0, lambda m: jax.debug.callback(self.log_fn, m),
                 lambda m: None, {**metrics, "update": update})

  def policy_step(self, params, frozen, obs, carry, prev_action, start):
    return self.policy.apply({"params": params}, self._obs(obs), carry, prev_action, start,
                             frozen, method=NavPolicy.step)

  def _rollout(self, state: TrainState, env, frozen, key):
    batch = lambda tree: parallel.constrain_batch(tree, self.mesh)

    def step(carry, key):
      env_state, rnn, prev_action, start = carry
      rnn, logits, value = self.policy_step(state.params, frozen, env_state.obs, rnn,
                                             prev_action, start)
      action = jax.random.categorical(key, logits).astype(jnp.int32)
      log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
      new = batch(jax.vmap(env.step)(env_state, action))
      record = Transition(obs=self._obs(env_state.obs), prev_action=prev_action, start=start,
                          action=action, log_prob=log_prob, value=value, reward=new.reward,
                          done=new.done)
      return (new, batch(rnn), action, new.done), (record, new.metrics)

    carry = (state.env_state, state.carry, state.prev_action, state.start)
    keys = jax.random.split(key, self.config.rollout_len)
    carry, (traj, ep_metrics) = jax.lax.scan(step, carry, keys)
    return carry, parallel.constrain_batch(traj, self.mesh, axis=1), ep_metrics

  def _update(self, state: TrainState, env, frozen):
    c = self.config
    key, k_rollout, k_epochs = jax.random.split(state.key, 3)
    (env_state, carry, prev_action, start), traj, ep_metrics = self._rollout(
        state, env, frozen, k_rollout)
    _, _, last_value = self.policy_step(state.params, frozen, env_state.obs, carry,
                                         prev_action, start)
    adv, returns = gae(traj.reward, traj.value, traj.done, last_value, c.gamma, c.gae_lambda)
    data = ((traj, adv, returns), state.carry)

    def epoch(opt, key):
      minibatches = self._minibatches(key, data)
      return jax.lax.scan(lambda o, mb: self._sgd_step(o, mb, frozen), opt, minibatches)

    (params, opt_state), stats = jax.lax.scan(
        epoch, (state.params, state.opt_state), jax.random.split(k_epochs, c.update_epochs))
    metrics = {**finished_episode_means(traj.done, ep_metrics),
               **jax.tree.map(jnp.mean, stats), "reward": jnp.mean(traj.reward),
               "lr": self._lr(state.update * c.update_epochs * c.num_minibatches)}
    new = TrainState(params=params, opt_state=opt_state, env_state=env_state, carry=carry,
                     prev_action=prev_action, start=start, key=key, update=state.update + 1)
    return new, metrics

  def _minibatches(self, key, data):
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

  def _sgd_step(self, opt, minibatch, frozen):
    params, opt_state = opt
    grads, stats = jax.grad(self._loss, has_aux=True)(params, minibatch, frozen)
    updates, opt_state = self.tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), {
        **stats, "grad_norm": optax.tree.norm(grads)}

  def _loss(self, params, minibatch, frozen):
    c = self.config
    (traj, adv, returns), carry0 = minibatch
    _, logits, value = self.policy.apply({"params": params}, traj.obs, carry0,
                                         traj.prev_action, traj.start, frozen)
    log_probs = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_probs, traj.action[..., None], -1)[..., 0]
    entropy = -jnp.mean(jnp.sum(jnp.exp(log_probs) * log_probs, -1))
    if c.normalize_advantage:
      adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    log_ratio = log_prob - traj.log_prob
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - c.clip_eps, 1.0 + c.clip_eps)
    policy_loss = -jnp.mean(jnp.minimum(ratio * adv, clipped * adv))
    value_loss = jnp.square(value - returns)
    if c.clip_value_loss:
      value_clipped = traj.value + jnp.clip(value - traj.value, -c.clip_eps, c.clip_eps)
      value_loss = jnp.maximum(value_loss, jnp.square(value_clipped - returns))
    value_loss = 0.5 * jnp.mean(value_loss)
    total = policy_loss + c.vf_coef * value_loss - c.ent_coef * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "value_loss": value_loss,
                   "entropy": entropy, "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
                   "clip_frac": jnp.mean((jnp.abs(ratio - 1.0) > c.clip_eps).astype(jnp.float32))}


def _split_envs(x, perm, axis: int):
  """Env axis `axis` of x -> a leading minibatch axis: [..., N, ...] -> [M, ..., N/M, ...]."""
  groups, m = perm.shape
  x = x.reshape(*x.shape[:axis], groups, m, *x.shape[axis + 1:])
  x = jax.vmap(lambda xg, p: jnp.take(xg, p, axis=axis), in_axes=(axis, 0), out_axes=axis)(x, perm)
  return jnp.moveaxis(x, axis + 1, 0)


def make_train(config, env, *, encoder=None, log_fn: Optional[Callable] = None,
               mesh=None) -> Trainer:
  """A `Trainer` for `config` (see `default_config`) on `env` (vcbench-nav interface).

  encoder: a loaded `zoo.Encoder` to use as the PVR (frozen or fine-tuned) instead of loading
    config.policy.encoder (e.g. a custom or tiny one).
  log_fn: called with the metrics dict (+ 'update') every config.log_every updates from inside
    the jitted loop; None: a `PrintLogger`; False: no logging.
  mesh: the device mesh (default: all devices on the 'data' axis).
  """
  return Trainer(config, env, encoder=encoder, log_fn=log_fn, mesh=mesh)


def run(config, env, workdir, chunk_updates: int = 100, *, encoder=None,
        log_fn: Optional[Callable] = None, max_to_keep: int = 2, stop_at: Optional[int] = None):
  """`make_train(config, env)` trained by `runner.run`: in checkpointed chunks, resumed from
  the latest checkpoint under `workdir` if any. Returns (state, metrics {name: [updates]})."""
  trainer = make_train(config, env, encoder=encoder, log_fn=log_fn)
  return runner.run(trainer, config, workdir, chunk_updates, max_to_keep=max_to_keep,
                    stop_at=stop_at)
