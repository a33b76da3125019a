"""The Colosseum (Pumacay et al. 2024) on MetaWorld: its test sets, per-task factor data and metric.

Protocol (docs/design.md): train BC on 100 clean demos per task; evaluate 25 episodes on every test
set -- no perturbation, each of the 14 factors alone, all factors together -- with fixed seeds.
The metric is success per test set and its % change against no perturbation, averaged over the
tasks the factor applies to (the paper's Figure 5: "we compare their averages only with the
corresponding task's No Perturbation case").

A factor that does not apply to a task is *excluded* (the paper's '-'), for one of two reasons:
the task has no such object (no RO in drawer-open; the objects are `envs.mujoco.scene.TASKS`),
or the perturbed task is no longer solvable by MetaWorld's scripted expert (`expert_exclusions`,
measured by the job and stored with the reason). The rule is relative by default: excluded when
the expert's success under the factor falls below `EXPERT_MIN_SUCCESS` (90%) of its success
without perturbation, so a task whose clean expert is itself imperfect keeps its factors;
"absolute" compares with 90% itself. Each task's horizon (`HORIZONS`) is long enough for its
clean expert to succeed in >= 95% of episodes. Store rows (`Cell.corruption` = test set) of
excluded cells carry a NaN score and `extra/excluded` = the reason.

The factors themselves are `vcbench.robustness.factors` (each with a stable id that keys its
draws); `make_sim` builds the perturbed simulator that serves every test set of a task.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from vcbench.envs.mujoco import metaworld as mw
from vcbench.envs.mujoco import scene
from vcbench.models import embedder as embedder_lib
from vcbench.robustness import factors as factors_lib
from vcbench.robustness import perturbed

BENCHMARK = "colosseum"
EXPERT_BENCHMARK = "colosseum_expert"  # Rows of the expert-solvability check.
NONE, ALL = "no_perturbation", "all_perturbations"
# The paper's column order (Tables II-V), then the two physical factors, then the analogue of
# its RLBench-variations column: MetaWorld's own object and goal placement, drawn from wider
# boxes than the demos' (its own test set, not part of "all perturbations", as in the paper).
FACTORS = ("MO_Color", "RO_Color", "MO_Texture", "RO_Texture", "MO_Size", "RO_Size",
           "Light_Color", "Table_Color", "Table_Texture", "Distractor", "Background_Texture",
           "Camera_Pose", "Friction", "Mass", "Object_Position")
NOT_IN_ALL = ("Object_Position",)
TEST_SETS = (NONE, ALL) + FACTORS
EXPERT_MIN_SUCCESS = 0.9
EXPERT_RULES = ("relative", "absolute")   # Below 90% of the clean expert's rate, or of 100%.
DEFAULT_HORIZON = 200
# Steps per episode where the default is too short (`python -m launch.colosseum_horizons`,
# 100 clean test episodes): every other task's scripted expert succeeds in >= 95% within 200
# (bin-picking 96%, door-open 95%, the rest 100%); peg-insert-side's never does -- it gets
# stuck in 12 of 100 episodes -- and plateaus at 88% from 275 steps (86% at 200).
HORIZONS = {"peg-insert-side": 275}
EXCLUDED = "excluded"  # The extra key holding the reason a cell is excluded.
# "PVRs" that see no pixels (the state oracle): references for the physical factors, under a
# visual factor their episodes are their clean ones; reports do not rank them.
PIXEL_FREE = (embedder_lib.STATE_ORACLE,)
TASKS = tuple(scene.TASKS)   # The ten MetaWorld tasks with an object spec.
_NO_RO = "the task has no receiver object"


def inapplicable(task: str, factor: str) -> str:
  """Why `factor` does not apply to `task` by construction ('' when it does)."""
  spec = scene.task_spec(task)
  if factor in spec.notes:
    return spec.notes[factor]
  if factor.startswith("RO_") and not spec.ro:
    return _NO_RO
  if factor == "MO_Size" and spec.mo_size is None:
    return "the manipulation object cannot be scaled"
  if factor == "RO_Size" and spec.ro_size is None:
    return "the receiver object cannot be scaled"
  return ""


def horizon(task: str) -> int:
  """`task`'s steps per episode (expert check, demos, evaluation)."""
  return HORIZONS.get(task, DEFAULT_HORIZON)


def check_test_set(name: str) -> str:
  if name not in TEST_SETS:
    raise ValueError(f"unknown Colosseum test set {name!r}; valid: {list(TEST_SETS)}")
  return name


def factors_of(task: str, test_set: str, excluded: Iterable[str] = ()) -> tuple[str, ...]:
  """The factors a test set applies on `task`: none, one, or every applicable one ("all")."""
  check_test_set(test_set)
  if test_set == NONE:
    return ()
  if test_set != ALL:
    return (test_set,)
  skip = set(excluded) | set(NOT_IN_ALL)
  return tuple(f for f in FACTORS if not inapplicable(task, f) and f not in skip)


def test_sets(task: str, excluded: Mapping[str, str] | Iterable[str] = ()
              ) -> dict[str, tuple[str, ...] | str]:
  """Every test set, in `TEST_SETS` order -> the factors it applies on `task`, or (a str) why
  it does not apply there. `excluded`: factors measured unsolvable on `task` (-> reason, or
  names): refused alone and left out of "all"."""
  if not isinstance(excluded, Mapping):
    excluded = {f: "the scripted expert fails under it (measured)" for f in excluded}
  out: dict[str, tuple[str, ...] | str] = {}
  for name in TEST_SETS:
    reason = "" if name in (NONE, ALL) else (inapplicable(task, name) or excluded.get(name, ""))
    out[name] = reason or factors_of(task, name, excluded)
  return out


def encode(test_set: str, seed: int) -> int:
  """The `PerturbedSim` episode code of test episode `seed` under `test_set`."""
  return perturbed.encode(TEST_SETS, check_test_set(test_set), seed)


def make_sim(task: str, render: mw.RenderConfig | None, horizon: int, base_seed: int = 0,
             excluded: Mapping[str, str] | Iterable[str] = ()):
  """A picklable factory of `task`'s perturbed simulator, which serves every test set
  (`encode`); inapplicable and excluded ones are refused with their reason."""
  return perturbed.make_sim(task, render, horizon, base_seed, test_sets(task, excluded))


def definitions() -> dict[str, Any]:
  """What a cell's numbers depend on besides its job's config: the test sets, every factor's
  id and fields, the factors' parameters, the per-task object specs and the scene's cameras,
  texture bank and distractor pool. Enters the job's config hash, so a changed definition
  never leaves stale cells counted as done."""
  return {"test_sets": list(TEST_SETS), "not_in_all": list(NOT_IN_ALL),
          "factors": {name: {"id": f.id, "fields": list(f.fields), "recompile": f.recompile,
                             "reset": f.reset}
                      for name, f in factors_lib.FACTORS.items()},
          "params": dataclasses.asdict(factors_lib.Params()),
          "tasks": {task: dataclasses.asdict(spec) for task, spec in scene.TASKS.items()},
          "cameras": {k: list(v) for k, v in scene.CAMERAS.items()},
          "textures": [dataclasses.asdict(t) for t in scene.TEXTURES],
          "distractors": {k: [dataclasses.asdict(p) for p in v]
                          for k, v in scene.DISTRACTORS.items()}}


# ---------------------------------------------------------------------------------------------
# The expert-solvability check.
# ---------------------------------------------------------------------------------------------


def expert_success(task: str, test_set: str, episodes: int, horizon: int,
                   base_seed: int = 0, first_seed: int = 0,
                   excluded: Iterable[str] = ()) -> dict:
  """MetaWorld's scripted expert under `test_set` (no rendering): success rate (success at
  any step within `horizon`) and mean length over `episodes` seeds from `first_seed`."""
  policy = mw.expert_policy(task)
  sim = make_sim(task, None, horizon, base_seed, excluded)()
  successes, lengths = [], []
  try:
    for seed in range(first_seed, first_seed + episodes):
      sim.reset(encode(test_set, seed))
      for step in range(1, horizon + 1):
        _, _, _, info = sim.step(sim.expert_action(policy))
        if info["success"]:
          break
      successes.append(bool(info["success"]))
      lengths.append(step)
  finally:
    sim.close()
  return {"success_rate": float(np.mean(successes)), "mean_length": float(np.mean(lengths)),
          "episodes": episodes}


def check_rule(rule: str) -> str:
  if rule not in EXPERT_RULES:
    raise ValueError(f"unknown expert exclusion rule {rule!r}; valid: {list(EXPERT_RULES)}")
  return rule


def expert_bar(rule: str, min_success: float, clean_rate: float) -> float:
  """The expert success rate below which a factor is excluded."""
  return min_success * clean_rate if check_rule(rule) == "relative" else min_success


def expert_exclusions(task: str, test_set_names: Iterable[str],
                      expert_rate: Callable[[str, tuple[str, ...]], float],
                      min_success: float, episodes: int,
                      log: Callable[[str], Any] = print,
                      rule: str = "relative") -> dict[str, str]:
  """Test sets excluded on `task` -> why: inapplicable by construction, or the scripted
  expert's success below the bar (`expert_bar`: `min_success` times its success without
  perturbation under the relative rule, `min_success` itself under the absolute one).
  `expert_rate(test_set, excluded_factors)` measures (or recalls) the expert's success rate
  under a test set; the clean rate is measured first, "all" (which leaves out the factors
  excluded so far) last. The two baselines are never excluded (the paper's "All
  Perturbations" column is defined for every task)."""
  names = list(test_set_names)
  order = [NONE] + [t for t in names if t not in (NONE, ALL)] + ([ALL] if ALL in names else [])
  out: dict[str, str] = {}
  clean = bar = None
  for test_set in order:
    reason = inapplicable(task, test_set) if test_set not in (NONE, ALL) else ""
    if reason:
      out[test_set] = reason
      continue
    rate = float(expert_rate(test_set, tuple(f for f in out if f in FACTORS)))
    if bar is None:
      clean, bar = rate, expert_bar(rule, min_success, rate)
    log(f"  expert {task} / {test_set}: {100 * rate:.0f}%")
    if rate < bar and test_set in FACTORS:
      out[test_set] = (f"the scripted expert succeeds in {100 * rate:.0f}% of {episodes} "
                       f"episodes (< {_bar_text(rule, min_success, clean)})")
  return out


def _bar_text(rule: str, min_success: float, clean: float) -> str:
  if rule == "relative":
    return (f"{100 * min_success * clean:.0f}%: {100 * min_success:.0f}% of its "
            f"{100 * clean:.0f}% without perturbation")
  return f"{100 * min_success:.0f}%"


# ---------------------------------------------------------------------------------------------
# The metric, from store rows.
# ---------------------------------------------------------------------------------------------


def success_table(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
  """pvr -> task -> test set -> success % (mean over seeds); NaN for excluded cells."""
  acc: dict[tuple[str, str, str], list[float]] = {}
  for r in rows:
    if r.get("benchmark") != BENCHMARK:
      continue
    score = r.get("score")  # The store writes a NaN metric (an excluded cell) as null.
    acc.setdefault((r["pvr"], r["task"], r["corruption"]), []).append(
        math.nan if score is None else float(score))
  out: dict[str, dict[str, dict[str, float]]] = {}
  for (pvr, task, test_set), scores in acc.items():
    finite = [s for s in scores if math.isfinite(s)]
    value = sum(finite) / len(finite) if finite else math.nan
    out.setdefault(pvr, {}).setdefault(task, {})[test_set] = value
  return out


def percent_change(per_task: Mapping[str, Mapping[str, float]], test_set: str) -> float:
  """% change of task-averaged success under `test_set` vs no perturbation, over the tasks
  where both are defined; NaN when there are none or the baseline average is 0."""
  pairs = [(t[test_set], t[NONE]) for t in per_task.values()
           if math.isfinite(t.get(test_set, math.nan)) and math.isfinite(t.get(NONE, math.nan))]
  if not pairs:
    return math.nan
  base = sum(b for _, b in pairs) / len(pairs)
  if base == 0:
    return math.nan
  return 100.0 * (sum(s for s, _ in pairs) / len(pairs) - base) / base
