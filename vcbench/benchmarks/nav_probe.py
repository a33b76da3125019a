"""Is a trained navigation policy looking? Probes of a policy's visual pathway.

- `visual_stats`: mean |x| of the visual encoder's output (the SimpleCNN's last layer, before
  any LayerNorm) over the first views of up to 16 episodes, and the softmax's std across those
  views averaged over actions: ~0 means the policy's output does not depend on what it sees;
- `expert_agreement`: how often its most likely action equals the shortest-path expert's along
  expert-driven rollouts (teacher forcing; episodes that end are replaced, as in training).
`python -m launch.nav_probe` runs both on a nav job's selected params and a fresh init.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.envs.nav import expert


def visual_stats(trainer, params, env) -> tuple[float, float]:
  """(mean |visual features|, softmax std across views) at the first step of up to 16 val
  episodes."""
  n = min(16, len(env.episodes))
  state = jax.vmap(env.reset_to)(jnp.arange(n))
  obs = jax.tree.map(lambda x: x[None], trainer.obs(state.obs))
  (_, logits, _), inter = trainer.policy.apply(
      {"params": params}, obs, trainer.policy.initial_carry(n), jnp.zeros((1, n), jnp.int32),
      jnp.ones((1, n), bool), capture_intermediates=True)
  features = inter["intermediates"]["visual_cnn"]["Dense_0"]["__call__"][0]
  return (float(jnp.abs(features).mean()), float(jax.nn.softmax(logits[0]).std(0).mean()))


def expert_agreement(trainer, params, env, envs: int, steps: int) -> float:
  """Share of steps where the policy's argmax is the expert's action, the expert driving."""
  state = jax.vmap(env.reset)(jax.random.split(jax.random.key(5), envs))
  carry = trainer.policy.initial_carry(envs)
  prev, start = jnp.zeros(envs, jnp.int32), jnp.ones(envs, bool)
  policy = jax.jit(trainer.policy_step)
  step = jax.jit(jax.vmap(env.step))
  label_fn = jax.jit(jax.vmap(expert.action, in_axes=(None, 0)))
  hits = []
  for _ in range(steps):
    carry, logits, _ = policy(params, trainer.frozen, state.obs, carry, prev, start)
    label = label_fn(env, state)
    hits.append(np.asarray(jnp.argmax(logits, -1) == label))
    state = step(state, label)
    prev, start = label, state.done
  return float(np.mean(hits))
