"""vcbench-nav as a benchmark: its envs and learners from a job config, and the evaluation of
navigation policies on a fixed episode set (RobustNav's metrics).

    env = nav.make_env(config, "train")                 # config: configs/nav.py
    trainer = nav.make_trainer(config, env)             # PPO or imitation (`LEARNERS`)
    results = nav.evaluate(policy, params, env, batch=64, key=key)   # per-episode arrays
    summary = nav.summarize(results, task)   # SR, SPL (%), by difficulty, behaviour metrics

Each batch of episodes runs as one jitted `lax.while_loop` that stops when every episode of the
batch has ended (END or the task's step limit), so easy batches do not pay for the step limit.
The env must not auto-reset (`nav.make(..., split='val')` gives such an env): a finished
episode keeps its final metrics while the others go on. Actions are sampled from the policy
with a fixed key (habitat-baselines' evaluation samples too), or taken greedily.
"""
from __future__ import annotations

import functools
import pathlib
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from vcbench.algos import nav_bc, ppo, runner
from vcbench.envs import nav
from vcbench.envs.nav import tasks as tk
from vcbench.envs.nav.env import END, METRICS
from vcbench.registry import Registry

BENCHMARK = "vcbench-nav"
# The learners a navigation config's `algo` names: modules with default_config, check_config
# and make_train(config, env, ...) -> recurrent.Trainer.
LEARNERS = Registry("navigation learner")
LEARNERS.register("ppo")(ppo)
LEARNERS.register("bc")(nav_bc)

# Per-episode results: the env's metrics and the steps that began in range of the goal, with
# those of them on which the agent did not call END.
RESULTS = METRICS + ("in_range_steps", "missed_stops")
# PointNav also gets, per episode and bin of the observed goal distance (metres), its live
# steps and the sum of the policy's P(END) over them: how sharply END follows the 0.2 m radius.
END_BINS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.6, 1.0, 100.0)
END_PROFILE = ("end_bin_steps", "end_bin_p")
# (params, frozen, obs, carry, prev_action, start) -> (carry, logits [B, A], value [B])
PolicyStep = Callable[..., tuple[Any, jax.Array, jax.Array]]


@functools.partial(jax.jit, static_argnames=("policy_step", "initial_carry", "greedy"))
def _run_batch(env, params, frozen, indices, key, policy_step, initial_carry, greedy):
  state = jax.vmap(env.reset_to)(indices)
  n = indices.shape[0]
  zeros = jnp.zeros((n,), jnp.float32)
  profile = "gps_compass" in state.obs
  bins = jnp.zeros((n, len(END_BINS) - 1) if profile else (n, 0), jnp.float32)
  carry = (state, initial_carry(n), jnp.zeros((n,), jnp.int32), jnp.ones((n,), bool), key,
           jnp.zeros((), jnp.int32), zeros, zeros, bins, bins)

  def live(c):
    return jnp.any(~c[0].done) & (c[5] < env.max_steps)

  def body(c):
    state, rnn, prev_action, start, key, t, in_range, missed, bin_steps, bin_p = c
    key, sub = jax.random.split(key)
    rnn, logits, _ = policy_step(params, frozen, state.obs, rnn, prev_action, start)
    action = (jnp.argmax(logits, -1) if greedy else jax.random.categorical(sub, logits))
    action = action.astype(jnp.int32)
    # RobustNav's negative stop failure: steps that begin in range without calling END.
    now = jax.vmap(env.in_range)(state.sim) & ~state.done
    in_range, missed = in_range + now, missed + (now & (action != END))
    if profile:
      rho = state.obs["gps_compass"][:, 0]
      onehot = ((rho[:, None] >= jnp.asarray(END_BINS[:-1]))
                & (rho[:, None] < jnp.asarray(END_BINS[1:])) & ~state.done[:, None])
      bin_steps = bin_steps + onehot
      bin_p = bin_p + onehot * jax.nn.softmax(logits)[:, END, None]
    state = jax.vmap(env.step)(state, action)
    return (state, rnn, action, jnp.zeros_like(start), key, t + 1, in_range, missed,
            bin_steps, bin_p)

  out = jax.lax.while_loop(live, body, carry)
  extra = dict(zip(END_PROFILE, out[8:])) if profile else {}
  return {**out[0].metrics, "in_range_steps": out[6], "missed_stops": out[7], **extra}


def evaluate(policy_step: PolicyStep, initial_carry: Callable[[int], Any], params, env, *,
             frozen=None, batch: int = 64, key: Optional[jax.Array] = None,
             greedy: bool = False, num_episodes: int = 0) -> dict[str, np.ndarray]:
  """Runs the first `num_episodes` (0: all) episodes of `env`'s set; per-episode metrics.

  policy_step / initial_carry: the policy's acting function and zero recurrent state (a
    trainer's `policy_step` and `policy.initial_carry`); both must be hashable (jit-static).
  """
  if env.auto_reset:
    raise ValueError("nav.evaluate needs an env without auto_reset (episodes must end and "
                     "stay ended); build it with nav.make(..., auto_reset=False).")
  total = len(env.episodes) if num_episodes <= 0 else min(num_episodes, len(env.episodes))
  key = jax.random.key(0) if key is None else key
  out = {}
  for i, start in enumerate(range(0, total, batch)):
    idx = np.arange(start, start + batch) % total     # the last batch repeats, then is cut
    m = _run_batch(env, params, frozen, jnp.asarray(idx, jnp.int32), jax.random.fold_in(key, i),
                   policy_step, initial_carry, greedy)
    keep = min(batch, total - start)
    for k in (*RESULTS, *END_PROFILE):
      if k in m:
        out.setdefault(k, []).append(np.asarray(m[k])[:keep])
  return {k: np.concatenate(v) for k, v in out.items()}


def ci95(values) -> float:
  """Half-width of the 95% interval of a mean over episodes (normal approximation; NaN below
  two episodes)."""
  v = np.asarray(values, np.float64)
  return 1.96 * float(np.std(v, ddof=1)) / np.sqrt(len(v)) if len(v) > 1 else float("nan")


def summarize(results: dict[str, np.ndarray], task: str) -> dict[str, float]:
  """SR and SPL in % (with 95% half-widths `*_ci95`), overall and per RobustNav difficulty bin,
  plus behaviour metrics."""
  t = tk.get(task)
  out = {"episodes": float(len(results["success"])),
         "success": 100.0 * float(np.mean(results["success"])),
         "spl": 100.0 * float(np.mean(results["spl"])),
         "success_ci95": 100.0 * ci95(results["success"]),
         "spl_ci95": 100.0 * ci95(results["spl"]),
         "failed_actions": float(np.mean(results["failed_actions"])),
         "min_distance": float(np.mean(results["min_distance"])),
         "stop_failure": 100.0 * float(np.mean(results["stop_failure"])),
         # RobustNav's Figure 4: END called out of range, over all END calls (positive), and
         # steps in range without END, over all steps in range (negative); NaN when none.
         "stop_failure_pos": _percent(np.sum(results["stop_failure"]),
                                      np.sum(results["stop_failure"] + results["success"])),
         "stop_failure_neg": _percent(np.sum(results.get("missed_stops", 0.0)),
                                      np.sum(results.get("in_range_steps", 0.0))),
         "episode_length": float(np.mean(results["episode_length"]))}
  for i, (name, _, _) in enumerate(t.bins):
    sel = results["difficulty"] == i
    if sel.any():
      out[f"success_{name}"] = 100.0 * float(np.mean(results["success"][sel]))
      out[f"spl_{name}"] = 100.0 * float(np.mean(results["spl"][sel]))
  return out

def _percent(part, whole) -> float:
  return 100.0 * float(part) / float(whole) if whole > 0 else float("nan")


# ---------------------------------------------------------------------------------------------
# Envs and learners from a job config (configs/nav.py).


def algo_config(config, algo: str = "") -> ml_collections.ConfigDict:
  """The config of learner `algo` (default: the chosen one, `config.algo`) with the job's policy
  and seed filled in."""
  c = ml_collections.ConfigDict(config[algo or config.algo].to_dict())
  c.policy = ml_collections.ConfigDict(config.policy.to_dict())
  c.seed = config.seed
  return c


def make_env(config, split: str, episodes: int = 0, scenes: int = 0):
  """The config's env on `split`: training apartments (auto-reset, `train_episodes`) or
  `scenes` (default `val_scenes`) held-out ones with `episodes` fixed episodes."""
  train = split == "train"
  return nav.make(config.task, split,
                  num_scenes=config.train_scenes if train else (scenes or config.val_scenes),
                  num_episodes=episodes or config.train_episodes,
                  grid_size=config.grid_size, height=config.height, width=config.width,
                  hfov=config.hfov, sensors=tuple(config.sensors), auto_reset=train,
                  objects=config.objects, odometry=config.odometry)


def make_trainer(config, env=None, **kwargs):
  """The config's learner (a `recurrent.Trainer`) on `env` (default: the training env)."""
  env = make_env(config, "train") if env is None else env
  return LEARNERS.get(config.algo).make_train(algo_config(config), env, **kwargs)


def best_dir(config) -> pathlib.Path:
  """Where the run of `config` keeps its best-on-val params (`runner.SelectBest`)."""
  return pathlib.Path(config.workdir) / config.variant / "best"


def best_params(config, trainer=None):
  """(params, selection entry) of the run of `config`: its best-on-val checkpoint."""
  if not (best_dir(config) / "validation.json").exists():
    raise FileNotFoundError(f"no trained {config.variant} agent under {config.workdir} "
                            f"({best_dir(config)}/validation.json is missing)")
  trainer = make_trainer(config, log_fn=False) if trainer is None else trainer
  selection = runner.SelectBest(None, None, directory=best_dir(config))
  params = selection.best_state(jax.eval_shape(lambda: trainer.init(jax.random.key(0)).params))
  return params, selection.best


def evaluator(config, trainer, split: str, episodes: int, scenes: int = 0):
  """evaluate(params) -> `summarize`d metrics of `trainer`'s policy on the split's episodes."""
  env = make_env(config, split, episodes, scenes)

  def evaluate(params) -> dict[str, float]:
    results = evaluate_episodes(trainer, params, env, batch=config.eval_batch, seed=config.seed,
                                greedy=config.eval_greedy)
    return summarize(results, config.task)
  return evaluate


def evaluate_episodes(trainer, params, env, *, batch: int, seed: int = 0,
                      greedy: bool = False) -> dict[str, np.ndarray]:
  """`evaluate` of a trainer's policy with a fixed action-sampling key."""
  return evaluate(trainer.policy_step, trainer.policy.initial_carry, params, env,
                  frozen=trainer.frozen, batch=batch, key=jax.random.key(seed), greedy=greedy)
