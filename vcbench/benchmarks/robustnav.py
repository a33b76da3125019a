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

Seeding: a corruption's randomness comes from (seed, episode, step) and a dynamics corruption's
episode-level draw from (seed, episode), so every agent meets the same corruption on the same
episode; camera cracks are fixed per apartment (RobustNav fixes them per scene). lower_fov is
not an image operation here: the camera renders at 39.5 degrees instead of 79.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax

from vcbench.benchmarks import nav as nav_bench
from vcbench.robustness import dynamics as dyn
from vcbench.robustness import visual

BENCHMARK = "robustnav"
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


@dataclasses.dataclass(frozen=True)
class VisualHook:
  """The `NavEnv.visual` hook applying one registered corruption (hashable: jit-static)."""
  name: str
  severity: int
  seed: int = 0

  def __call__(self, scene, episode, step, rgb):
    # A crack is fixed per apartment; everything else is drawn per episode and step.
    fold = jax.random.fold_in
    key = jax.random.key(self.seed)
    key = (fold(fold(key, 0), scene) if self.name == "camera_crack"
           else fold(fold(fold(key, 1), episode), step))
    return visual.get(self.name).fn(key, rgb, self.severity)


def corrupted(env, condition: Condition, seed: int = 0):
  """`env` (a NavEnv without hooks) under `condition`."""
  if env.visual is not None or env.dynamics is not None:
    raise ValueError("robustnav.corrupted: the env already has a visual or dynamics hook")
  if condition.visual == "lower_fov":
    env = env.replace(camera=dataclasses.replace(env.camera, hfov=LOWER_FOV_DEGREES))
  elif condition.visual is not None:
    if "rgb" not in env.sensors:
      raise ValueError(f"{condition.visual} corrupts RGB but the env renders {env.sensors}")
    env = env.replace(visual=VisualHook(condition.visual, condition.severity, seed))
  if condition.dynamics is not None:
    env = dyn.corrupt(env, condition.dynamics, seed)
  return env


def evaluate(trainer, params, env, *, task: str = "pointnav", batch: int = 150, seed: int = 0,
             greedy: bool = False) -> dict[str, float]:
  """SR, SPL and the behaviour metrics of `trainer`'s policy with `params` on `env`'s episodes
  (all of them, fixed action-sampling seed)."""
  results = nav_bench.evaluate(trainer.policy_step, trainer.policy.initial_carry, params, env,
                               frozen=trainer.frozen, batch=batch, key=jax.random.key(seed),
                               greedy=greedy)
  return nav_bench.summarize(results, task)
