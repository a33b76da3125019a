"""Self-supervised policy adaptation (PAD, Hansen et al. 2021) for vcbench-nav policies, as
RobustNav's Table 3 uses it: action prediction (AP) and rotation prediction (RP).

    pad = PAD(config, trainer)                       # trainer: the PPO trainer of the policy
    heads = pad.fit_heads(key, params, clean_env)    # the SS head on the clean source env
    params, heads, log = pad.adapt(key, params, heads, corrupted_env)   # calibration budget

Both tasks read the policy's own visual encoder (the SimpleCNN `visual_cnn` over rgb/depth):
  ap  given the features of two consecutive frames, predict the action taken between them
      (an inverse-dynamics head; steps that end an episode are left out),
  rp  rotate a frame by k x 90 degrees, predict k from its features.
`adapt` acts with the policy in the target (corrupted) env for `budget` env steps and, after
each rollout, takes SGD steps on the SS loss of what it saw, updating the encoder and the SS
head; the RNN and the actor/critic stay fixed, so the policy changes only through what the
encoder now sees. No task reward is used.

Deviation from RobustNav, for compute: RobustNav trains the SS head jointly with the navigation
loss from the start (its "Nav loss + AP/RP" agents); here the head is fitted afterwards to the
clean agent's frozen encoder (`fit_heads`, on the clean training env), so the agent before
adaptation is the clean agent itself. Only SimpleCNN policies are supported (a frozen PVR has
no encoder to adapt).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax

from vcbench import parallel
from vcbench.config import ConfigError, check_keys, require, require_choice
from vcbench.models import nav_policy

TASKS = ("ap", "rp")


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.task = "rp"             # 'ap' (action prediction) or 'rp' (rotation prediction).
  c.budget = 166_000        # env steps of adaptation (RobustNav's calibration budget).
  c.fit_steps = 200_000     # env steps of clean experience to fit the SS head on.
  c.num_envs = 32
  c.rollout_len = 64
  c.sgd_steps = 4           # SGD steps per rollout (each on the whole rollout).
  c.lr = 1e-5               # Adam, adaptation of the encoder (and head). At 1e-4 (4 steps per
                            # 2,048-step rollout, 166k steps) the PointNav-RGB agent's SR fell
                            # from 52% to 0 under defocus blur: the policy head does not follow.
  c.head_lr = 1e-3          # Adam, fitting the head.
  c.head_hidden = 256
  return c


def check_config(config) -> None:
  check_keys(config, default_config())
  require_choice(config, "task", TASKS)
  for key in ("budget", "fit_steps", "num_envs", "rollout_len", "sgd_steps", "head_hidden"):
    require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")


class SSHead(nn.Module):
  """MLP from encoder features to the SS task's classes."""
  hidden: int
  classes: int

  @nn.compact
  def __call__(self, x):
    return nn.Dense(self.classes)(nn.relu(nn.Dense(self.hidden)(x)))


def rotate(image: jax.Array, k: jax.Array) -> jax.Array:
  """[H, W, C] rotated counter-clockwise by k x 90 degrees (k traced; square images)."""
  return jax.lax.switch(k, [functools.partial(jnp.rot90, image, i) for i in range(4)])


class PAD:
  """AP/RP adaptation of a PPO-trained SimpleCNN nav policy (see the module docstring)."""

  def __init__(self, config, trainer):
    check_config(config)
    if trainer.frozen is not None:
      raise ConfigError("PAD adapts the policy's own SimpleCNN; this policy uses a frozen PVR")
    self.config, self.trainer = config, trainer
    self.encoder = nav_policy.SimpleCNN(trainer.policy.hidden)
    classes = trainer.policy.num_actions if config.task == "ap" else 4
    self.head = SSHead(config.head_hidden, classes)
    self.steps_per_rollout = config.num_envs * config.rollout_len

  # -- losses -------------------------------------------------------------------------------

  def features(self, encoder_params, obs) -> jax.Array:
    """Encoder features of flat observations [N, ...]."""
    return self.encoder.apply({"params": encoder_params}, nav_policy.cnn_input(obs))

  def loss(self, encoder_params, head_params, traj, key):
    """SS loss and accuracy on a rollout (leaves [T, N, ...])."""
    obs = {k: v for k, v in traj.obs.items() if k in ("rgb", "depth")}
    if self.config.task == "rp":
      flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), obs)
      k = jax.random.randint(key, (flat[next(iter(flat))].shape[0],), 0, 4)
      flat = jax.tree.map(lambda x: jax.vmap(rotate)(x, k), flat)
      logits = self.head.apply({"params": head_params}, self.features(encoder_params, flat))
      labels, weight = k, jnp.ones_like(k, jnp.float32)
    else:
      t, n = traj.action.shape
      f = self.features(encoder_params, jax.tree.map(lambda x: x.reshape(t * n, *x.shape[2:]), obs))
      f = f.reshape(t, n, -1)
      logits = self.head.apply({"params": head_params},
                               jnp.concatenate([f[:-1], f[1:]], axis=-1))
      logits = logits.reshape(-1, logits.shape[-1])
      labels = traj.action[:-1].reshape(-1)
      weight = (~traj.done[:-1]).reshape(-1).astype(jnp.float32)    # o_{t+1} is a new episode
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    total = jnp.maximum(jnp.sum(weight), 1.0)
    acc = jnp.sum(weight * (jnp.argmax(logits, -1) == labels)) / total
    return jnp.sum(weight * ce) / total, acc

  # -- phases -------------------------------------------------------------------------------

  def fit_heads(self, key, params, env):
    """Fits the SS head on `fit_steps` of the policy's experience in `env`, encoder frozen."""
    k_init, k_run = jax.random.split(key)
    head = self.init_head(k_init)
    rounds = max(1, self.config.fit_steps // self.steps_per_rollout)
    _, head, log = self._run(k_run, params, head, env, rounds, train_encoder=False)
    return head, log

  def adapt(self, key, params, head, env):
    """`budget` env steps in the target `env`: returns (adapted params, head, log)."""
    rounds = max(1, self.config.budget // self.steps_per_rollout)
    return self._run(key, params, head, env, rounds, train_encoder=True)

  def init_head(self, key):
    """Fresh SS-head params."""
    return self.head.init(key, jnp.zeros((1, self.head_in)))["params"]

  @property
  def head_in(self) -> int:
    """Width of the SS head's input."""
    width = self.trainer.policy.hidden
    return 2 * width if self.config.task == "ap" else width

  def _run(self, key, params, head, env, rounds: int, train_encoder: bool):
    c = self.config
    tx = optax.adam(c.lr if train_encoder else c.head_lr)
    trainable = {"head": head, **({"encoder": params["visual_cnn"]} if train_encoder else {})}
    opt_state = tx.init(trainable)
    # Explicit shardings on the trainer's mesh (params replicated, envs split), so that every
    # round reuses the first round's compiled program.
    rep, batch = parallel.replicated(self.trainer.mesh), parallel.batch_sharding(self.trainer.mesh)
    run = jax.jit(functools.partial(self._round, tx=tx),
                  in_shardings=(rep, rep, rep, rep, batch, rep),
                  out_shardings=(rep, rep, batch, rep))
    acting = (_reset(env, jax.random.fold_in(key, 0), c.num_envs),
              self.trainer.policy.initial_carry(c.num_envs),
              jnp.zeros((c.num_envs,), jnp.int32), jnp.ones((c.num_envs,), bool))
    params, trainable, opt_state, env = jax.device_put((params, trainable, opt_state, env), rep)
    acting = jax.device_put(acting, batch)
    log = []
    for r in range(rounds):
      trainable, opt_state, acting, stats = run(params, trainable, opt_state, env, acting,
                                                jax.random.fold_in(key, 1 + r))
      log.append({k: float(v) for k, v in stats.items()})
    if train_encoder:
      params = {**params, "visual_cnn": trainable["encoder"]}
    return params, trainable["head"], log

  def _round(self, params, trainable, opt_state, env, acting, key, *, tx):
    """One rollout with the current encoder, then `sgd_steps` steps on its SS loss."""
    k_roll, k_sgd = jax.random.split(key)
    encoder = lambda t: t.get("encoder", params["visual_cnn"])
    acting, traj = _rollout(self.trainer, {**params, "visual_cnn": encoder(trainable)}, env,
                            acting, k_roll, self.config.rollout_len)

    def sgd(carry, _):
      trainable, opt_state = carry
      # One rotation draw per rollout, so the logged loss before and after compares alike.
      grad_fn = jax.value_and_grad(lambda t: self.loss(encoder(t), t["head"], traj, k_sgd),
                                   has_aux=True)
      (loss, acc), grads = grad_fn(trainable)
      updates, opt_state = tx.update(grads, opt_state, trainable)
      return (optax.apply_updates(trainable, updates), opt_state), (loss, acc)

    (trainable, opt_state), (loss, acc) = jax.lax.scan(
        sgd, (trainable, opt_state), None, length=self.config.sgd_steps)
    return trainable, opt_state, acting, {"loss": loss[0], "accuracy": acc[0],
                                          "loss_after": loss[-1]}


def _reset(env, key, n: int):
  return jax.vmap(env.reset)(jax.random.split(key, n))


def _rollout(trainer, params, env, acting, key, length: int):
  """The policy acting (sampled actions) for `length` steps of the vmapped auto-reset env."""
  def step(carry, key):
    env_state, rnn, prev, start = carry
    rnn, logits, _ = trainer.policy_step(params, None, env_state.obs, rnn, prev, start)
    action = jax.random.categorical(key, logits).astype(jnp.int32)
    new = jax.vmap(env.step)(env_state, action)
    record = {"obs": {k: env_state.obs[k] for k in ("rgb", "depth") if k in env_state.obs},
              "action": action, "done": new.done}
    return (new, rnn, action, new.done), record

  acting, rec = jax.lax.scan(step, acting, jax.random.split(key, length))
  return acting, Rollout(**rec)


class Rollout(NamedTuple):
  """What the SS losses read from a rollout; leaves [T, N, ...]."""
  obs: dict
  action: jax.Array
  done: jax.Array
