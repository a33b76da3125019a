"""Is a trained navigation policy looking? Probes the checkpoint a `nav` job chose.

  python -m launch.nav_probe --config configs/nav.py:objectnav_bc --config.workdir=runs/nav
      [--config.key=value ...: the same overrides the job ran with] [--steps 60] [--envs 32]

Prints, for the job's selected (best-on-val) params and for a fresh initialisation:
- mean |x| of the visual encoder's output (the SimpleCNN's last layer, before any LayerNorm),
  over the first 16 val episodes' first views;
- the softmax's std across those 16 views, averaged over actions: ~0 means the policy's output
  does not depend on what it sees;
- how often its most likely action equals the shortest-path expert's, along expert-driven
  rollouts of --envs train episodes from their start for --steps steps (teacher forcing;
  episodes that end are replaced, as in training).
This is how the README's ObjectNav diagnosis was measured.
"""
from __future__ import annotations

import pathlib

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import numpy as np

from launch import nav as nav_job
from vcbench.envs.nav import expert

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/nav.py:variant")
_STEPS = flags.DEFINE_integer("steps", 60, "teacher-forced steps per episode")
_ENVS = flags.DEFINE_integer("envs", 32, "train episodes for the expert agreement")


def visual_stats(trainer, params, env) -> tuple[float, float]:
  """(mean |visual features|, softmax std across views) at the first step of up to 16 val
  episodes."""
  n = min(16, len(env.episodes))
  state = jax.vmap(env.reset_to)(jnp.arange(n))
  obs = jax.tree.map(lambda x: x[None], trainer._obs(state.obs))  # pylint: disable=protected-access
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


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None or config.policy.encoder != "cnn":
    raise app.UsageError("--config=configs/nav.py:<variant> with the SimpleCNN encoder is required")
  trainer = nav_job.ALGOS[config.algo].make_train(
      nav_job.algo_config(config), nav_job.make_env(config, "train"))
  best = nav_job.BestCheckpoint(pathlib.Path(config.workdir) / config.variant / "best", None)
  if best.record["best"] is None:
    raise SystemExit(f"no validated checkpoint under {best.directory}: run the job first")
  init = trainer.init(jax.random.key(config.seed)).params
  trained = best.best_params(jax.eval_shape(lambda: init))
  val = nav_job.make_env(config, "val", config.val_episodes)
  train = nav_job.make_env(config, "train")   # auto-reset: finished episodes restart
  for name, params in (("init", init), (f"update {best.record['best']['update']}", trained)):
    magnitude, spread = visual_stats(trainer, params, val)
    agree = expert_agreement(trainer, params, train, _ENVS.value, _STEPS.value)
    print(f"{name:>11}: visual mean |x| {magnitude:.3g}, softmax std across views "
          f"{spread:.2g}, expert agreement (teacher forced) {agree:.3f}", flush=True)


if __name__ == "__main__":
  app.run(main)
