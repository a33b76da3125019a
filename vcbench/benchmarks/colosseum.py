"""The Colosseum (Pumacay et al. 2024) on MetaWorld: its test sets, per-task factor data and metric.

Protocol (DESIGN.md): train BC on 100 clean demos per task; evaluate 25 episodes on every test
set -- no perturbation, each of the 14 factors alone, all factors together -- with fixed seeds.
The metric is success per test set and its % change against no perturbation, averaged over the
tasks the factor applies to (the paper's Figure 5: "we compare their averages only with the
corresponding task's No Perturbation case").

A factor that does not apply to a task is *excluded* (the paper's '-'), for one of two reasons:
the task has no such object (no RO in drawer-open), or the perturbed task is no longer solvable
by MetaWorld's scripted expert (< `EXPERT_MIN_SUCCESS` over 25 episodes, measured by the job and
stored with the reason). Store rows (`Cell.corruption` = test set) of excluded cells carry a NaN
score and `extra/excluded` = the reason.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping

BENCHMARK = "colosseum"
EXPERT_BENCHMARK = "colosseum_expert"  # Rows of the expert-solvability check.
NONE, ALL = "no_perturbation", "all_perturbations"
# The paper's column order (Tables II-V), then the two physical factors.
FACTORS = ("MO_Color", "RO_Color", "MO_Texture", "RO_Texture", "MO_Size", "RO_Size",
           "Light_Color", "Table_Color", "Table_Texture", "Distractor", "Background_Texture",
           "Camera_Pose", "Friction", "Mass")
TEST_SETS = (NONE, ALL) + FACTORS
EXPERT_MIN_SUCCESS = 0.9
EXCLUDED = "excluded"  # The extra key holding the reason a cell is excluded.


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """Which objects of a MetaWorld task the object factors act on, and their ranges.

  Attributes:
    primitive: Colosseum's task primitive this task stands for.
    mo: names of the manipulation object's root bodies (the factor acts on their subtrees).
    ro: names of the receiver object's root bodies; () when the task has none.
    mo_size: MO scale range, or None when the MO cannot be scaled (reason in `notes`).
    ro_size: RO scale range, or None.
    notes: factor -> why it does not apply to this task (the paper's '-').
  """
  primitive: str
  mo: tuple[str, ...]
  ro: tuple[str, ...] = ()
  mo_size: tuple[float, float] | None = (0.75, 1.25)
  ro_size: tuple[float, float] | None = (0.75, 1.25)
  notes: Mapping[str, str] = dataclasses.field(default_factory=dict)


_NO_RO = "the task has no receiver object"
TASKS: dict[str, TaskSpec] = {
    # The five CortexBench MetaWorld tasks.
    "assembly": TaskSpec("insert", mo=("RoundNut",), ro=("peg",), mo_size=(0.9, 1.1),
                         ro_size=(0.9, 1.1)),
    "bin-picking": TaskSpec("pick-and-place", mo=("obj",), ro=("bin_goal",),
                            mo_size=(0.85, 1.15), ro_size=(0.9, 1.1)),
    "button-press-topdown": TaskSpec(
        "press", mo=("button",), ro=("box",), mo_size=None, ro_size=(0.85, 1.15),
        notes={"MO_Size": "the button is a part of the button box (scale the box: RO_Size)"}),
    "drawer-open": TaskSpec("open", mo=("drawer",), ro=(), mo_size=(0.75, 1.0),
                            ro_size=None),
    "hammer": TaskSpec("hit", mo=("hammerbody",), ro=("box",), mo_size=(0.9, 1.1),
                       ro_size=(0.9, 1.1)),
    # Five more, one per remaining Colosseum primitive.
    "door-open": TaskSpec("open", mo=("door",), ro=(), mo_size=(0.85, 1.15), ro_size=None),
    "faucet-open": TaskSpec("turn", mo=("faucetBase",), ro=(), mo_size=(0.75, 1.25),
                            ro_size=None),
    "push": TaskSpec("slide to target", mo=("obj",), ro=(), mo_size=(0.75, 1.25),
                     ro_size=None),
    "pick-place": TaskSpec("pick-and-place", mo=("obj",), ro=(), mo_size=(0.75, 1.25),
                           ro_size=None),
    "peg-insert-side": TaskSpec("insert", mo=("peg",), ro=("box",), mo_size=(0.9, 1.1),
                                ro_size=(0.9, 1.1)),
}


def task_spec(task: str) -> TaskSpec:
  try:
    return TASKS[task]
  except KeyError:
    raise KeyError(f"no Colosseum task spec for MetaWorld task {task!r}; tasks with one: "
                   f"{sorted(TASKS)}") from None


def check_test_set(name: str) -> str:
  if name not in TEST_SETS:
    raise ValueError(f"unknown Colosseum test set {name!r}; valid: {list(TEST_SETS)}")
  return name


def inapplicable(task: str, factor: str) -> str:
  """Why `factor` does not apply to `task` by construction ('' when it does)."""
  spec = task_spec(task)
  if factor in spec.notes:
    return spec.notes[factor]
  if factor.startswith("RO_") and not spec.ro:
    return _NO_RO
  if factor == "MO_Size" and spec.mo_size is None:
    return "the manipulation object cannot be scaled"
  if factor == "RO_Size" and spec.ro_size is None:
    return "the receiver object cannot be scaled"
  return ""


def factors_of(task: str, test_set: str, excluded: Iterable[str] = ()) -> tuple[str, ...]:
  """The factors a test set applies on `task`: none, one, or every applicable one ("all")."""
  check_test_set(test_set)
  if test_set == NONE:
    return ()
  if test_set != ALL:
    return (test_set,)
  skip = set(excluded)
  return tuple(f for f in FACTORS if not inapplicable(task, f) and f not in skip)


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
