"""Any Gymnasium env with pixel rendering as a `host.HostSim` (and so as a CortexBench suite).

    make_sim = functools.partial(GymnasiumSim, "InvertedPendulum-v5", image_size=64)
    batch = host.SimBatch(make_sim, num_envs=8, horizon=100)

The env is made with `render_mode="rgb_array"`; its frame, resized to `image_size` squared,
is the `rgb` observation (none with `image_size=0`: state-only runs render nothing) and its
flattened observation is both `proprio` and `state` (the state oracle's input). Only Box
action spaces plug in: the BC track regresses continuous actions. Actions are clipped to the
space's bounds, as a real actuator would saturate. Gymnasium's terminated and truncated both
end the host episode (the env must be reset either way); `info["success"]` (or
`"is_success"`) is the success flag when the env has one.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import gymnasium
import numpy as np
from gymnasium import spaces

from vcbench.envs.host import Spec
from vcbench.envs.sim_obs import square_frame, state_spec


def success_flag(info: dict) -> bool:
  return bool(info.get("success", info.get("is_success", False)))


class GymnasiumSim:
  """One Gymnasium env behind the HostSim interface.

  Args:
    env: a registered env id, or a callable `(render_mode=...) -> gymnasium.Env`.
    image_size: side of the square `rgb` observation; 0 for none.
    make_kwargs: passed to `gymnasium.make` (e.g. a MuJoCo env's `width`/`height`, so it
      renders at the size it is asked for instead of being resized).
  """

  def __init__(self, env: str | Callable[..., gymnasium.Env], image_size: int = 64,
               make_kwargs: dict[str, Any] | None = None):
    make = functools.partial(gymnasium.make, env) if isinstance(env, str) else env
    self.image_size = int(image_size)
    self.env = make(render_mode="rgb_array" if self.image_size else None, **(make_kwargs or {}))
    space = self.env.action_space
    if not isinstance(space, spaces.Box):
      self.env.close()
      raise ValueError(f"GymnasiumSim: the action space {space} is not a Box; the host bridge "
                       "and the BC track take continuous actions.")
    self.action_dim = int(np.prod(space.shape))
    self._state_dim = int(spaces.flatdim(self.env.observation_space))

  def observation_spec(self) -> Spec:
    return state_spec(self._state_dim, self.image_size)

  def reset(self, seed: int) -> dict[str, np.ndarray]:
    obs, _ = self.env.reset(seed=int(seed))
    return self._obs(obs)

  def step(self, action: np.ndarray):
    space = self.env.action_space
    action = np.clip(np.asarray(action, space.dtype).reshape(space.shape), space.low, space.high)
    obs, reward, terminated, truncated, info = self.env.step(action)
    return self._obs(obs), float(reward), bool(terminated or truncated), \
        {"success": success_flag(info)}

  def _obs(self, obs) -> dict[str, np.ndarray]:
    flat = spaces.flatten(self.env.observation_space, obs).astype(np.float32)
    out = {"proprio": flat, "state": flat.copy()}
    if self.image_size:
      out["rgb"] = square_frame(self.env.render(), self.image_size)
    return out

  def close(self) -> None:
    self.env.close()


def make_sim(env_id: str, render=None, **make_kwargs) -> Callable[[], GymnasiumSim]:
  """A picklable factory of `env_id` as a HostSim rendering at `render.size` pixels (no
  frames without a render config): what a CortexBench suite's `make_sim` returns."""
  size = render.size if render is not None else 0
  return functools.partial(GymnasiumSim, env_id, image_size=size, make_kwargs=make_kwargs)
