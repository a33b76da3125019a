"""Adroit (gymnasium-robotics 1.4.2, mujoco 3.3.0) as a `host.HostSim`, as CortexBench uses it.

The two CortexBench Adroit tasks of the VC-1 paper, pen (in-hand reorientation) and relocate
(move a ball to a floating target), are DAPG's (Rajeswaran et al. 2018, "Learning Complex
Dexterous Manipulation with Deep Reinforcement Learning and Demonstrations"), originally in
mj_envs; gymnasium-robotics' `AdroitHandPen-v1` / `AdroitHandRelocate-v1` port the same models,
observations and goal tests to the `mujoco` bindings (frame_skip 5, 10 ms per step).

Protocol choices:
- Episodes: pen 100 steps, relocate 200 (DAPG's lengths); the simulator reports terminal=True
  at its task's length, so one suite horizon (200) serves both. As in mj_envs' pen-v0, a pen
  that falls out of the hand (pen height < 0.075 m) also ends the episode.
- Success is DAPG's `evaluate_success`: an episode succeeds when the goal was achieved on more
  than 20 (pen) / 25 (relocate) of its steps, not the per-step flag. Goal achieved, as in
  mj_envs and gymnasium-robotics: pen within 0.075 m of its goal position with orientation
  similarity (dot product of the unit pen axes) > 0.95; relocate ball within 0.1 m of the target.
  `info['success']` becomes True at the step where the running count of goal-achieved steps
  exceeds the threshold and stays True; over a full episode this equals DAPG's criterion (the
  count only grows), and it lets an evaluation stop as soon as the outcome is decided.
  `info['goal_achieved']` is the per-step flag, `info['goal_steps']` the running count.
- Seeds: `reset(seed)` reseeds gymnasium's generator, which draws the pen's target orientation
  (roll, pitch in [-1, 1] rad) or the ball and target positions: same seed, same episode.
- Pixels: `mujoco.Renderer` at `RenderConfig.size` (eai-vc renders 256^2) from eai-vc's Adroit
  camera, `vil_camera` (Adroit_BC_config.yaml), which the gymnasium-robotics models define as
  mj_envs' do (a fixed camera in front of and above the table). mujoco-py images were bottom-up
  (eai-vc flips them); the `mujoco` renderer's are upright already, so none is flipped. Any
  model camera (`fixed`, `vil_camera`, pen's `view_1`...) is accepted by name.
- One observation and action layout for both tasks, so a suite run moves between them with one
  compiled policy: the relocate hand is on a 6-dof arm (30 actuators: arm x, y, z, rx, ry, rz,
  then 24 hand joints), the pen hand's base is fixed (the same 24 hand actuators only).
  `action` is 30-d for both (pen ignores the 6 arm entries). `proprio` is eai-vc's
  `get_proprioception` (mj_envs pen obs[:24], relocate obs[:30], the joint positions, which
  gymnasium-robotics keeps at the same places: pen qpos[:24] hand joints, relocate qpos[:30]
  arm + hand joints), with zeros in the 6 arm slots for pen: 30-d. `state`, the state oracle's
  input, is the task's full observation (pen 45-d: hand joints, pen position, velocity,
  orientation, goal orientation and errors; relocate 39-d: arm + hand joints, palm-ball,
  palm-target and ball-target vectors), relocate's zero-padded to 45.

The CortexBench job on this suite, with its protocol numbers (100 demos, 25 test episodes,
horizon 200, `vil_camera`) from the suite entry:
  MUJOCO_GL=egl python -m launch.main --config configs/cortexbench.py --config.suite=adroit
Experts and their measured success: `vcbench.envs.mujoco.adroit_experts`,
launch/bench/adroit_experts.py.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.metadata

import numpy as np

from vcbench.envs import sim_obs
from vcbench.envs.core import RenderConfig
from vcbench.envs.mujoco.metaworld import _release_gl_context, make_renderer

GYMNASIUM_ROBOTICS = "1.4.2"   # The version the module and its experts were measured on.
ACTION_DIM = 30     # Arm (6) + hand (24) actuators; pen ignores the arm's.
ARM_DIM = 6
PROPRIO_DIM = 30
STATE_DIM = 45      # The widest task observation (pen's).
DEFAULT_CAMERA = "vil_camera"
DEFAULT_RENDER = RenderConfig(camera=DEFAULT_CAMERA)


@dataclasses.dataclass(frozen=True)
class Task:
  env_id: str
  episode_length: int   # DAPG's episode length.
  success_steps: int    # Success: goal achieved on more than this many steps (DAPG).
  proprio_dim: int      # eai-vc's proprioception: the first entries of the observation.
  has_arm: bool


TASKS = {
    "pen": Task("AdroitHandPen-v1", episode_length=100, success_steps=20, proprio_dim=24,
                has_arm=False),
    "relocate": Task("AdroitHandRelocate-v1", episode_length=200, success_steps=25,
                     proprio_dim=30, has_arm=True),
}
PEN_DROP_HEIGHT = 0.075   # mj_envs' pen-v0 ends the episode when the pen falls below this.


def _module():
  try:
    import gymnasium  # noqa: PLC0415 - optional dependency.
    import gymnasium_robotics  # noqa: PLC0415
  except ImportError as e:
    raise ImportError("gymnasium-robotics is not installed: `pip install -e .[adroit]` "
                      f"(gymnasium-robotics=={GYMNASIUM_ROBOTICS}, mujoco==3.3.0).") from e
  gymnasium.register_envs(gymnasium_robotics)
  return gymnasium


def task_names() -> list[str]:
  return sorted(TASKS)


def check_task(task: str) -> Task:
  if task not in TASKS:
    raise ValueError(f"unknown Adroit task {task!r}; valid tasks: {task_names()}")
  return TASKS[task]


def version() -> str:
  """The installed gymnasium-robotics' version (part of every demo cache key)."""
  try:
    return "gymnasium-robotics-" + importlib.metadata.version("gymnasium-robotics")
  except importlib.metadata.PackageNotFoundError:
    return "unknown"


class AdroitSim:
  """One Adroit task as a `HostSim`; `render=None` skips pixels (state oracle, experts).

  `episode_length` caps the task's own length (DAPG's by default). The expert reads the
  simulator through `env` (the unwrapped gymnasium env: `model`, `data`), `seed` and `steps`.
  """
  action_dim = ACTION_DIM

  def __init__(self, task: str, render: RenderConfig | None = DEFAULT_RENDER,
               episode_length: int | None = None):
    gym = _module()
    self.spec = check_task(task)
    self.task, self.render_config = task, render
    self.episode_length = min(self.spec.episode_length, episode_length or self.spec.episode_length)
    self.env = gym.make(self.spec.env_id).unwrapped   # No TimeLimit: episodes end here.
    model = self.env.model
    self._object = model.body("Object").id
    self.seed, self.steps, self.goal_steps = None, 0, 0
    self._raw_obs = None
    self._renderer = None
    if render is not None:
      self._renderer, self._camera = _renderer(model, render)

  def observation_spec(self):
    return sim_obs.obs_spec(STATE_DIM, PROPRIO_DIM, sim_obs.render_size(self.render_config))

  def reset(self, seed: int):
    self._raw_obs, _ = self.env.reset(seed=int(seed))
    self.seed, self.steps, self.goal_steps = int(seed), 0, 0
    return self._obs()

  def step(self, action):
    action = np.asarray(action, np.float64).reshape(-1)
    if action.shape != (ACTION_DIM,):
      raise ValueError(f"AdroitSim.step: expected a {ACTION_DIM}-d action, got {action.shape}.")
    native = action if self.spec.has_arm else action[ARM_DIM:]
    self._raw_obs, reward, _, _, info = self.env.step(np.clip(native, -1.0, 1.0))
    self.steps += 1
    achieved = bool(info["success"])   # gymnasium-robotics' per-step goal test.
    self.goal_steps += achieved
    terminal = self.steps >= self.episode_length or self._dropped()
    info = {"success": self.goal_steps > self.spec.success_steps, "goal_achieved": achieved,
            "goal_steps": self.goal_steps}
    return self._obs(), float(reward), terminal, info

  def _dropped(self) -> bool:
    return self.task == "pen" and self.env.data.xpos[self._object][2] < PEN_DROP_HEIGHT

  def render(self) -> np.ndarray:
    self._renderer.update_scene(self.env.data, camera=self._camera)
    img = self._renderer.render()
    _release_gl_context()
    return img.copy()

  def _obs(self):
    raw = np.asarray(self._raw_obs, np.float32)
    proprio = np.zeros(PROPRIO_DIM, np.float32)
    proprio[PROPRIO_DIM - self.spec.proprio_dim:] = raw[:self.spec.proprio_dim]
    state = np.zeros(STATE_DIM, np.float32)
    state[:len(raw)] = raw
    obs = {"proprio": proprio, "state": state}
    if self._renderer is not None:
      obs["rgb"] = self.render()
    return obs

  def close(self):
    if self._renderer is not None:
      self._renderer.close()
      self._renderer = None
    self.env.close()


def _renderer(model, render: RenderConfig):
  names = [model.camera(i).name for i in range(model.ncam)]
  if render.camera not in names:
    raise ValueError(f"unknown Adroit camera {render.camera!r}; valid: {names}")
  renderer, camera, _ = make_renderer(model, render, upright_cameras=tuple(names))
  return renderer, camera


def camera_names(task: str) -> list[str]:
  """The cameras `RenderConfig.camera` may name for `task` (the model's own)."""
  sim = AdroitSim(task, None)
  try:
    model = sim.env.model
    return [model.camera(i).name for i in range(model.ncam)]
  finally:
    sim.close()


def make_sim(task: str, render: RenderConfig | None, horizon: int = 0):
  """A picklable factory for `host.SimBatch` workers; `horizon` (> 0) caps the episode."""
  check_task(task)
  return functools.partial(AdroitSim, task, render, horizon or None)
