"""RobustNav's protocol on vcbench-nav: the corruption conditions, corrupted envs, evaluation.

    for cond in robustnav.table2():                     # clean, 7 vis, 5 dyn, 6 vis+dyn
      env = robustnav.corrupted(val_env, cond, seed=0)  # a NavEnv with the hooks set
      summary = robustnav.evaluate(trainer, params, env)

Conditions (RobustNav Table 2; visual severities at 5, the worst, there):
  visual   low_lighting, motion_blur, camera_crack, defocus_blur, speckle_noise, lower_fov,
           spatter (`vcbench.robustness.visual`; they corrupt the RGB only, depth stays clean)
  dynamics motion_bias_constant, motion_bias_stochastic, motion_drift, pyrobot_noise,
           motor_failure (`vcbench.robustness.dynamics`)
  vis+dyn  {defocus_blur, speckle_noise, spatter} x {motion_bias_stochastic, motion_drift}
`sweep()` adds severities 1-5 for the five corruptions that have them.

Agents are clean-trained configs/nav.py runs (`Agent`); `adapt` runs Table 3's methods, each
resumable and done once (checkpointed under a directory the job keys by its config hash).

Seeding: a corruption's randomness comes from (seed, episode, step) and a dynamics corruption's
episode-level draw from (seed, episode), so every agent meets the same corruption on the same
episode; camera cracks are fixed per apartment (RobustNav fixes them per scene; the hooks are
`visual.corrupt` and `dynamics.corrupt`). lower_fov is not an image operation here: the camera
renders at 39.5 degrees instead of 79. Any registered corruption makes a `Condition`, so one
added to `visual.CORRUPTIONS` runs through this protocol as it is.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional

import jax
import ml_collections

from vcbench.algos import pad as pad_lib
from vcbench.algos import ppo
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import nav_agents
from vcbench.robustness import augment
from vcbench.robustness import dynamics as dyn
from vcbench.robustness import visual

BENCHMARK = "robustnav"
# Table 3's ways to resist a corruption: PAD with action / rotation prediction, PPO fine-tuning
# with the task reward, and PPO on augmented frames.
METHODS = ("pad_ap", "pad_rp", "finetune", "augment")
VISUAL = ("low_lighting", "motion_blur", "camera_crack", "defocus_blur", "speckle_noise",
          "lower_fov", "spatter")
DYNAMICS = ("motion_bias_constant", "motion_bias_stochastic", "motion_drift", "pyrobot_noise",
            "motor_failure")
COMBO_VISUAL = ("defocus_blur", "speckle_noise", "spatter")
COMBO_DYNAMICS = ("motion_bias_stochastic", "motion_drift")
SWEEP = ("defocus_blur", "motion_blur", "speckle_noise", "spatter", "low_lighting")
SINGLE_LEVEL = ("camera_crack", "lower_fov")     # no severity levels in RobustNav
LOWER_FOV_DEGREES = 39.5


@dataclasses.dataclass(frozen=True)
class Condition:
  """One evaluation setting: an optional visual corruption (with severity) and/or dynamics."""
  visual: Optional[str] = None
  severity: int = 0
  dynamics: Optional[str] = None

  def __post_init__(self):
    if self.visual is not None:
      visual.get(self.visual)
      if self.visual not in SINGLE_LEVEL and not 1 <= self.severity <= 5:
        raise ValueError(f"Condition {self.visual}: severity must be 1-5, got {self.severity}")
    elif self.severity:
      raise ValueError(f"Condition: severity {self.severity} without a visual corruption")
    if self.dynamics is not None:
      dyn.get(self.dynamics)

  @property
  def name(self) -> str:
    """The result store's `corruption` field: 'none', 'spatter', 'spatter+motion_drift'."""
    parts = [p for p in (self.visual, self.dynamics) if p]
    return "+".join(parts) if parts else "none"

  @property
  def kind(self) -> str:
    return {(False, False): "clean", (True, False): "vis", (False, True): "dyn",
            (True, True): "vis+dyn"}[(self.visual is not None, self.dynamics is not None)]

  @classmethod
  def parse(cls, name: str, severity: int = 0) -> "Condition":
    """Inverse of `name` (with the stored severity)."""
    if name == "none":
      return cls()
    vis = next((p for p in name.split("+") if p in visual.CORRUPTIONS), None)
    dy = next((p for p in name.split("+") if p in dyn.DYNAMICS), None)
    if "+".join(p for p in (vis, dy) if p) != name:
      raise ValueError(f"unknown RobustNav condition {name!r}")
    severity = (1 if vis in SINGLE_LEVEL else severity) if vis else 0
    return cls(visual=vis, severity=severity, dynamics=dy)


def _vis(name: str, severity: int = 5) -> Condition:
  return Condition(visual=name, severity=1 if name in SINGLE_LEVEL else severity)


def table2() -> list[Condition]:
  """The 19 settings of RobustNav's Table 2, in its row order."""
  return ([Condition()] + [_vis(v) for v in VISUAL] + [Condition(dynamics=d) for d in DYNAMICS]
          + [Condition(visual=v, severity=5, dynamics=d) for d in COMBO_DYNAMICS
             for v in COMBO_VISUAL])


def sweep() -> list[Condition]:
  """Severities 1-4 of the graded corruptions (5 is in `table2`)."""
  return [Condition(visual=v, severity=s) for v in SWEEP for s in range(1, 5)]


def corrupted(env, condition: Condition, seed: int = 0):
  """`env` (a NavEnv without hooks) under `condition`."""
  if env.visual is not None or env.dynamics is not None:
    raise ValueError("robustnav.corrupted: the env already has a visual or dynamics hook")
  if condition.visual == "lower_fov":
    env = env.replace(camera=dataclasses.replace(env.camera, hfov=LOWER_FOV_DEGREES))
  elif condition.visual is not None:
    env = visual.corrupt(env, condition.visual, condition.severity, seed)
  if condition.dynamics is not None:
    env = dyn.corrupt(env, condition.dynamics, seed)
  return env


def evaluate(trainer, params, env, *, task: str = "pointnav", batch: int = 150, seed: int = 0,
             greedy: bool = False) -> dict[str, float]:
  """SR, SPL and the behaviour metrics of `trainer`'s policy with `params` on `env`'s episodes
  (all of them, fixed action-sampling seed)."""
  results = nav_bench.evaluate_episodes(trainer, params, env, batch=batch, seed=seed,
                                        greedy=greedy)
  return nav_bench.summarize(results, task)


class Agent:
  """A clean-trained nav agent: its nav config (a configs/nav.py variant, its `workdir` the run's
  root), trainer (the policy) and best-on-val params (given, or read from the run);
  `steps_before`: the env steps of the training stages its run started from (`init_from`)."""

  def __init__(self, nav_config, params=None, best: Optional[dict] = None,
               steps_before: int = 0):
    self.nav, self.variant, self.steps_before = nav_config, nav_config.variant, steps_before
    self.trainer = nav_bench.make_trainer(nav_config, log_fn=False)
    if params is None:
      params, best = nav_bench.best_params(nav_config, self.trainer)
    self.params, self.best = params, best

  @classmethod
  def shipped(cls, name: str, workdir: str) -> "Agent":
    """A shipped agent (`nav_agents`), its fine-tuning runs under `workdir`."""
    s = nav_agents.load(name)
    s.config.workdir = workdir
    return cls(s.config, s.params, {"update": s.meta["selected_update"],
                                    "success": s.meta["val_success"]},
               steps_before=sum(st["selected_env_steps"] for st in s.meta["stages"][:-1]))

  def env(self, split: str, episodes: int = 0, scenes: int = 0):
    return nav_bench.make_env(self.nav, split, episodes, scenes)

  @property
  def info(self) -> dict:
    best = self.best
    return {"agent_update": best["update"], "agent_val_success": best["success"],
            "agent_steps": self.steps_before + best["update"] * self.trainer.steps_per_update}


def adapt(agent: Agent, method: str, cond: Condition, directory: str | pathlib.Path, config,
          seed: int = 0, chunk: int = 25):
  """The agent's params after `method` (`METHODS`) under `cond` (unused by 'augment', which
  trains on augmented clean frames), in the corrupted *training* apartments (the calibration
  phase). `config`: the robustnav job's `adapt` block (budget, augment_steps, finetune_lr, pad).
  Checkpointed under `directory` every `chunk` updates: resumed after a kill, done once."""
  root = pathlib.Path(directory)
  train_env = agent.env("train")
  if method == "augment":
    return _finetune(agent, augment.augmented(train_env, seed), config.augment_steps,
                     config.finetune_lr, seed, root / "clean", chunk)
  target = corrupted(train_env, cond, seed)
  if method == "finetune":
    return _finetune(agent, target, config.budget, config.finetune_lr, seed, root / cond.name,
                     chunk)
  if method not in METHODS:
    raise ValueError(f"unknown adaptation method {method!r}; known: {METHODS}")
  pc = ml_collections.ConfigDict(config.pad.to_dict())
  pc.task = method.removeprefix("pad_")
  fit = pad_lib.make_train(pc, agent.trainer, agent.params, train_env, seed=seed)
  head, _ = runner.run(fit, root / "head", chunk)
  trainer = pad_lib.make_train(pc, agent.trainer, agent.params, target, head=fit.head(head),
                               seed=seed + 1)
  state, log = runner.run(trainer, root / cond.name, chunk)
  print(f"robustnav {method} in {cond.name}: SS loss {log['loss'][0]:.3f} -> "
        f"{log['loss'][-1]:.3f}, accuracy {log['accuracy'][0]:.2f} -> "
        f"{log['accuracy'][-1]:.2f}", flush=True)
  return trainer.adapted_params(state)


def finetune_trainer(nav_config, env, steps: int, lr: float):
  """The PPO trainer that fine-tunes an agent of `nav_config` on `env` for `steps` env steps
  at peak lr `lr` (its own PPO settings otherwise, whichever learner trained the agent); start
  it with `init_from(key, params)`."""
  c = nav_bench.algo_config(nav_config, "ppo")
  c.num_updates = max(1, steps // (c.num_envs * c.rollout_len))
  c.lr, c.log_every = lr, 10
  return ppo.make_train(c, env)


def _finetune(agent: Agent, env, steps: int, lr: float, seed: int, directory, chunk: int):
  """PPO from the agent's params for `steps` env steps on `env` (its own PPO settings)."""
  trainer = finetune_trainer(agent.nav, env, steps, lr)
  state, _ = runner.run(trainer, directory, chunk, key=jax.random.key(seed),
                        init=lambda key: trainer.init_from(key, agent.params))
  return state.params
