"""A 2-D point mass as a `host.HostSim`: the smallest CPU simulator with real state.

It exists to test the host bridge (stateful stepping, seeds, workers) without MuJoCo, and as
the template for a new CPU simulator adapter: `make_sim` and `expert` are what a CortexBench
suite entry needs (the tests register one, scored by return). Episode: a point starts at a
seeded position and must reach a seeded goal; actions are clipped velocities; reward is
-distance; success within `tolerance`; obs `goal`, `proprio` (pos + velocity), `state` (pos,
velocity, goal: the state oracle's input) and a small `rgb` image with the point and goal
drawn, so pixel policies can be exercised too.
"""
from __future__ import annotations

import functools

import numpy as np

STATE_DIM = 6


class PointMass:
  action_dim = 2

  def __init__(self, image_size: int = 16, tolerance: float = 0.05, dt: float = 0.1):
    self.image_size, self.tolerance, self.dt = image_size, tolerance, dt
    self._rng = np.random.default_rng(0)
    self.pos = np.zeros(2)
    self.vel = np.zeros(2)
    self.goal = np.zeros(2)

  def observation_spec(self):
    s = self.image_size
    return {"rgb": ((s, s, 3), np.dtype(np.uint8)), "proprio": ((4,), np.dtype(np.float32)),
            "goal": ((2,), np.dtype(np.float32)), "state": ((STATE_DIM,), np.dtype(np.float32))}

  def reset(self, seed: int):
    self._rng = np.random.default_rng(seed)
    self.pos = self._rng.uniform(-1, 1, 2)
    self.goal = self._rng.uniform(-1, 1, 2)
    self.vel = np.zeros(2)
    return self._obs()

  def step(self, action):
    # Process noise from the episode's generator: replaying or skipping a step would change
    # every later state, which is what the bridge tests look for.
    self.vel = np.clip(np.asarray(action, np.float64), -1, 1) + self._rng.normal(0, 0.01, 2)
    self.pos = np.clip(self.pos + self.dt * self.vel, -1.5, 1.5)
    dist = float(np.linalg.norm(self.pos - self.goal))
    return self._obs(), -dist, False, {"success": dist < self.tolerance}

  def _obs(self):
    s = self.image_size
    img = np.zeros((s, s, 3), np.uint8)
    for xy, ch in ((self.pos, 0), (self.goal, 1)):
      i, j = np.clip(((np.asarray(xy) + 1.5) / 3 * s).astype(int), 0, s - 1)
      img[j, i, ch] = 255
    proprio = np.concatenate([self.pos, self.vel]).astype(np.float32)
    return {"rgb": img, "proprio": proprio, "goal": self.goal.astype(np.float32),
            "state": np.concatenate([proprio, self.goal]).astype(np.float32)}

  def close(self):
    pass


def greedy_action(obs: dict) -> np.ndarray:
  """The expert: head for the goal."""
  return np.clip(3.0 * (obs["goal"] - obs["proprio"][..., :2]), -1, 1)


def make_sim(task: str, render=None, horizon: int = 0):
  """A picklable factory of the point mass (one task, "reach"), its image `render.size` pixels
  (16 without a render config)."""
  del horizon   # The episode bookkeeping (host.SimBatch) ends episodes.
  if task != "reach":
    raise ValueError(f"the point mass has one task, 'reach'; got {task!r}")
  return functools.partial(PointMass, image_size=render.size if render is not None else 16)


def expert(task: str):
  """(sim, obs) -> action: `greedy_action`."""
  del task
  return lambda sim, obs: greedy_action(obs)
