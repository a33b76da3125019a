"""CortexBench: its suites and tasks as data, and how the few-shot BC track runs each suite.

The paper (VC-1, Majumdar et al. 2023) scores a PVR on 7 benchmark suites. A suite is data
(`Suite`, registered in `SUITES`): its task list and protocol numbers, and how the BC track
runs it (simulator factory, expert, observations, state width, metric); a new suite is a
simulator file and one entry here (or a `SUITES.register` from anywhere). A store row's task is
"<suite>/<task>" (`task_key`) and its `score` is on a 0-100 scale in every suite (success % or
return/10), higher is better. The paper's two summaries, Mean Success and Mean Rank, are
`cortexbench_scores`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from vcbench.data import demos as demos_lib
from vcbench.envs import trifinger as tf
from vcbench.envs.mujoco import adroit
from vcbench.envs.mujoco import adroit_experts
from vcbench.envs.mujoco import dmc
from vcbench.envs.mujoco import dmc_experts
from vcbench.envs.mujoco import metaworld as mw
from vcbench.registry import Registry

BENCHMARK = "cortexbench"
SCORE = "score"  # The metric every table and rank is computed from.
_NAV_REASON = "its Habitat protocol runs as vcbench-nav (configs/nav.py), not in this track yet"


def _success(episodes: Mapping[str, np.ndarray]) -> float:
  return 100.0 * float(np.mean(episodes["success"]))


def _return_over_10(episodes: Mapping[str, np.ndarray]) -> float:
  return float(np.mean(episodes["return"])) / 10.0


def _mean_score(episodes: Mapping[str, np.ndarray]) -> float:
  """100 x the mean of each episode's last `info['score']` (a score in [0, 1])."""
  score = np.asarray(episodes.get("score", []), np.float64)
  if score.size == 0 or np.isnan(score).any():
    raise ValueError("the 'score' metric needs a simulator that reports info['score'] in every "
                     f"episode; got per-episode scores {score.tolist()}. Use 'success' or "
                     "'return/10' for simulators without one.")
  return 100.0 * float(np.mean(score))


# How a suite scores its test episodes (per-episode `success`, `length`, `return` and `score`
# arrays) on the 0-100 scale of every table. A suite with another score registers its own.
METRICS = Registry("CortexBench metric")
METRICS.register("success")(_success)
METRICS.register("return/10")(_return_over_10)
METRICS.register("score")(_mean_score)   # TriFinger's scaled distances (eai-vc's).


@dataclasses.dataclass(frozen=True)
class Suite:
  """One CortexBench benchmark suite: its protocol numbers and how vcbench runs it.

  Attributes:
    name: key in `SUITES` and prefix of task keys, e.g. "metaworld".
    label: column header as in the paper's tables, e.g. "Meta-World".
    tasks: task names, the part after "/" in a task key.
    num_demos: expert demonstrations per task for imitation learning (0: trained with RL).
    eval_episodes: evaluation episodes per task and seed.
    horizon: episode length in environment steps (0: set by the environment, not fixed here).
    metric: a `METRICS` name: what `score` measures ("success" %, "return/10", "score":
      100 x the simulator's continuous score).
    available: whether vcbench can run this suite today.
    reason: why it is unavailable; "" when available.
    make_sim: (task, RenderConfig or None for no pixels, horizon) -> a picklable factory of
      the task's `host.HostSim` (the BC track runs the suite through it).
    expert: task -> (sim, obs) -> action, the demonstrator.
    task_names: every task the simulator can run (default: `tasks`).
    state_dim: width of the simulator state the state oracle sees (0: no state oracle), or
      task -> width where the tasks differ.
    proprio: the policy also sees the simulator's `proprio` observation.
    version: the simulator's version, part of the demo cache key.
    expert_version: task -> what identifies its expert (e.g. a hash of its parameters), also
      part of the demo cache key (None: the simulator's version says it, as MetaWorld's
      scripted policies ship with it).
    cameras: task -> the camera names its renderer accepts (None: not checked before a run).
    camera: the camera its pixels come from by default (eai-vc's for the suite; "default" for
      a simulator with one view).
    quick_tasks: the tasks of reduced runs (`quick`: all of them, `tiny`: the first), chosen
      for cheap demos; default: the first two tasks.
  """

  name: str
  label: str
  tasks: tuple[str, ...]
  num_demos: int
  eval_episodes: int
  horizon: int
  metric: str
  available: bool
  reason: str = ""
  make_sim: Optional[Callable[[str, Any, int], Callable[[], Any]]] = None
  expert: Optional[Callable[[str], Callable[[Any, dict], np.ndarray]]] = None
  task_names: Optional[Callable[[], Sequence[str]]] = None
  state_dim: int | Callable[[str], int] = 0
  proprio: bool = True
  version: Callable[[], str] = lambda: "unknown"
  expert_version: Optional[Callable[[str], str]] = None
  cameras: Optional[Callable[[str], Sequence[str]]] = None
  camera: str = "default"
  quick_tasks: tuple[str, ...] = ()

  def __post_init__(self):
    METRICS.get(self.metric)
    if not self.quick_tasks:
      object.__setattr__(self, "quick_tasks", self.tasks[:2])
    if self.available and (self.make_sim is None or self.expert is None):
      raise ValueError(f"suite {self.name!r}: an available suite needs make_sim and expert")

  @property
  def success_ends_episode(self) -> bool:
    """Success-scored suites stop an episode at success (and keep successful demos only);
    the others run every episode to its horizon."""
    return self.metric == "success"

  def all_tasks(self) -> list[str]:
    return list(self.task_names()) if self.task_names is not None else list(self.tasks)

  def state_width(self, task: str) -> int:
    return int(self.state_dim(task) if callable(self.state_dim) else self.state_dim)

  def score(self, episodes: Mapping[str, np.ndarray]) -> float:
    return float(METRICS.get(self.metric)(episodes))

  def demo_source(self, task: str, render, horizon: int) -> demos_lib.Source:
    version = self.version()
    if self.expert_version is not None:
      version += "+" + self.expert_version(task)
    return demos_lib.Source(make_sim=self.make_sim(task, render, horizon),
                            expert=self.expert(task), success_only=self.success_ends_episode,
                            version=version)


SUITES = Registry("CortexBench suite")
for _suite in (
    Suite("adroit", "Adroit", ("pen", "relocate"), num_demos=100, eval_episodes=25,
          horizon=200,  # pen runs 100 steps (its simulator ends them), relocate 200.
          metric="success", available=True, make_sim=adroit.make_sim, expert=adroit_experts.expert,
          task_names=adroit.task_names, state_dim=adroit.STATE_DIM, version=adroit.version,
          expert_version=adroit_experts.version, cameras=adroit.camera_names,
          camera=adroit.DEFAULT_CAMERA,
          # Pen's MPC expert takes ~10 s an episode and succeeds in ~1 of 5: not for quick runs.
          quick_tasks=("relocate",)),
    Suite("metaworld", "Meta-World",
          ("assembly", "bin-picking", "button-press-topdown", "drawer-open", "hammer"),
          num_demos=25, eval_episodes=25, horizon=500, metric="success", available=True,
          make_sim=mw.make_sim, expert=mw.expert, task_names=mw.task_names,
          state_dim=mw.STATE_DIM, version=mw.version, cameras=mw.camera_names,
          camera="top_cap2", quick_tasks=("button-press-topdown", "drawer-open")),
    # DMC: 500 decisions = dm_control's 1000 control steps at action repeat 2 (envs/mujoco/dmc.py).
    Suite("dmc", "DMControl", dmc.CORTEXBENCH_TASKS, num_demos=100, eval_episodes=10,
          horizon=dmc.horizon(), metric="score", available=True, make_sim=dmc.make_sim,
          expert=dmc_experts.expert, task_names=dmc.task_names, state_dim=dmc.state_dim,
          proprio=False, version=dmc.version, expert_version=dmc_experts.version,
          cameras=dmc.camera_names, camera=dmc.DEFAULT_CAMERA,
          quick_tasks=("reacher-easy", "walker-stand")),
    Suite("trifinger", "TriFinger", tf.TASKS, num_demos=100, eval_episodes=25,
          horizon=tf.HORIZON,  # push runs 10 steps; reach 5, ended by the simulator itself.
          metric="score", available=True, make_sim=tf.make_sim, expert=tf.expert,
          task_names=tf.task_names, state_dim=tf.STATE_DIM, version=tf.version,
          cameras=tf.camera_names, camera=tf.CAMERAS[0], quick_tasks=("reach-cube",)),
    # Habitat suites: ObjectNav is IL on 77k human demonstrations, ImageNav and Mobile Pick are RL;
    # their evaluation episodes are the standard validation splits.
    Suite("objectnav", "ObjectNav", ("objectnav",), num_demos=77_000, eval_episodes=2000,
          horizon=500, metric="success", available=False, reason=_NAV_REASON),
    Suite("imagenav", "ImageNav", ("imagenav",), num_demos=0, eval_episodes=4200, horizon=1000,
          metric="success", available=False, reason=_NAV_REASON),
    Suite("mobilepick", "Mobile Pick", ("mobile-pick",), num_demos=0, eval_episodes=0, horizon=0,
          metric="success", available=False, reason="Habitat 2.0 rearrangement not built yet"),
):
  SUITES.register(_suite.name)(_suite)


def suite(name: str) -> Suite:
  """The suite called `name`; the error lists the valid names."""
  return SUITES.get(name)


def check_tasks(suite_name: str, tasks: Iterable[str]) -> tuple[str, ...]:
  """Returns `tasks` as a tuple if all belong to the suite, else raises listing the valid ones."""
  s = suite(suite_name)
  tasks = tuple(tasks)
  unknown = [t for t in tasks if t not in s.tasks]
  if unknown:
    raise ValueError(f"unknown {suite_name} tasks {unknown}; valid tasks: {list(s.tasks)}")
  return tasks


def task_key(suite_name: str, task: str) -> str:
  """The store's task field for a suite's task, e.g. "metaworld/assembly"."""
  return f"{suite_name}/{task}"


def parse_task_key(key: str) -> tuple[str, str]:
  """Inverse of `task_key`: "metaworld/assembly" -> ("metaworld", "assembly")."""
  suite_name, sep, task = str(key).partition("/")
  if not sep or not suite_name or not task:
    raise ValueError(f"CortexBench task key {key!r} is not '<suite>/<task>', "
                     "e.g. 'metaworld/assembly'")
  return suite_name, task
