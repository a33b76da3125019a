"""MetaWorld v3 (metaworld 3.1.1, mujoco 3.3.0) as a `host.HostSim`, as CortexBench uses it.

- Goal-observable tasks with random initial positions drawn from the episode seed
  (`seeded_rand_vec`, as eai-vc's `_freeze_rand_vec = False`): the same seed gives the same
  episode.
- Pixels: RGB rendered with `mujoco.Renderer` at `RenderConfig.size` (eai-vc renders 256²; the
  encoder's own preprocessing resizes/crops to its input). eai-vc renders from `top_cap2`, a
  camera of the R3M-era MetaWorld fork that MetaWorld v3 no longer ships; vcbench emulates it
  with a free camera in front of and above the table (`CAMERAS`). Any camera of the model
  (`corner`, `corner2`, `topview`, ...) is accepted by name; MetaWorld's fixed cameras were
  authored for mujoco-py's flipped images, so they are flipped upright.
- The CPU render profile (`RenderConfig.fast`, default on) turns off MSAA, shadows,
  reflections and the skybox: ~8 -> ~100 frames/s on these CPUs.
- `proprio` = the first 4 entries of MetaWorld's observation (hand xyz, gripper opening), as
  eai-vc's `get_proprioception`; `state` = hand, gripper, object poses and goal (the state
  oracle's "embedding"); success = MetaWorld's `success` flag.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import os
import re
import warnings

import numpy as np

from vcbench.envs import sim_obs
from vcbench.envs.core import RenderConfig  # noqa: F401 - MetaWorld's frames are configured by it.

CORTEXBENCH_TASKS = ("assembly", "bin-picking", "button-press-topdown", "drawer-open", "hammer")
PROPRIO_DIM = 4
STATE_DIM = 21  # hand xyz, gripper, 14 object pose entries, goal xyz.


@dataclasses.dataclass(frozen=True)
class FreeCamera:
  lookat: tuple[float, float, float]
  distance: float
  azimuth: float
  elevation: float


# Emulation of eai-vc's `top_cap2` (see the module docstring): looks at the work area from
# the far side of the table, so the arm, objects and goals are all in view.
CAMERAS = {"top_cap2": FreeCamera(lookat=(0.0, 0.62, 0.1), distance=1.35, azimuth=-90.0,
                                  elevation=-50.0)}


def _module():
  try:
    import metaworld  # noqa: PLC0415 - optional dependency, installed by launch/setup.sh.
  except ImportError as e:
    raise ImportError("MetaWorld is not installed: run `bash launch/setup.sh` (installs "
                      "vcbench[mujoco]: metaworld==3.1.1, mujoco==3.3.0).") from e
  return metaworld


def task_names() -> list[str]:
  """Every MetaWorld v3 task, by its short name (e.g. 'drawer-open')."""
  envs = _module().ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE
  return sorted(k[: -len("-v3-goal-observable")] for k in envs)


def check_task(task: str) -> str:
  names = task_names()
  if task not in names:
    close = [n for n in names if task.split("-")[0] in n][:8]
    hint = f" Did you mean one of {close}?" if close else ""
    raise ValueError(f"unknown MetaWorld task {task!r}.{hint} Valid tasks: {names}")
  return task


def version() -> str:
  """The installed MetaWorld's version (part of every demo cache key)."""
  try:
    return importlib.metadata.version("metaworld")
  except importlib.metadata.PackageNotFoundError:
    return "unknown"


def expert(task: str):
  """(sim, obs) -> action: MetaWorld's scripted policy for `task` acting in a `MetaWorldSim`."""
  policy = expert_policy(task)
  return lambda sim, obs: sim.expert_action(policy)


def expert_policy(task: str):
  """MetaWorld's scripted policy for `task` (an instance with `get_action(obs)`)."""
  import metaworld.policies as policies  # noqa: PLC0415
  want = "sawyer" + re.sub(r"[^a-z0-9]", "", task.lower()) + "v3policy"
  by_key = {re.sub(r"[^a-z0-9]", "", n.lower()): n for n in dir(policies)
            if isinstance(getattr(policies, n), type)}
  # A few policies are named differently from their tasks.
  aliases = {"sawyerpeginsertsidev3policy": "sawyerpeginsertionsidev3policy"}
  name = by_key.get(want) or by_key.get(aliases.get(want, ""))
  if name is None:
    raise ValueError(f"MetaWorld ships no scripted policy for {task!r} (looked for {want}).")
  return getattr(policies, name)()


class MetaWorldSim:
  """One MetaWorld task as a `HostSim`; `render=None` skips pixels (state oracle, experts)."""
  action_dim = 4

  def __init__(self, task: str, render: RenderConfig | None = RenderConfig(),
               max_path_length: int = 500):
    mw = _module()
    check_task(task)
    self.task, self.render_config = task, render
    self.env = mw.ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{task}-v3-goal-observable"]()
    self.env._freeze_rand_vec = False  # noqa: SLF001 - MetaWorld's own switch for random resets.
    self.env.seeded_rand_vec = True
    self.env.max_path_length = max_path_length
    self._raw_obs = None
    self._renderer = None
    if render is not None:
      self._renderer, self._camera, self._flip = make_renderer(self.env.model, render)

  def observation_spec(self):
    return sim_obs.obs_spec(STATE_DIM, PROPRIO_DIM, sim_obs.render_size(self.render_config))

  def reset(self, seed: int):
    self.env.seed(int(seed))
    self._raw_obs, _ = self.env.reset()
    return self._obs()

  def step(self, action):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")  # MetaWorld warns on every out-of-range action.
      self._raw_obs, reward, terminated, _, info = self.env.step(
          np.clip(np.asarray(action, np.float64), -1.0, 1.0))
    return self._obs(), float(reward), bool(terminated), {"success": bool(info["success"])}

  def expert_action(self, policy) -> np.ndarray:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")  # "Constant(s) may be too high": clipped below.
      return np.clip(policy.get_action(self._raw_obs), -1.0, 1.0).astype(np.float32)

  def render(self) -> np.ndarray:
    self._renderer.update_scene(self.env.data, camera=self._camera)
    img = self._renderer.render()
    _release_gl_context()
    return np.ascontiguousarray(img[::-1]) if self._flip else img.copy()

  def _obs(self):
    raw = np.asarray(self._raw_obs, np.float32)
    obs = {"proprio": raw[:PROPRIO_DIM], "state": np.concatenate([raw[:18], raw[36:39]])}
    if self._renderer is not None:
      obs["rgb"] = self.render()
    return obs

  def close(self):
    if self._renderer is not None:
      self._renderer.close()
      self._renderer = None
    self.env.close()


def camera_names(task: str) -> list[str]:
  """The cameras `RenderConfig.camera` may name for `task`: vcbench's free cameras, then the
  model's own."""
  sim = MetaWorldSim(task, None)
  try:
    model = sim.env.model
    return sorted(CAMERAS) + [model.camera(i).name for i in range(model.ncam)]
  finally:
    sim.close()


def make_renderer(model, render: RenderConfig, upright_cameras: tuple[str, ...] = ()):
  """(renderer, camera, flip) for `render.camera`; `upright_cameras` are model cameras that,
  unlike MetaWorld's own, need no flip (cameras vcbench adds to a scene)."""
  import mujoco  # noqa: PLC0415
  names = [model.camera(i).name for i in range(model.ncam)]
  if render.camera not in CAMERAS and render.camera not in names:
    raise ValueError(f"unknown camera {render.camera!r}; valid: {sorted(CAMERAS) + names}")
  if render.fast:
    model.vis.quality.offsamples = 0
  model.vis.global_.offwidth = max(model.vis.global_.offwidth, render.size)
  model.vis.global_.offheight = max(model.vis.global_.offheight, render.size)
  renderer = mujoco.Renderer(model, render.size, render.size)
  if render.fast:  # Scene flags persist across update_scene calls: set them once.
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
                 mujoco.mjtRndFlag.mjRND_SKYBOX):
      renderer.scene.flags[flag] = 0
  _release_gl_context()
  if render.camera not in CAMERAS:
    return renderer, render.camera, render.camera not in upright_cameras
  c = CAMERAS[render.camera]
  camera = mujoco.MjvCamera()
  camera.type = mujoco.mjtCamera.mjCAMERA_FREE
  camera.lookat[:] = c.lookat
  camera.distance, camera.azimuth, camera.elevation = c.distance, c.azimuth, c.elevation
  return renderer, camera, False


def _release_gl_context():
  """Detaches the EGL context from this thread. An EGL context is current in at most one
  thread, and the host bridge renders from JAX's callback thread, not the one that created the
  renderer; `Renderer.render` makes it current again wherever it runs."""
  if os.environ.get("MUJOCO_GL") == "egl":
    from mujoco.egl import EGL_DISPLAY  # noqa: PLC0415
    from OpenGL import EGL  # noqa: PLC0415
    EGL.eglMakeCurrent(EGL_DISPLAY, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)


def make_sim(task: str, render: RenderConfig | None, max_path_length: int = 500):
  """A picklable factory for `host.SimBatch` workers."""
  return functools.partial(MetaWorldSim, task, render, max_path_length)
