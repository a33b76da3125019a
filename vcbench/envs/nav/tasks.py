"""vcbench-nav tasks: PointNav, ObjectNav and ImageNav -- goals, success rules, difficulty bins.

A task decides three things: what the goal is (a point, a category, an image taken at a
pose), which cells a geodesic field starts from (so SPL and the reward use the shortest path
to *any* way of succeeding), and when END counts as success. Numbers follow RobustNav (on
RoboTHOR): success within 0.2 m of the point goal; within 1.0 m of an instance of the goal
category with the category in view; 1.0 m of the ImageNav goal pose (habitat's rule); step
limits 300 (PointNav) and 500; reward = 10 * success - delta(geodesic distance) - 0.01 per step.
Difficulty bins are RobustNav's, by geodesic start distance in metres.
"""
from __future__ import annotations

import dataclasses

import numpy as np

_INF = float("inf")


@dataclasses.dataclass(frozen=True)
class Task:
  name: str
  success_distance: float      # metres
  max_steps: int
  bins: tuple[tuple[str, float, float], ...]   # (name, lo, hi) by geodesic start distance
  min_distance: float = 0.5    # easier episodes are not generated: the agent starts at the goal
  needs_visible: bool = False  # success also needs the goal category in view (ObjectNav)


TASKS = {
    "pointnav": Task("pointnav", 0.2, 300,
                     (("easy", 0.0, 2.29), ("medium", 2.29, 4.40), ("hard", 4.40, 9.62))),
    "objectnav": Task("objectnav", 1.0, 500,
                      (("easy", 0.0, 1.51), ("medium", 1.51, 3.79), ("hard", 3.79, 9.01)),
                      min_distance=0.25, needs_visible=True),
    "imagenav": Task("imagenav", 1.0, 500,
                     (("easy", 0.0, 2.29), ("medium", 2.29, 4.40), ("hard", 4.40, 9.62)),
                     min_distance=1.5),
}

# Rewards (RobustNav / DD-PPO): terminal success bonus, geodesic progress, slack per step.
SUCCESS_REWARD = 10.0
SLACK_REWARD = -0.01


def get(name: str) -> Task:
  if name not in TASKS:
    raise ValueError(f"unknown nav task {name!r}; valid tasks: {sorted(TASKS)}.")
  return TASKS[name]


def bin_index(task: Task, distance) -> np.ndarray:
  """Index of the difficulty bin of a geodesic distance (-1 when outside all bins)."""
  d = np.asarray(distance)
  out = np.full(d.shape, -1, np.int32)
  for i, (_, lo, hi) in enumerate(task.bins):
    out[(d >= lo) & (d < hi) & (d >= task.min_distance)] = i
  return out
