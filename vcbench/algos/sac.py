"""Soft actor-critic on state (Haarnoja et al. 2018, with the learned temperature of the 2018
"applications" paper), the whole loop jitted: acting, the env step, the replay buffer and the
gradient updates are one nested `lax.scan` on device.

The env is any batched functional env (`envs.core.Env`): C MuJoCo on the host through the
ordered-callback bridge (`envs.host.HostEnv`), or a JAX-native one (MJX), with the same code.
One trainer update is one episode of every env: reset from seeds that never repeat, then
`horizon` steps, each storing `num_envs` transitions in the replay buffer and, once `warmup`
transitions are stored, taking `updates_per_step` gradient steps (before that, actions are
uniform). Episode ends are time limits (bootstrapped through): right for the DeepMind Control
tasks, which have no terminal states.

Hyper-parameters (`default_config`) are SAC's state-based DMC settings as in DrQ / pytorch_sac
(Yarats & Kostrikov), scaled to a CPU: 2x256 MLPs and batch 256 rather than 2x1024 and 1024.
"""
from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.episodes = 200          # Trainer updates: episodes of every env.
  c.num_envs = 2
  c.horizon = 500
  c.hidden = (256, 256)
  c.batch_size = 256
  c.actor_lr = 3e-4
  c.critic_lr = 3e-4
  c.alpha_lr = 3e-4
  c.init_alpha = 0.1
  c.gamma = 0.99
  c.tau = 0.005
  c.warmup = 5000           # Transitions of uniform actions before the first update.
  c.updates_per_step = 1    # Gradient steps per env step (of all envs).
  c.buffer_size = 500_000   # Transitions kept (the oldest are overwritten).
  c.seed_offset = 1_000_000  # Training episodes' seeds start here: disjoint from demo/eval seeds.
  c.log_every = 1
  return c


class MLP(nn.Module):
  hidden: tuple[int, ...]
  out: int

  @nn.compact
  def __call__(self, x):
    for h in self.hidden:
      x = nn.relu(nn.Dense(h)(x))
    return nn.Dense(self.out)(x)


class Actor(nn.Module):
  """Tanh-squashed Gaussian policy: (mean, log_std) of the pre-squash Gaussian."""
  hidden: tuple[int, ...]
  action_dim: int

  @nn.compact
  def __call__(self, obs):
    out = MLP(self.hidden, 2 * self.action_dim)(obs)
    mean, log_std = jnp.split(out, 2, axis=-1)
    log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(log_std) + 1)
    return mean, log_std


class Critic(nn.Module):
  """Two Q-functions (clipped double Q)."""
  hidden: tuple[int, ...]

  @nn.compact
  def __call__(self, obs, action):
    x = jnp.concatenate([obs, action], -1)
    return jnp.stack([MLP(self.hidden, 1)(x)[..., 0] for _ in range(2)])


def sample_action(actor: Actor, params, obs, key):
  """(action in [-1, 1], its log-probability) under the squashed Gaussian."""
  mean, log_std = actor.apply(params, obs)
  std = jnp.exp(log_std)
  u = mean + std * jax.random.normal(key, mean.shape)
  logp = jnp.sum(-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * jnp.log(2 * jnp.pi), -1)
  # Change of variables through tanh, in the numerically stable form.
  logp -= jnp.sum(2 * (jnp.log(2.0) - u - jax.nn.softplus(-2 * u)), -1)
  return jnp.tanh(u), logp


def mean_action(actor: Actor, params, obs):
  return jnp.tanh(actor.apply(params, obs)[0])


@struct.dataclass
class Buffer:
  obs: jax.Array
  action: jax.Array
  reward: jax.Array
  next_obs: jax.Array
  size: jax.Array
  ptr: jax.Array

  @classmethod
  def empty(cls, capacity: int, obs_dim: int, action_dim: int) -> "Buffer":
    z = functools.partial(jnp.zeros, dtype=jnp.float32)
    return cls(z((capacity, obs_dim)), z((capacity, action_dim)), z((capacity,)),
               z((capacity, obs_dim)), jnp.int32(0), jnp.int32(0))

  def add(self, obs, action, reward, next_obs) -> "Buffer":
    n, capacity = obs.shape[0], self.obs.shape[0]
    idx = (self.ptr + jnp.arange(n)) % capacity
    return self.replace(obs=self.obs.at[idx].set(obs), action=self.action.at[idx].set(action),
                        reward=self.reward.at[idx].set(reward),
                        next_obs=self.next_obs.at[idx].set(next_obs),
                        size=jnp.minimum(self.size + n, capacity), ptr=(self.ptr + n) % capacity)

  def sample(self, key, batch_size: int):
    idx = jax.random.randint(key, (batch_size,), 0, jnp.maximum(self.size, 1))
    return self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx]


@struct.dataclass
class TrainState:
  actor: Any
  critic: Any
  target: Any
  log_alpha: jax.Array
  actor_opt: Any
  critic_opt: Any
  alpha_opt: Any
  buffer: Buffer
  key: jax.Array
  episode: jax.Array      # Episodes done (of every env): the next episode's seeds.
  env_steps: jax.Array    # Transitions stored so far.


class Trainer:
  """SAC on `env` (a batched functional env with a `state` observation): the runner's contract
  (`algos/runner.py`), one update = one episode of every env."""

  # A longer run continues a shorter one: `episodes` is how far to train, not what is trained.
  not_hashed = ("log_every", "episodes")

  def __init__(self, config, env, obs_key: str = "state"):
    self.config, self.env, self.obs_key = config, env, obs_key
    self.num_updates = int(config.episodes)
    self.obs_dim = int(env.observation_spec()[obs_key].shape[0])
    self.action_dim = int(env.action_dim)
    if env.num_envs != config.num_envs:
      raise ValueError(f"SAC: config.num_envs is {config.num_envs} but the env batches "
                       f"{env.num_envs}")
    self.actor = Actor(tuple(config.hidden), self.action_dim)
    self.critic = Critic(tuple(config.hidden))
    self.actor_tx = optax.adam(config.actor_lr)
    self.critic_tx = optax.adam(config.critic_lr)
    self.alpha_tx = optax.adam(config.alpha_lr)
    self.capacity = int(config.buffer_size)
    self._train = jax.jit(self._episodes, static_argnums=1, donate_argnums=0)

  def init(self, key) -> TrainState:
    key, ka, kc = jax.random.split(key, 3)
    obs = jnp.zeros((1, self.obs_dim))
    actor = self.actor.init(ka, obs)
    critic = self.critic.init(kc, obs, jnp.zeros((1, self.action_dim)))
    log_alpha = jnp.log(jnp.float32(self.config.init_alpha))
    target = jax.tree.map(jnp.copy, critic)  # Its own buffers: the state is donated.
    return TrainState(actor, critic, target, log_alpha, self.actor_tx.init(actor),
                      self.critic_tx.init(critic), self.alpha_tx.init(log_alpha),
                      Buffer.empty(self.capacity, self.obs_dim, self.action_dim), key,
                      jnp.int32(0), jnp.int32(0))

  def train_chunk(self, state: TrainState, n: int):
    return self._train(state, int(n))

  def abstract_state(self) -> TrainState:
    return jax.eval_shape(self.init, jax.random.key(0))

  def abstract_metrics(self, n: int) -> dict:
    return {k: jax.ShapeDtypeStruct((n,), jnp.float32) for k in METRIC_NAMES}

  # The loop: episodes -> steps -> gradient updates, all scanned.

  def _episodes(self, state: TrainState, n: int):
    return jax.lax.scan(lambda s, _: self._episode(s), state, None, length=n)

  def _episode(self, state: TrainState):
    c = self.config
    seeds = c.seed_offset + state.episode * c.num_envs + jnp.arange(c.num_envs)
    env_state = self.env.reset(seeds)

    def step(carry, _):
      state, env_state, ret = carry
      key, k_act, k_upd = jax.random.split(state.key, 3)
      obs = env_state.obs[self.obs_key]
      explore = jax.random.uniform(k_act, (c.num_envs, self.action_dim), minval=-1, maxval=1)
      policy = sample_action(self.actor, state.actor, obs, k_act)[0]
      action = jnp.where(state.env_steps < c.warmup, explore, policy)
      env_state = self.env.step(env_state, action)
      state = state.replace(
          key=key, env_steps=state.env_steps + c.num_envs,
          buffer=state.buffer.add(obs, action, env_state.reward, env_state.obs[self.obs_key]))
      state, m = jax.lax.cond(state.env_steps >= c.warmup, self._updates, self._no_updates,
                              state, k_upd)
      return (state, env_state, ret + env_state.reward), m

    (state, _, ret), m = jax.lax.scan(step, (state, env_state, jnp.zeros(c.num_envs)), None,
                                      length=c.horizon)
    metrics = {k: jnp.mean(v) for k, v in m.items()}
    metrics["return"] = jnp.mean(ret)
    return state.replace(episode=state.episode + 1), metrics

  def _no_updates(self, state, key):
    del key
    return state, {k: jnp.float32(0) for k in UPDATE_METRICS} | {
        "alpha": jnp.exp(state.log_alpha)}

  def _updates(self, state, key):
    keys = jax.random.split(key, self.config.updates_per_step)
    state, m = jax.lax.scan(self._update, state, keys)
    return state, {k: jnp.mean(v) for k, v in m.items()}

  def _update(self, state: TrainState, key):
    c = self.config
    k_batch, k_next, k_pi = jax.random.split(key, 3)
    obs, action, reward, next_obs = state.buffer.sample(k_batch, c.batch_size)
    alpha = jnp.exp(state.log_alpha)

    next_action, next_logp = sample_action(self.actor, state.actor, next_obs, k_next)
    target_q = jnp.min(self.critic.apply(state.target, next_obs, next_action), 0)
    target = jax.lax.stop_gradient(reward + c.gamma * (target_q - alpha * next_logp))

    def critic_loss(params):
      q = self.critic.apply(params, obs, action)
      return jnp.mean(jnp.sum((q - target) ** 2, 0)), jnp.mean(q)

    (c_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(state.critic)
    updates, critic_opt = self.critic_tx.update(grads, state.critic_opt)
    critic = optax.apply_updates(state.critic, updates)

    def actor_loss(params):
      pi, logp = sample_action(self.actor, params, obs, k_pi)
      q = jnp.min(self.critic.apply(critic, obs, pi), 0)
      return jnp.mean(alpha * logp - q), logp

    (a_loss, logp), grads = jax.value_and_grad(actor_loss, has_aux=True)(state.actor)
    updates, actor_opt = self.actor_tx.update(grads, state.actor_opt)
    actor = optax.apply_updates(state.actor, updates)

    target_entropy = -float(self.action_dim)
    entropy = -jax.lax.stop_gradient(jnp.mean(logp))

    def alpha_loss(log_alpha):
      return jnp.exp(log_alpha) * (entropy - target_entropy)

    grads = jax.grad(alpha_loss)(state.log_alpha)
    updates, alpha_opt = self.alpha_tx.update(grads, state.alpha_opt)
    log_alpha = optax.apply_updates(state.log_alpha, updates)
    target_params = optax.incremental_update(critic, state.target, c.tau)
    state = state.replace(actor=actor, critic=critic, target=target_params, log_alpha=log_alpha,
                          actor_opt=actor_opt, critic_opt=critic_opt, alpha_opt=alpha_opt)
    return state, {"critic_loss": c_loss, "actor_loss": a_loss, "q": q_mean,
                   "entropy": entropy, "alpha": jnp.exp(log_alpha)}


UPDATE_METRICS = ("critic_loss", "actor_loss", "q", "entropy")
METRIC_NAMES = UPDATE_METRICS + ("alpha", "return")


def make_train(config, env, obs_key: str = "state") -> Trainer:
  return Trainer(config, env, obs_key)


def evaluate(actor: Actor, params, env, seeds: jax.Array, horizon: int) -> jax.Array:
  """Per-env returns of the deterministic (mean) policy over one episode from `seeds`."""
  env_state = env.reset(seeds)

  def step(carry, _):
    env_state, ret = carry
    action = mean_action(actor, params, env_state.obs["state"])
    env_state = env.step(env_state, action)
    return (env_state, ret + env_state.reward), None

  (_, ret), _ = jax.lax.scan(step, (env_state, jnp.zeros(seeds.shape[0])), None, length=horizon)
  return ret


def actor_arrays(params) -> dict[str, np.ndarray]:
  """The actor's parameters as flat '/'-joined names -> arrays (an .npz's contents)."""
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return {"/".join(str(getattr(k, "key", k)) for k in path): np.asarray(v) for path, v in flat}


def actor_params(arrays: dict[str, np.ndarray]):
  """Inverse of `actor_arrays`."""
  tree: dict = {}
  for name, value in arrays.items():
    node = tree
    *parents, leaf = name.split("/")
    for p in parents:
      node = node.setdefault(p, {})
    node[leaf] = jnp.asarray(value)
  return tree
