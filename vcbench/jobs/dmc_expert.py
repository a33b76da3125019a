"""Trains a DeepMind Control expert with SAC on state and exports its policy (configs/dmc_expert.py
has the variants and the launch commands).

C MuJoCo on the host (`backend="host"`, the CPU path) or MJX on device (`backend="mjx"`, for
accelerators); the same jitted SAC loop either way. Training resumes from <workdir>/checkpoints
after a kill. At the end the deterministic policy is scored on `eval_episodes` held-out seeds
(C MuJoCo, the simulator the benchmark's demos come from) and <workdir>/expert.npz holds the
actor's parameters, its config and those returns; `export_to` copies it (e.g. to the suite's
shipped experts, `vcbench/envs/mujoco/experts/<task>.npz`).
"""
from __future__ import annotations

import json
import os
import shutil
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from vcbench import config as config_lib
from vcbench import files
from vcbench.algos import runner
from vcbench.algos import sac
from vcbench.envs import host
from vcbench.envs.mujoco import dmc

NOT_HASHED = ("workdir", "export_to")   # A training job stores no cells; listed for the day one is.
BACKENDS = ("host", "mjx")
EVAL_SEED_OFFSET = 3_000_000   # Expert scoring seeds: disjoint from training and demo seeds.


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.job = "dmc_expert"
  c.task = "walker-walk"
  c.workdir = "runs/dmc_expert/walker-walk"
  c.export_to = ""
  c.backend = "host"
  c.action_repeat = dmc.ACTION_REPEAT
  c.chunk = 10              # Episodes per jitted call and checkpoint.
  c.eval_episodes = 100
  c.eval_envs = 50
  c.sac = sac.default_config()
  c.sac.horizon = dmc.horizon(c.action_repeat)
  return c


def validate(config) -> None:
  config_lib.require_choice(config, "task", dmc.task_names())
  config_lib.require_choice(config, "backend", BACKENDS)
  config_lib.require_ints(config, ("chunk", "eval_episodes", "eval_envs", "action_repeat",
                                   "sac.episodes", "sac.num_envs", "sac.horizon",
                                   "sac.batch_size", "sac.updates_per_step"))
  config_lib.require(config, "sac.horizon",
                     lambda v: v == dmc.horizon(config.action_repeat),
                     f"{dmc.horizon(config.action_repeat)} (1000 control steps / action_repeat)")
  config_lib.require(config, "eval_episodes", lambda v: v % config.eval_envs == 0,
                     f"a multiple of eval_envs ({config.eval_envs})")


def make_env(config, num_envs: int):
  """The training env of `config.backend` (C MuJoCo through the host bridge, or MJX)."""
  if config.backend == "mjx":
    from vcbench.envs.mujoco import dmc_mjx  # noqa: PLC0415 - compiles MJX only when asked.
    return dmc_mjx.make_env(config.task, num_envs, config.action_repeat)
  return host_env(config.task, num_envs, config.action_repeat)


def host_env(task: str, num_envs: int, action_repeat: int) -> host.HostEnv:
  return host.HostEnv(host.SimBatch(dmc.make_sim(task, None, action_repeat=action_repeat),
                                    num_envs, horizon=dmc.horizon(action_repeat),
                                    stop_on_success=False))


def score(config, trainer: sac.Trainer, actor_params) -> np.ndarray:
  """Returns of the deterministic policy on `eval_episodes` held-out seeds (C MuJoCo)."""
  env = host_env(config.task, config.eval_envs, config.action_repeat)
  run = jax.jit(lambda p, seeds: sac.evaluate(trainer.actor, p, env, seeds,
                                              config.sac.horizon))
  try:
    return np.concatenate([
        np.asarray(run(actor_params, EVAL_SEED_OFFSET + jnp.arange(start, start + config.eval_envs)))
        for start in range(0, config.eval_episodes, config.eval_envs)])
  finally:
    env.close()


def run(config) -> dict:
  t0 = time.time()
  env = make_env(config, config.sac.num_envs)
  trainer = sac.make_train(config.sac, env)

  def log(progress: runner.Progress):
    m = {k: float(v[-1]) for k, v in progress.metrics.items()}
    print(f"{config.task} episode {progress.done * config.sac.num_envs:5d}  return "
          f"{m['return']:7.1f}  q {m['q']:7.2f}  alpha {m['alpha']:.4f}  entropy "
          f"{m['entropy']:6.2f}  ({time.time() - t0:.0f} s)", flush=True)

  try:
    state, metrics = runner.run(trainer, config.workdir, config.chunk, callbacks=[log])
  finally:
    env.close()
  returns = score(config, trainer, state.actor)
  summary = {"task": config.task, "backend": config.backend,
             "action_repeat": config.action_repeat, "hidden": list(config.sac.hidden),
             "train_episodes": int(config.sac.episodes * config.sac.num_envs),
             "eval_seeds": [EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + config.eval_episodes],
             "mean_return": float(returns.mean()),
             "stderr": float(returns.std(ddof=1) / np.sqrt(len(returns))),
             "min_return": float(returns.min()), "seconds": time.time() - t0,
             "train_returns": [float(r) for r in metrics["return"]]}
  path = os.path.join(config.workdir, "expert.npz")
  arrays = sac.actor_arrays(state.actor)
  meta = json.dumps({k: v for k, v in summary.items() if k != "train_returns"})
  files.atomic_write(path, lambda f: np.savez(f, meta=np.array(meta), **arrays))
  files.atomic_write(os.path.join(config.workdir, "summary.json"),
                     lambda f: f.write(json.dumps(summary, indent=1).encode()))
  if config.export_to:
    shutil.copyfile(path, config.export_to)
  print(f"{config.task}: expert return {summary['mean_return']:.1f} ± {summary['stderr']:.1f} "
        f"(min {summary['min_return']:.1f}) over {config.eval_episodes} seeds; {path}"
        + (f" (copied to {config.export_to})" if config.export_to else ""))
  return summary
