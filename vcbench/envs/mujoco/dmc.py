"""The DeepMind Control Suite (dm_control 1.0.28 on mujoco 3.3.0) as a `host.HostSim`, as
CortexBench uses it.

- Tasks are named "<domain>-<task>" (`walker-walk`, `reacher-easy`, ...); every dm_control suite
  task loads, CortexBench's five are `CORTEXBENCH_TASKS` (the paper lists reacher-hard where
  eai-vc's code runs reacher-easy: both load).
- Episodes: dm_control's own 1000 control steps, seeded by the episode seed (the task's random
  state), with an action repeat of 2: one `step` applies the action for 2 control steps and
  returns their summed reward, so an episode is 500 decisions and its return is on dm_control's
  0-1000 scale (score = return/10, as the paper). eai-vc's DMC config sets neither (its
  `dmc2gym` registration lives in mj_envs, outside its repository); action repeat 2 is the
  DrQ/DrQ-v2 convention for these tasks and halves rendering and embedding per episode.
  `action_repeat` is a constructor argument (part of the suite's demo cache key).
- Pixels: camera 0 of each domain, as eai-vc's `camera_id=0` (`side` for walker and cheetah,
  `cam0` for finger, `fixed` for reacher; named `camera0` here, any model camera by its name), rendered with `mujoco.Renderer` in the CPU render
  profile (`RenderConfig.fast`). No proprio (eai-vc's `add_proprio: False` for DMC); `state` is
  dm_control's observation dict flattened in its own key order (the SAC experts' input and the
  state oracle's embedding).
- No terminal states: every episode runs its 500 steps; `success` is never set. The suite is
  scored by return: `info['score']` is the mean reward per control step so far, so an
  episode's score (100 x its last step's) is return/10 over the full episode, as the paper,
  and stays on the same 0-100 scale when a reduced protocol stops episodes early.
"""
from __future__ import annotations

import functools
import importlib.metadata

import numpy as np

from vcbench.envs import sim_obs
from vcbench.envs.core import RenderConfig
from vcbench.envs.mujoco import metaworld as mw

CORTEXBENCH_TASKS = ("walker-stand", "walker-walk", "reacher-easy", "cheetah-run", "finger-spin")
ACTION_REPEAT = 2
DEFAULT_CAMERA = "camera0"   # The model's first camera, whatever the domain calls it.
CONTROL_STEPS = 1000   # dm_control's episode length in control steps (its default time limit).


def _suite():
  try:
    from dm_control import suite  # noqa: PLC0415 - optional dependency, installed by setup.sh.
  except ImportError as e:
    raise ImportError("dm_control is not installed: run `pip install -e .[mujoco]` (installs "
                      "dm-control==1.0.28 with mujoco==3.3.0).") from e
  return suite


def task_names() -> list[str]:
  """Every dm_control suite task as "<domain>-<task>", e.g. 'walker-walk'."""
  return sorted(f"{d}-{t}" for d, t in _suite().ALL_TASKS)


def split_task(task: str) -> tuple[str, str]:
  names = task_names()
  if task not in names:
    close = [n for n in names if n.split("-")[0] == task.split("-")[0]]
    hint = f" Did you mean one of {close}?" if close else ""
    raise ValueError(f"unknown DMC task {task!r}.{hint} Valid tasks: {names}")
  domain, _, name = task.partition("-")
  return domain, name


def version() -> str:
  """dm_control's version (part of every demo cache key)."""
  try:
    return importlib.metadata.version("dm-control")
  except importlib.metadata.PackageNotFoundError:
    return "unknown"


def horizon(action_repeat: int = ACTION_REPEAT) -> int:
  """Decisions per episode."""
  return CONTROL_STEPS // action_repeat


class DMCSim:
  """One dm_control task as a `HostSim`; `render=None` skips pixels (experts, state oracle)."""

  def __init__(self, task: str, render: RenderConfig | None = None,
               action_repeat: int = ACTION_REPEAT):
    domain, name = split_task(task)
    if action_repeat < 1 or CONTROL_STEPS % action_repeat:
      raise ValueError(f"action_repeat must divide {CONTROL_STEPS}, got {action_repeat}")
    self.task, self.render_config, self.action_repeat = task, render, action_repeat
    self.env = _suite().load(domain, name, task_kwargs={"random": 0})
    spec = self.env.action_spec()
    self.action_dim = int(spec.shape[0])
    self._low, self._high = spec.minimum, spec.maximum
    self._state_dim = sum(int(np.prod(s.shape)) for s in self.env.observation_spec().values())
    self._renderer = None
    if render is not None:
      model = self.env.physics.model.ptr
      names = [model.camera(i).name for i in range(model.ncam)]
      if render.camera != DEFAULT_CAMERA and render.camera not in names:
        raise ValueError(f"unknown camera {render.camera!r} for DMC task {task!r}; valid: "
                         f"{[DEFAULT_CAMERA] + names}")
      camera = names[0] if render.camera == DEFAULT_CAMERA else render.camera
      self._renderer, self._camera, _ = mw.make_renderer(
          model, RenderConfig(render.size, camera, render.fast),
          upright_cameras=tuple(names))
    self._timestep = None

  @property
  def physics(self):
    return self.env.physics

  def observation_spec(self):
    return sim_obs.obs_spec(self._state_dim, 0, sim_obs.render_size(self.render_config))

  def reset(self, seed: int):
    # dm_control draws the initial state from the task's random state: reseeding it makes the
    # episode a function of the seed alone.
    self.env.task._random = np.random.RandomState(int(seed))  # noqa: SLF001
    self._timestep = self.env.reset()
    self._return, self._control_steps = 0.0, 0
    return self._obs()

  def step(self, action):
    action = np.clip(np.asarray(action, np.float64), self._low, self._high)
    reward = 0.0
    for _ in range(self.action_repeat):
      self._timestep = self.env.step(action)
      reward += float(self._timestep.reward or 0.0)
      self._control_steps += 1
      if self._timestep.last():
        break
    self._return += reward
    # The mean reward per control step so far (dm_control rewards are in [0, 1]): over the
    # full 1000 steps it is return/1000, so the suite's score (100 x this) is the paper's
    # return/10; a run cut to fewer decisions keeps the same 0-100 scale.
    score = self._return / self._control_steps
    return self._obs(), reward, bool(self._timestep.last()), {"success": False, "score": score}

  def state(self) -> np.ndarray:
    return flat_observation(self._timestep.observation)

  def render(self) -> np.ndarray:
    self._renderer.update_scene(self.physics.data.ptr, camera=self._camera)
    img = self._renderer.render()
    mw._release_gl_context()  # noqa: SLF001 - shared EGL handling of the MuJoCo renderers.
    return img.copy()

  def _obs(self):
    obs = {"state": self.state()}
    if self._renderer is not None:
      obs["rgb"] = self.render()
    return obs

  def close(self):
    if self._renderer is not None:
      self._renderer.close()
      self._renderer = None
    self.env.close()


def flat_observation(observation) -> np.ndarray:
  return np.concatenate([np.asarray(v, np.float32).reshape(-1)
                         for v in observation.values()])


@functools.lru_cache(maxsize=None)
def state_dim(task: str) -> int:
  """Width of the task's flattened observation (walker 24, cheetah 17, finger 9, reacher 6)."""
  domain, name = split_task(task)
  env = _suite().load(domain, name)
  try:
    return sum(int(np.prod(s.shape)) for s in env.observation_spec().values())
  finally:
    env.close()


def camera_names(task: str) -> list[str]:
  """The cameras `RenderConfig.camera` may name for `task` (`camera0`: eai-vc's)."""
  sim = DMCSim(task)
  try:
    model = sim.physics.model.ptr
    return [DEFAULT_CAMERA] + [model.camera(i).name for i in range(model.ncam)]
  finally:
    sim.close()


def make_sim(task: str, render: RenderConfig | None, max_steps: int = 0,
             action_repeat: int = ACTION_REPEAT):
  """A picklable factory for `host.SimBatch` workers (`max_steps` is the host's horizon: the
  simulator itself always ends at dm_control's time limit)."""
  del max_steps
  return functools.partial(DMCSim, task, render, action_repeat)
