"""The RobustNav job (configs/robustnav.py): clean agents -> every corruption condition ->
result store; then Table 3's ways to resist corruptions on the RGB agent.

Each evaluated cell is a store record (benchmark 'robustnav', task = the agent's nav variant,
adaptation = 'none' | 'pad_ap' | 'pad_rp' | 'finetune' | 'augment', corruption = the
condition's name, severity); cells already stored for this config are skipped. Adapted params
are checkpointed under <workdir>/adapt/<agent>/<config hash>/<method>/<condition>, so a killed run resumes
without redoing an adaptation. Adaptation interacts with the *training* apartments under the
corruption (the calibration phase); evaluation uses the val apartments' fixed episodes.
"""
from __future__ import annotations

import pathlib
import time

import jax
import ml_collections

from configs import nav as nav_config
from configs import robustnav as rn_config
from launch import jobs
from launch import nav as nav_job
from vcbench import config as config_lib
from vcbench.algos import pad as pad_lib
from vcbench.algos import ppo
from vcbench.benchmarks import robustnav as rn
from vcbench.checkpoint import Checkpointer
from vcbench.reports import store as store_lib
from vcbench.robustness import augment

METHODS = ("pad_ap", "pad_rp", "finetune", "augment")


def validate(config) -> None:
  for variant in list(config.agents) + [config.adapt.agent]:
    if variant not in nav_config.VARIANTS:
      raise config_lib.ConfigError(f"agents: {variant!r} is not a configs/nav.py variant "
                                   f"{nav_config.VARIANTS}")
  for m in config.adapt.methods:
    if m not in METHODS:
      raise config_lib.ConfigError(f"adapt.methods: unknown {m!r}; known: {METHODS}")
  for name in list(config.adapt.corruptions) + list(config.only):
    rn.Condition.parse(name, 5)
  pad_lib.check_config(config.adapt.pad)


class Agent:
  """A clean-trained nav agent: its nav config, PPO trainer (policy) and best-on-val params."""

  def __init__(self, config, variant: str):
    self.variant = variant
    self.nav = nav_config.get_config(variant)
    self.nav.workdir = config.nav_workdir
    if config.nav_updates:
      self.nav.ppo.num_updates = config.nav_updates
    best = pathlib.Path(config.nav_workdir) / variant / "best"
    if not (best / "validation.json").exists():
      print(f"robustnav: no trained {variant} under {config.nav_workdir}; training it", flush=True)
      nav_job.run(self.nav)
    self.trainer = nav_job.ALGOS[self.nav.algo].make_train(
        nav_job.algo_config(self.nav), nav_job.make_env(self.nav, "train"), log_fn=False)
    self.selection = nav_job.BestCheckpoint(best, None)
    self.params = self.selection.best_params(jax.eval_shape(
        lambda: self.trainer.init(jax.random.key(0)).params))

  def env(self, split: str, episodes: int, scenes: int):
    cfg = ml_collections.ConfigDict(self.nav.to_dict())
    cfg.val_scenes = scenes
    return nav_job.make_env(cfg, split, episodes)

  @property
  def info(self) -> dict:
    best = self.selection.record["best"]
    return {"agent_update": best["update"], "agent_val_success": best["success"],
            "agent_steps": best["update"] * self.trainer.steps_per_update}


def _hash(config, agent: Agent) -> str:
  # What decides a cell's numbers; not which other cells a launch computes, nor where.
  keep = {k: v for k, v in config.to_dict().items()
          if k not in ("workdir", "eval_batch", "agents", "sweep", "only", "variant")}
  keep["adapt"] = {k: v for k, v in keep["adapt"].items() if k not in ("methods", "corruptions")}
  return store_lib.config_hash({**keep, "agent": agent.variant, **agent.info})


def evaluate_cells(config, store, agent: Agent, adaptation: str, params, conditions,
                   env) -> None:
  chash = _hash(config, agent)
  for cond in conditions:
    cell = store_lib.Cell(benchmark=rn.BENCHMARK, task=agent.variant, pvr="scratch_cnn",
                          adaptation=adaptation, seed=int(config.seed), corruption=cond.name,
                          severity=cond.severity)
    if not store.pending([cell], chash):
      continue
    t0 = time.time()
    s = rn.evaluate(agent.trainer, params, rn.corrupted(env, cond, config.seed),
                    task=agent.nav.task, batch=config.eval_batch, seed=config.seed)
    store.append(cell, chash, s, extra={"kind": cond.kind, "seconds": round(time.time() - t0, 1),
                                        **agent.info}, allow_nonfinite=True)
    print(f"robustnav {agent.variant} [{adaptation}] {cond.name} sev {cond.severity}: "
          f"SR {s['success']:.1f} SPL {s['spl']:.1f} ({time.time() - t0:.0f} s)", flush=True)


def _cached(directory: pathlib.Path, params, compute):
  """Params saved under `directory`, or `compute()` saved there (an adaptation runs once)."""
  with Checkpointer(directory) as ckpt:
    if ckpt.latest_step() is not None:
      return ckpt.restore(target=jax.eval_shape(lambda: params))
    out = compute()
    ckpt.save(1, out)
    return out


def _finetune(agent: Agent, params, env, steps: int, lr: float, seed: int):
  """PPO from `params` for `steps` env steps on `env` (the agent's own PPO settings)."""
  c = nav_job.algo_config(agent.nav)
  c.num_updates = max(1, steps // (c.num_envs * c.rollout_len))
  c.lr, c.log_every = lr, 10
  trainer = ppo.make_train(c, env)
  state, _ = trainer.train_chunk(trainer.init_from(jax.random.key(seed), params), c.num_updates)
  return state.params


def adapted_params(config, agent: Agent, method: str, cond: rn.Condition):
  """The agent's params after `method` under `cond` (cond is unused by 'augment')."""
  a = config.adapt
  # Keyed by the config hash, so that a changed budget or lr never reuses stale params.
  root = pathlib.Path(config.workdir) / "adapt" / agent.variant / _hash(config, agent)[:12] / method
  train_env = agent.env("train", 0, 0)
  if method == "augment":
    return _cached(root / "clean", agent.params, lambda: _finetune(
        agent, agent.params, augment.augmented(train_env, config.seed), a.augment_steps,
        a.finetune_lr, config.seed))
  target = rn.corrupted(train_env, cond, config.seed)
  if method == "finetune":
    return _cached(root / cond.name, agent.params, lambda: _finetune(
        agent, agent.params, target, a.budget, a.finetune_lr, config.seed))
  pc = ml_collections.ConfigDict(a.pad.to_dict())
  pc.task = method.removeprefix("pad_")
  pad = pad_lib.PAD(pc, agent.trainer)
  head_init = jax.eval_shape(lambda: pad.init_head(jax.random.key(0)))
  head = _cached(root / "head", head_init, lambda: pad.fit_heads(
      jax.random.key(config.seed), agent.params, train_env)[0])

  def run():
    params, _, log = pad.adapt(jax.random.key(config.seed + 1), agent.params, head, target)
    print(f"robustnav {method} in {cond.name}: SS loss {log[0]['loss']:.3f} -> "
          f"{log[-1]['loss']:.3f}, accuracy {log[0]['accuracy']:.2f} -> "
          f"{log[-1]['accuracy']:.2f}", flush=True)
    return params
  return _cached(root / cond.name, agent.params, run)


@jobs.register("robustnav", schema=rn_config.get_config, validate=validate)
def run(config) -> dict:
  store = store_lib.ResultStore(pathlib.Path(config.workdir) / "results.jsonl")
  conditions = rn.table2() + (rn.sweep() if config.sweep else [])
  if config.only:
    conditions = [c for c in conditions if c.name in set(config.only)]
  for variant in config.agents:
    agent = Agent(config, variant)
    env = agent.env("val", config.episodes, config.val_scenes)
    evaluate_cells(config, store, agent, "none", agent.params, conditions, env)
  a = config.adapt
  if a.methods:
    agent = Agent(config, a.agent)
    env = agent.env("val", config.episodes, config.val_scenes)
    targets = [rn.Condition.parse(name, 5) for name in a.corruptions]
    for method in a.methods:
      evals = [rn.Condition()] + targets if method == "augment" else targets
      for cond in ([rn.Condition()] if method == "augment" else targets):
        params = adapted_params(config, agent, method, cond)
        evaluate_cells(config, store, agent, method, params,
                       evals if method == "augment" else [cond], env)
  rows = store.to_rows(benchmark=rn.BENCHMARK, latest_only=True)
  return {"records": float(len(rows))}
