"""Imitation for navigation (CortexBench trains ObjectNav by BC): the recurrent policy learns
a teacher's actions -- the shortest-path expert's, or (`teacher='explorer'`) those of a
teacher that explores until it has seen the goal -- fully jitted like PPO.

    config = nav_bc.default_config()
    trainer = nav_bc.make_train(config, env)            # env: vcbench-nav, auto-reset
    state, metrics = runner.run(trainer, workdir, chunk=100)

Demonstrations are generated on the fly rather than stored: every update rolls the batch of
envs forward `rollout_len` steps, labels every step with `expert.action`, and takes one
cross-entropy step on those sequences (the policy's sequence path from the rollout's initial
recurrent state, as PPO's update does). The action actually executed is the expert's, except
with probability `expert_noise` a uniformly random move or turn (DART-style noise injection, so the
demonstrations show how to recover from mistakes) and with probability `learner_mix` the
policy's own sampled action (DAgger-style: 0 is pure behaviour cloning). The previous action
fed to the policy is the executed one, as at test time. With `critic.coef` > 0 the value head
also regresses the GAE returns of the executed rollout (PPO's targets), so that PPO can take
over from the imitation agent with a critic that already knows its returns: an untrained critic
would turn the first PPO updates into noise on a good policy. A stored demo set of 2k episodes of
64x64 RGB-D would need ~10 GB here; rolling the expert costs less than the gradient step.

The trainer is `recurrent.Trainer` (policy, optimiser, sharding; `runner.run` checkpoints it),
shared with PPO; this module adds its config check and its update.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
import optax

from vcbench.algos import ppo
from vcbench.algos import recurrent
from vcbench.config import ConfigError, check_keys, require, require_choice
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import expert
from vcbench.envs.nav import explorer

TEACHERS = ("expert", "explorer")


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_envs = 16              # parallel envs; divisible by the device count.
  c.rollout_len = 64           # steps per env per update (sequence length of a gradient step).
  c.num_updates = 0            # 0: derived from total_env_steps.
  c.total_env_steps = 500_000
  c.update_epochs = 1          # gradient passes over each rollout.
  c.num_minibatches = 1        # minibatches per pass, split over envs.
  c.lr = 1e-3                  # Adam (habitat-web IL: 1e-3).
  c.adam_eps = 1e-5
  c.anneal_lr = True
  c.max_grad_norm = 0.5
  c.teacher = "expert"         # 'expert' (shortest path) or 'explorer' (`explorer.py`: explores
                               # until it has seen the goal; ObjectNav / ImageNav).
  c.expert_noise = 0.1         # probability of executing a random action instead.
  c.learner_mix = 0.0          # probability of executing the policy's own sample (DAgger).
  c.critic = critic_config()
  # Steps whose geodesic distance to the goal is below `near_goal_radius` weigh
  # 1 + `near_goal_weight` in the cross-entropy (normalised to mean 1 over the batch): the few
  # steps that decide between END and one more move, where imitated agents fail most.
  c.near_goal_weight = 0.0
  c.near_goal_radius = 0.5     # metres
  # Weight of the auxiliary losses, beside the imitation loss: the binary cross-entropies of
  # the policy's recognition heads (ObjectNav; labels from the env's semantic frame),
  # `aux_goal_visible`'s (is the goal in view?) and `aux_categories`' (which categories are;
  # summed over them), and `aux_depth`'s squared error (summed over the grid's cells).
  c.aux_coef = 0.0
  c.log_every = 10
  c.policy = recurrent.policy_config()
  return c


def critic_config() -> ml_collections.ConfigDict:
  """The value head's regression on the executed rollout's returns (off at coef 0)."""
  c = ml_collections.ConfigDict()
  c.coef = 0.0                 # weight of 0.5 * (value - return)^2 beside the cross-entropy.
  c.gamma = 0.99               # PPO's discount and GAE lambda, so PPO inherits a fitted critic.
  c.gae_lambda = 0.95
  return c


def check_config(config, num_devices: int = 1) -> None:
  check_keys(config, default_config())
  require_choice(config, "teacher", TEACHERS)
  for key in ("num_envs", "rollout_len", "update_epochs", "num_minibatches"):
    require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")
  for key in ("expert_noise", "learner_mix", "critic.gamma", "critic.gae_lambda"):
    require(config, key, lambda v: 0.0 <= v <= 1.0, "a probability in [0, 1]")
  if config.expert_noise + config.learner_mix > 1.0:
    raise ConfigError(f"config.expert_noise + config.learner_mix = "
                      f"{config.expert_noise + config.learner_mix} > 1")
  for key in ("critic.coef", "near_goal_weight", "near_goal_radius", "aux_coef"):
    require(config, key, lambda v: v >= 0, "a number >= 0")
  p = config.policy
  if config.aux_coef and not (p.aux_goal_visible or p.aux_categories or p.aux_depth):
    raise ConfigError(f"config.aux_coef = {config.aux_coef} trains the auxiliary heads, but "
                      "config.policy.aux_goal_visible, aux_categories and aux_depth are off "
                      "(the policy has none)")
  if p.aux_categories not in (0, nav_env.NUM_CATEGORIES):
    raise ConfigError(f"config.policy.aux_categories = {p.aux_categories}: the env labels "
                      f"{nav_env.NUM_CATEGORIES} object categories (0: no head)")
  recurrent.check_policy(config)
  n, m = config.num_envs, config.num_minibatches
  if n % (m * num_devices):
    raise ConfigError(f"config.num_envs = {n} must be a multiple of num_minibatches * devices "
                      f"= {m} * {num_devices}")
  if recurrent.num_updates(config) < 1:
    raise ConfigError(f"no update to run: num_updates = {config.num_updates}, total_env_steps "
                      f"= {config.total_env_steps} < num_envs * rollout_len")


class BC:
  """Imitation of the shortest-path expert on `recurrent.Trainer`'s pieces."""

  check_config = staticmethod(check_config)

  @staticmethod
  def log_line(m: dict, steps: int, sps: str) -> str:
    return (f"update {int(m['update'])} | env steps {steps:,} | bc loss {float(m['loss']):.4f} "
            f"acc {float(m['accuracy']):.3f} vf {float(m['value_loss']):.4f} | executed: success "
            f"{float(m['success']):.3f} spl {float(m['spl']):.3f} (n={int(m['episodes'])}) | "
            f"{sps} steps/s")

  def update(self, t: recurrent.Trainer, state: recurrent.TrainState, env, frozen):
    c = t.config
    key, k_rollout, k_epochs = jax.random.split(state.key, 3)

    def act(env_state, rnn, prev_action, start, key):
      k_policy, k_noise, k_random = jax.random.split(key, 3)
      obs = t.obs(env_state.obs, frozen)    # a frozen PVR's tokens, recorded for the epochs
      rnn, logits, value = t.policy_step(state.params, frozen, obs, rnn, prev_action, start)
      label = jax.vmap(_teacher(env))(env_state)
      u = jax.random.uniform(k_noise, label.shape)
      # Noise never calls END: a random stop would just end the demonstration.
      random = jax.random.randint(k_random, label.shape, 0, nav_env.END)
      own = jax.random.categorical(k_policy, logits).astype(jnp.int32)
      action = jnp.where(u < c.expert_noise, random,
                         jnp.where(u < c.expert_noise + c.learner_mix, own, label))
      sim = _nav_sim(env_state)
      labels = dict(near=sim.distance < c.near_goal_radius, goal_visible=sim.goal_visible,
                    categories_visible=sim.categories_visible)
      if c.policy.aux_depth:
        labels["coarse_depth"] = jax.vmap(env.coarse_depth, (0, None))(sim, c.policy.aux_depth)
      record = lambda new: dict(obs=obs, prev_action=prev_action, start=start, label=label,
                                done=new.done, reward=new.reward, value=value, **labels)
      return rnn, action, record

    (env_state, carry, prev_action, start), traj, ep_metrics = t.rollout(
        state, env, k_rollout, act)
    _, _, last_value = t.policy_step(state.params, frozen, env_state.obs, carry, prev_action,
                                     start)
    _, traj["return"] = ppo.gae(traj["reward"], traj["value"], traj["done"], last_value,
                                c.critic.gamma, c.critic.gae_lambda)
    (params, opt_state), stats = t.sgd_epochs(state, (traj, state.carry), frozen, k_epochs,
                                              functools.partial(self.loss, t))
    metrics = {**recurrent.finished_episode_means(traj["done"], ep_metrics),
               **jax.tree.map(jnp.mean, stats), "lr": t.current_lr(state)}
    new = recurrent.TrainState(params=params, opt_state=opt_state, env_state=env_state,
                               carry=carry, prev_action=prev_action, start=start, key=key,
                               update=state.update + 1)
    return new, metrics

  @staticmethod
  def loss(t: recurrent.Trainer, params, minibatch, frozen):
    traj, carry0 = minibatch
    (_, logits, value), inter = t.policy.apply(
        {"params": params}, traj["obs"], carry0, traj["prev_action"], traj["start"], frozen,
        mutable=["intermediates"])
    log_probs = jax.nn.log_softmax(logits)
    weight = 1.0 + t.config.near_goal_weight * traj["near"].astype(jnp.float32)
    nll = -jnp.take_along_axis(log_probs, traj["label"][..., None], -1)[..., 0]
    loss = jnp.sum(weight * nll) / jnp.sum(weight)
    accuracy = jnp.mean((jnp.argmax(logits, -1) == traj["label"]).astype(jnp.float32))
    value_loss = 0.5 * jnp.mean(jnp.square(value - traj["return"]))
    total = loss + t.config.critic.coef * value_loss
    stats = {"loss": loss, "accuracy": accuracy, "value_loss": value_loss}
    if t.config.aux_coef:
      heads = inter["intermediates"]
      if "goal_visible_logit" in heads:
        (aux,) = heads["goal_visible_logit"]
        stats["aux_loss"], stats["aux_accuracy"] = _recognition(aux, traj["goal_visible"])
        total = total + t.config.aux_coef * stats["aux_loss"]
      if "categories_visible_logits" in heads:
        (aux,) = heads["categories_visible_logits"]
        loss_k, stats["aux_categories_accuracy"] = _recognition(aux, traj["categories_visible"])
        stats["aux_categories_loss"] = loss_k * aux.shape[-1]   # summed over the categories
        total = total + t.config.aux_coef * stats["aux_categories_loss"]
      if "coarse_depth" in heads:
        (depth,) = heads["coarse_depth"]
        error = depth - traj["coarse_depth"]
        stats["aux_depth_loss"] = jnp.mean(jnp.sum(jnp.square(error), -1))
        stats["aux_depth_mae"] = jnp.mean(jnp.abs(error))
        total = total + t.config.aux_coef * stats["aux_depth_loss"]
    return total, stats


def _recognition(logits, seen):
  """Mean binary cross-entropy and accuracy of in-view logits against bool labels."""
  target = seen.astype(jnp.float32)
  return (jnp.mean(optax.sigmoid_binary_cross_entropy(logits, target)),
          jnp.mean(((logits > 0) == seen).astype(jnp.float32)))


def _teacher(env) -> Callable:
  """state -> the teacher's action, for one state of the trainer's env."""
  if isinstance(env, explorer.WithMap):
    return env.label
  return functools.partial(expert.action, env)


def _nav_sim(env_state):
  return env_state.sim.nav if isinstance(env_state.sim, explorer.MapSim) else env_state.sim


def make_train(config, env, *, encoder=None, log_fn: Optional[Callable] = None,
               mesh=None) -> recurrent.Trainer:
  """A BC trainer (see `default_config`) on a vcbench-nav env with auto-reset; with the
  explorer teacher, the env's states also carry its map (`explorer.WithMap`)."""
  if config.teacher == "explorer":
    env = explorer.WithMap(env)
  return recurrent.Trainer(config, env, BC(), encoder=encoder, log_fn=log_fn, mesh=mesh)
