"""Speed of the CortexBench BC path, measured in one run (README "Measured" figures).

  MUJOCO_GL=egl python -m launch.bench.bc [--models=random_vit_s,random_vit_b] [--envs=5]
      [--steps=20] [--repeats=3] [--out=bench_bc.json]

Reports, per model:
- BC training steps/s (one SGD step = one minibatch of 256 fused features, the jitted
  epoch scan; features sized as that model's flare history + proprio);
- evaluation env-steps/s of the scanned rollout (render + preprocess + encode + act) on
  MetaWorld drawer-open, at the protocol's 256 px render -> 224 px encoder input and the quick
  variant's 128 -> 112;
- the bridge: the same rollout as one jitted `lax.scan` against a Python loop over the same
  simulators (`rollout.python_rollout`), and the simulator + renderer alone for reference.
Medians of --repeats timed calls after a warm-up (compile) call; rollouts never stop early.
"""
from __future__ import annotations

import json

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from launch.bench import timing

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from launch import cli

from vcbench.algos import bc
from vcbench.envs import host, rollout
from vcbench.envs.mujoco import metaworld as mw
from vcbench.models import embedder as embedder_lib

_MODELS = flags.DEFINE_list("models", ["random_vit_s", "random_vit_b"], "zoo entries")
_ENVS = flags.DEFINE_integer("envs", 5, "simulators stepped side by side")
_STEPS = flags.DEFINE_integer("steps", 20, "rollout length (env steps per env)")
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls per figure (median)")
_OUT = flags.DEFINE_string("out", None, "also write the figures as JSON here")
_TASK = "drawer-open"
_SETTINGS = {"protocol": (256, 224), "quick": (128, 112)}


def bc_train_rate(feat_dim: int, repeats: int, num_samples: int = 2560) -> float:
  rng = np.random.default_rng(0)
  x = rng.normal(size=(num_samples, feat_dim)).astype(np.float32)
  y = rng.uniform(-1, 1, size=(num_samples, 4)).astype(np.float32)
  trainer = bc.make_train(bc.default_config(), x, y)
  state = [trainer.init(jax.random.key(0))]
  epochs = 5

  def run():
    state[0], metrics = trainer.train_chunk(state[0], epochs)
    return metrics

  return epochs * (num_samples // 256) / timing.median(run, repeats)


def _policy(embedder, num_envs: int):
  feat_dim = 3 * embedder.dim + mw.PROPRIO_DIM
  trainer = bc.make_train(bc.default_config(), np.zeros((2, feat_dim), np.float32),
                          np.zeros((2, 4), np.float32))
  step = bc.make_policy_step(embedder.fn, trainer.act, history=3, use_proprio=True)
  carry = bc.initial_carry(embedder.params, trainer.init(jax.random.key(0)).variables(),
                           num_envs, embedder.dim, 3)
  return step, carry


def eval_rates(model: str, render: int, size: int, n: int, steps: int, repeats: int) -> dict:
  embedder = embedder_lib.make(model, state_dim=mw.STATE_DIM, img_size=size)
  step, carry = _policy(embedder, n)
  seeds = np.arange(n)
  with host.SimBatch(mw.make_sim(_TASK, mw.RenderConfig(size=render)), n, horizon=steps,
                     stop_on_success=False) as batch:
    env = host.HostEnv(batch)
    scanned = jax.jit(lambda c, s: rollout.rollout(env, step, c, s, steps)[1].action)
    scan_s = timing.median(lambda: scanned(carry, jnp.asarray(seeds)), repeats)
    loop_s = timing.median(
        lambda: rollout.python_rollout(batch, step, carry, seeds, steps).action, repeats)
    zero = np.zeros((n, 4), np.float32)

    def sim_only():
      batch.reset(seeds)
      for _ in range(steps):
        batch.step(zero)
    sim_s = timing.median(sim_only, repeats)
  total = n * steps
  return {"model": model, "dim": embedder.dim, "render": render, "input": size, "envs": n, "steps": steps,
          "scan_env_steps_per_s": total / scan_s, "loop_env_steps_per_s": total / loop_s,
          "sim_render_steps_per_s": total / sim_s}


def main(argv):
  del argv
  rows, train_rates = [], {}
  for model in _MODELS.value:
    for name, (render, size) in _SETTINGS.items():
      r = eval_rates(model, render, size, _ENVS.value, _STEPS.value, _REPEATS.value)
      r["setting"] = name
      rows.append(r)
      print(json.dumps(r))
    train_rates[model] = bc_train_rate(3 * rows[-1]["dim"] + mw.PROPRIO_DIM, _REPEATS.value)
  lines = ["| model | setting (render -> input) | BC train steps/s | eval env-steps/s, scan | "
           "eval env-steps/s, Python loop | scan / loop | sim + render alone |",
           "|:--|:--|--:|--:|--:|--:|--:|"]
  for r in rows:
    lines.append(
        f"| {r['model']} | {r['setting']} ({r['render']} -> {r['input']}) | "
        f"{train_rates[r['model']]:.0f} | {r['scan_env_steps_per_s']:.1f} | "
        f"{r['loop_env_steps_per_s']:.1f} | "
        f"{r['scan_env_steps_per_s'] / r['loop_env_steps_per_s']:.2f}x | "
        f"{r['sim_render_steps_per_s']:.0f} |")
  text = "\n".join(lines)
  print(f"{_ENVS.value} envs x {_STEPS.value} steps, median of {_REPEATS.value}; MetaWorld "
        f"{_TASK}, untrained BC policy\n{text}")
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"rows": rows, "bc_train_steps_per_s": train_rates}, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
