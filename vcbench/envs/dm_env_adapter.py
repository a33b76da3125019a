"""A `dm_env.Environment` (dm_control suite tasks, ...) as a `host.HostSim`.

    make_sim = functools.partial(DmEnvSim, functools.partial(load_dm_control, "cartpole",
                                                             "swingup"), image_size=64)
    make_sim = dm_env_adapter.make_sim("cartpole-swingup", render)       # the same

dm_env has no seeded reset, so the adapter takes a factory `make_env(seed)`. A dm_control
task keeps its random state in `env.task.random`; that state is reseeded in place on each
reset, so the physics is compiled once. Any other env is rebuilt from the factory with the
episode's seed, which is what makes the same seed give the same episode.

Observations: `rgb` is `render(env, size)` (default: dm_control's `physics.render` from
`camera_id`), `proprio` and `state` the flattened observation arrays in the env's own key
order. A timestep with `last()` ends the host episode (a terminal state or dm_control's time
limit); the reward of the first timestep is None and counts as 0. dm_env has no success
flag: a `success(timestep)` callable gives one (default: never).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import numpy as np

from vcbench.envs.host import Spec
from vcbench.envs.sim_obs import square_frame, state_spec


def physics_render(env: Any, size: int, camera_id: int = 0) -> np.ndarray:
  """dm_control's renderer: the frame of `camera_id` at size x size."""
  return env.physics.render(height=size, width=size, camera_id=camera_id)


def flat_observation(observation) -> np.ndarray:
  """A dm_env observation (an array or a mapping of arrays) as one float32 vector."""
  if hasattr(observation, "values"):
    parts = [np.asarray(v, np.float32).reshape(-1) for v in observation.values()]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)
  return np.asarray(observation, np.float32).reshape(-1)


def _spec_size(spec) -> int:
  if hasattr(spec, "values"):
    return sum(int(np.prod(s.shape)) for s in spec.values())
  return int(np.prod(spec.shape))


def _reseed_in_place(env: Any, seed: int) -> bool:
  """Reseeds a dm_control task's RandomState; False when the env has none."""
  random = getattr(getattr(env, "task", None), "random", None)
  if isinstance(random, np.random.RandomState):
    random.seed(seed)
    return True
  return False


class DmEnvSim:
  """One dm_env environment behind the HostSim interface.

  Args:
    make_env: seed -> a `dm_env.Environment` (picklable when host workers are used).
    image_size: side of the square `rgb` observation; 0 for none (nothing is rendered).
    render: (env, size) -> an RGB frame; default `physics_render` (dm_control).
    success: timestep -> whether the task is solved at it.
  """

  def __init__(self, make_env: Callable[[int], Any], image_size: int = 64,
               render: Optional[Callable[[Any, int], np.ndarray]] = None,
               success: Optional[Callable[[Any], bool]] = None):
    self._make_env = make_env
    self._success = success
    self.env = make_env(0)
    self.image_size = int(image_size)
    self._render = render or physics_render
    spec = self.env.action_spec()
    self._low = np.broadcast_to(getattr(spec, "minimum", -np.inf), spec.shape)
    self._high = np.broadcast_to(getattr(spec, "maximum", np.inf), spec.shape)
    self._action_shape, self._action_dtype = spec.shape, spec.dtype
    self.action_dim = int(np.prod(spec.shape))
    self._state_dim = _spec_size(self.env.observation_spec())

  def observation_spec(self) -> Spec:
    return state_spec(self._state_dim, self.image_size)

  def reset(self, seed: int) -> dict[str, np.ndarray]:
    if not _reseed_in_place(self.env, int(seed)):
      self.env.close()
      self.env = self._make_env(int(seed))
    return self._obs(self.env.reset())

  def step(self, action: np.ndarray):
    action = np.asarray(action, np.float64).reshape(self._action_shape)
    action = np.clip(action, self._low, self._high).astype(self._action_dtype)
    timestep = self.env.step(action)
    reward = 0.0 if timestep.reward is None else float(np.sum(timestep.reward))
    solved = bool(self._success(timestep)) if self._success is not None else False
    return self._obs(timestep), reward, bool(timestep.last()), {"success": solved}

  def _obs(self, timestep) -> dict[str, np.ndarray]:
    flat = flat_observation(timestep.observation)
    out = {"proprio": flat, "state": flat.copy()}
    if self.image_size:
      out["rgb"] = square_frame(self._render(self.env, self.image_size), self.image_size)
    return out

  def close(self) -> None:
    self.env.close()


def load_dm_control(domain: str, task: str, seed: int, **task_kwargs):
  """A dm_control suite task seeded with `seed` (a `make_env` for `DmEnvSim`)."""
  from dm_control import suite  # pylint: disable=import-outside-toplevel  # optional dependency
  return suite.load(domain, task, task_kwargs={"random": seed, **task_kwargs})


def make_sim(domain_task: str, render=None) -> Callable[[], DmEnvSim]:
  """A picklable factory of a dm_control task named "domain-task" (e.g. "cartpole-swingup")
  rendering at `render.size` pixels (no frames without a render config)."""
  domain, _, task = domain_task.partition("-")
  size = render.size if render is not None else 0
  return functools.partial(DmEnvSim, functools.partial(load_dm_control, domain, task),
                           image_size=size)
