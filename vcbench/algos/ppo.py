"""Recurrent PPO for JAX-native navigation envs, fully jitted (PureJaxRL / brax design).

Usage:

    from vcbench.algos import ppo, runner
    config = ppo.default_config()
    config.num_envs, config.num_updates = 64, 2000
    config.policy.encoder = "vc1_vitb"; config.policy.checkpoint = "vc1_vitb.pth"
    trainer = ppo.make_train(config, env)
    state, metrics = trainer.train(jax.random.key(config.seed))   # one program, no checkpoints
    # or: chunks of updates, checkpointed after each, resumed from the latest on restart
    state, metrics = runner.run(trainer, workdir, chunk=100)

`metrics` maps names to arrays [num_updates]: episode_return / success / spl /
episode_length (means over the episodes that finished in that update; NaN when none did) and
episodes (their count), reward, the losses, entropy, approx_kl, clip_frac, grad_norm, lr.

An update (`PPO.update`) is a rollout (a scan over `rollout_len` env steps of the vmapped env
with the policy's one-step path), GAE, then `update_epochs` x `num_minibatches` SGD steps on
the clipped objective. Minibatches split the envs and keep every rollout sequence whole; the
policy's sequence path re-runs the RNN from the rollout's initial state with the per-step
episode starts. GAE does not bootstrap across a `done` (time-limit ends are treated as
terminal, as in habitat-baselines). The policy, optimiser, sharding over devices and the
jitted chunks are `recurrent.Trainer`'s (its docstring has the design).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
from flax import struct

from vcbench.algos import recurrent
from vcbench.config import ConfigError, check_keys, require


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
  c.policy = recurrent.policy_config()
  return c


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
  recurrent.check_policy(config)
  n, m = config.num_envs, config.num_minibatches
  if n % m:
    raise ConfigError(f"config.num_envs = {n} is not divisible by config.num_minibatches = {m}")
  if n % num_devices or (n // m) % num_devices:
    raise ConfigError(
        f"config.num_envs = {n} with config.num_minibatches = {m} gives minibatches of {n // m} "
        f"envs, which must split evenly over the {num_devices} devices: use a num_envs that "
        f"is a multiple of num_minibatches * devices = {m * num_devices}")
  if recurrent.num_updates(config) < 1:
    raise ConfigError(
        f"no PPO update to run: config.num_updates = {config.num_updates} and "
        f"config.total_env_steps = {config.total_env_steps} < num_envs * rollout_len = "
        f"{n * config.rollout_len}")


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


class PPO:
  """PPO's update on `recurrent.Trainer`'s pieces."""

  check_config = staticmethod(check_config)

  @staticmethod
  def log_line(m: dict, steps: int, sps: str) -> str:
    return (f"update {int(m['update'])} | env steps {steps:,} | return {m['episode_return']:.3f} "
            f"success {m['success']:.3f} spl {m['spl']:.3f} (n={int(m['episodes'])}) | "
            f"pg {m['policy_loss']:.4f} vf {m['value_loss']:.4f} ent {m['entropy']:.3f} "
            f"kl {m['approx_kl']:.4f} | {sps} steps/s")

  @staticmethod
  def collect(t: recurrent.Trainer, state: recurrent.TrainState, env, frozen, key):
    """The rollout of `state.params`' sampled actions (`Trainer.rollout`): ((env_state, carry,
    prev_action, start) after it, the `Transition`s [T, N], the env's metrics [T, N])."""
    def act(env_state, rnn, prev_action, start, key):
      obs = t.obs(env_state.obs, frozen)    # a frozen PVR's tokens, recorded for the epochs
      rnn, logits, value = t.policy_step(state.params, frozen, obs, rnn, prev_action, start)
      action = jax.random.categorical(key, logits).astype(jnp.int32)
      log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
      record = lambda new: Transition(
          obs=obs, prev_action=prev_action, start=start, action=action,
          log_prob=log_prob, value=value, reward=new.reward, done=new.done)
      return rnn, action, record
    return t.rollout(state, env, key, act)

  def update(self, t: recurrent.Trainer, state: recurrent.TrainState, env, frozen):
    c = t.config
    key, k_rollout, k_epochs = jax.random.split(state.key, 3)
    (env_state, carry, prev_action, start), traj, ep_metrics = self.collect(
        t, state, env, frozen, k_rollout)
    _, _, last_value = t.policy_step(state.params, frozen, env_state.obs, carry, prev_action,
                                     start)
    adv, returns = gae(traj.reward, traj.value, traj.done, last_value, c.gamma, c.gae_lambda)
    (params, opt_state), stats = t.sgd_epochs(
        state, ((traj, adv, returns), state.carry), frozen, k_epochs,
        functools.partial(self.loss, t))
    metrics = {**recurrent.finished_episode_means(traj.done, ep_metrics),
               **jax.tree.map(jnp.mean, stats), "reward": jnp.mean(traj.reward),
               "lr": t.current_lr(state)}
    new = recurrent.TrainState(params=params, opt_state=opt_state, env_state=env_state,
                               carry=carry, prev_action=prev_action, start=start, key=key,
                               update=state.update + 1)
    return new, metrics

  @staticmethod
  def loss(t: recurrent.Trainer, params, minibatch, frozen):
    c = t.config
    (traj, adv, returns), carry0 = minibatch
    _, logits, value = t.policy.apply({"params": params}, traj.obs, carry0,
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


def make_train(config, env, *, encoder=None, log_fn: Optional[Callable] = None,
               mesh=None) -> recurrent.Trainer:
  """A PPO trainer for `config` (see `default_config`) on `env` (vcbench-nav interface).

  encoder: a loaded `zoo.Encoder` to use as the PVR (frozen or fine-tuned) instead of loading
    config.policy.encoder (e.g. a custom or tiny one).
  log_fn: called with the metrics dict (+ 'update') every config.log_every updates from inside
    the jitted loop; None: a `PrintLogger`; False: no logging.
  mesh: the device mesh (default: all devices on the 'data' axis).
  """
  return recurrent.Trainer(config, env, PPO(), encoder=encoder, log_fn=log_fn, mesh=mesh)
