"""Self-supervised policy adaptation (PAD, Hansen et al. 2021) for vcbench-nav policies, as
RobustNav's Table 3 uses it: action prediction (AP) and rotation prediction (RP).

    fit = pad.make_train(config, policy, params, clean_env, seed=0)  # policy: a recurrent.Trainer
    state, log = runner.run(fit, workdir, chunk)                 # the SS head, encoder frozen
    adapt = pad.make_train(config, policy, params, corrupted_env, head=fit.head(state), seed=1)
    state, log = runner.run(adapt, workdir2, chunk)              # the calibration budget
    params = adapt.adapted_params(state)

Both tasks read the policy's own visual encoder (the SimpleCNN `visual_cnn` over rgb/depth):
  ap  given the features of two consecutive frames, predict the action taken between them
      (an inverse-dynamics head; steps that end an episode are left out),
  rp  rotate a frame by k x 90 degrees, predict k from its features.
Adaptation acts with the policy in the target (corrupted) env for `budget` env steps and, after
each rollout (one update = one round), takes SGD steps on the SS loss of what it saw, updating
the encoder and the SS head; the RNN and the actor/critic stay fixed, so the policy changes only
through what the encoder now sees. No task reward is used. Fitting the head is the same loop
with the encoder frozen, `fit_steps` env steps on the clean env. Rounds run as one jitted
`lax.scan` per chunk, the state (trainables, optimiser, acting envs, key) donated.

Deviation from RobustNav, for compute: RobustNav trains the SS head jointly with the navigation
loss from the start (its "Nav loss + AP/RP" agents); here the head is fitted afterwards to the
clean agent's frozen encoder (on the clean training env), so the agent before
adaptation is the clean agent itself. Only SimpleCNN policies are supported (a frozen PVR has
no encoder to adapt).
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import struct

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


@struct.dataclass
class State:
  trainable: dict        # {'head'} (fitting) or {'head', 'encoder'} (adapting)
  opt_state: Any
  acting: tuple          # (env state, recurrent state, previous action, start), per env
  key: jax.Array         # the phase's key; round r draws from fold_in(key, 1 + r)
  round: jax.Array       # int32 [], rounds done


class Trainer:
  """One PAD phase on a SimpleCNN navigation policy (see the module docstring); the `runner`
  contract. `policy` is the policy's `recurrent.Trainer` (its network, mesh and acting path),
  `params` its trained params."""

  not_hashed = ("log_every",)

  def __init__(self, config, policy, params, env, head=None, seed: int = 0):
    check_config(config)
    if policy.frozen is not None:
      raise ConfigError("PAD adapts the policy's own SimpleCNN; this policy uses a frozen PVR")
    self.policy, self.params, self.env = policy, params, env
    self.fitting = head is None
    self._head = head
    self.encoder = nav_policy.SimpleCNN(policy.policy.hidden)
    classes = policy.policy.num_actions if config.task == "ap" else 4
    self.net = SSHead(config.head_hidden, classes)
    steps = config.fit_steps if self.fitting else config.budget
    self.num_updates = max(1, steps // (config.num_envs * config.rollout_len))
    # The run's identity for the runner's checkpoints: the PAD config and the phase.
    self.config = ml_collections.ConfigDict({**config.to_dict(), "phase": (
        "fit" if self.fitting else "adapt"), "seed": seed})
    self.tx = optax.adam(config.head_lr if self.fitting else config.lr)
    rep, batch = parallel.replicated(policy.mesh), parallel.batch_sharding(policy.mesh)
    self._sharding = State(trainable=rep, opt_state=rep, acting=batch, key=rep, round=rep)
    self._chunks = {}
    self._args = jax.device_put((params, env), rep)

  # -- the runner's contract ------------------------------------------------------------------

  def init(self, key) -> State:
    if self.fitting:
      k_init, key = jax.random.split(key)
      head = self.net.init(k_init, jnp.zeros((1, self.head_in)))["params"]
    else:
      head = self._head
    trainable = {"head": head, **({} if self.fitting else
                                  {"encoder": self.params["visual_cnn"]})}
    n = self.config.num_envs
    acting = (_reset(self.env, jax.random.fold_in(key, 0), n),
              self.policy.policy.initial_carry(n), jnp.zeros((n,), jnp.int32),
              jnp.ones((n,), bool))
    state = State(trainable=trainable, opt_state=self.tx.init(trainable), acting=acting,
                  key=key, round=jnp.zeros((), jnp.int32))
    # A copy: chunks donate the state, which must not delete the caller's params or head.
    return jax.device_put(state, self._sharding, may_alias=False)

  def train_chunk(self, state: State, n: int) -> tuple[State, dict]:
    if n not in self._chunks:
      rep = parallel.replicated(self.policy.mesh)
      self._chunks[n] = jax.jit(functools.partial(self._chunk, n=n), donate_argnums=0,
                                in_shardings=(self._sharding, rep),
                                out_shardings=(self._sharding, rep))
    return self._chunks[n](state, self._args)

  def abstract_state(self) -> State:
    return jax.eval_shape(self.init, jax.random.key(0))

  def abstract_metrics(self, n: int) -> dict:
    return {k: jax.ShapeDtypeStruct((n,), jnp.float32) for k in ("loss", "accuracy",
                                                                 "loss_after")}

  # -- results --------------------------------------------------------------------------------

  def head(self, state: State):
    return state.trainable["head"]

  def adapted_params(self, state: State):
    """The policy's params with the adapted encoder."""
    return {**self.params, "visual_cnn": state.trainable.get("encoder",
                                                             self.params["visual_cnn"])}

  @property
  def head_in(self) -> int:
    """Width of the SS head's input."""
    width = self.policy.policy.hidden
    return 2 * width if self.config.task == "ap" else width

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
      logits = self.net.apply({"params": head_params}, self.features(encoder_params, flat))
      labels, weight = k, jnp.ones_like(k, jnp.float32)
    else:
      t, n = traj.action.shape
      f = self.features(encoder_params,
                        jax.tree.map(lambda x: x.reshape(t * n, *x.shape[2:]), obs))
      f = f.reshape(t, n, -1)
      logits = self.net.apply({"params": head_params},
                              jnp.concatenate([f[:-1], f[1:]], axis=-1))
      logits = logits.reshape(-1, logits.shape[-1])
      labels = traj.action[:-1].reshape(-1)
      weight = (~traj.done[:-1]).reshape(-1).astype(jnp.float32)    # o_{t+1} is a new episode
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    total = jnp.maximum(jnp.sum(weight), 1.0)
    acc = jnp.sum(weight * (jnp.argmax(logits, -1) == labels)) / total
    return jnp.sum(weight * ce) / total, acc

  # -- jitted pieces --------------------------------------------------------------------------

  def _chunk(self, state: State, args, n: int):
    return jax.lax.scan(lambda s, _: self._round(s, *args), state, None, length=n)

  def _round(self, state: State, params, env):
    """One rollout with the current encoder, then `sgd_steps` steps on its SS loss."""
    k_roll, k_sgd = jax.random.split(jax.random.fold_in(state.key, 1 + state.round))
    encoder = lambda t: t.get("encoder", params["visual_cnn"])
    acting, traj = _rollout(self.policy, {**params, "visual_cnn": encoder(state.trainable)},
                            env, state.acting, k_roll, self.config.rollout_len)

    def sgd(carry, _):
      trainable, opt_state = carry
      # One rotation draw per rollout, so the logged loss before and after compares alike.
      grad_fn = jax.value_and_grad(lambda t: self.loss(encoder(t), t["head"], traj, k_sgd),
                                   has_aux=True)
      (loss, acc), grads = grad_fn(trainable)
      updates, opt_state = self.tx.update(grads, opt_state, trainable)
      return (optax.apply_updates(trainable, updates), opt_state), (loss, acc)

    (trainable, opt_state), (loss, acc) = jax.lax.scan(
        sgd, (state.trainable, state.opt_state), None, length=self.config.sgd_steps)
    new = State(trainable=trainable, opt_state=opt_state, acting=acting, key=state.key,
                round=state.round + 1)
    return new, {"loss": loss[0], "accuracy": acc[0], "loss_after": loss[-1]}


def make_train(config, policy, params, env, *, head=None, seed: int = 0) -> Trainer:
  """The head-fitting phase (`head` None: a fresh head, encoder frozen, `fit_steps` on the
  clean `env`) or the adaptation phase (encoder and `head` trained, `budget` on the target
  `env`) of PAD for the policy `params` of `policy` (its `recurrent.Trainer`); `runner.run`
  draws the phase's randomness from jax.random.key(seed)."""
  return Trainer(config, policy, params, env, head, seed)


def _reset(env, key, n: int):
  return jax.vmap(env.reset)(jax.random.split(key, n))


def _rollout(policy, params, env, acting, key, length: int):
  """The policy acting (sampled actions) for `length` steps of the vmapped auto-reset env."""
  def step(carry, key):
    env_state, rnn, prev, start = carry
    rnn, logits, _ = policy.policy_step(params, None, env_state.obs, rnn, prev, start)
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
