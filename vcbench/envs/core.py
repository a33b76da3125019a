"""The functional Env contract (docs/design.md), brax/gymnax style.

`state = env.reset(...)`, `state = env.step(state, action)`; the state is a pytree, so a
rollout is a `lax.scan` over `step`. Batched envs carry a leading batch axis on every leaf.
"""
from __future__ import annotations

from typing import Any, Protocol

import dataclasses

import jax
from flax import struct


@dataclasses.dataclass(frozen=True)
class RenderConfig:
  """How a host simulator renders its frames; part of every demo and embedding cache key.

  size: square frame side in pixels. camera: a camera of the simulator, by name. fast: the CPU
  render profile (MuJoCo: no MSAA, shadows, reflections or skybox)."""
  size: int = 256
  camera: str = "top_cap2"
  fast: bool = True

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


@struct.dataclass
class EnvState:
  """One (batched) environment state.

  obs: dict of arrays: `rgb` uint8 [..., H, W, 3], `proprio`, `state`, `goal`, ...
  reward: float32 [...], the reward of the last transition (0 after reset).
  done: bool [...], the episode is over (success when the task stops on it, a terminal
    state, or the horizon); a done env is not stepped again and keeps its last obs.
  metrics: dict of arrays, e.g. `success` (ever succeeded this episode), `steps`.
  handle: int32 [...], the host-side slot of each env (`host.py`); zeros for JAX-native envs.
  sim: the simulator's own state for JAX-native envs (a pytree, e.g. the nav agent's pose and
    scene); None for host envs, whose state lives on the host.
  """
  obs: dict[str, jax.Array]
  reward: jax.Array
  done: jax.Array
  metrics: dict[str, jax.Array]
  handle: jax.Array
  sim: Any = None


class Env(Protocol):
  """What a rollout needs from a batched (host-simulator) environment (`host.py`)."""

  @property
  def num_envs(self) -> int: ...

  @property
  def action_dim(self) -> int: ...

  def observation_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    """Per-env observation shapes and dtypes (no batch axis)."""

  def reset(self, seeds: jax.Array) -> EnvState:
    """Starts one episode per env from integer episode seeds [num_envs]."""

  def step(self, state: EnvState, action: jax.Array) -> EnvState: ...



class JaxEnv(Protocol):
  """A JAX-native env (vcbench-nav): one env per call, batched with `vmap`.

  It is a pytree (a flax struct dataclass) whose data are leaves and whose settings are static,
  so it is passed *into* jitted functions rather than closed over. Randomness lives in
  `state.sim`, so `step` needs no key; with auto-reset, `step` starts the next episode itself
  (see `vcbench.envs.nav.env`).
  """

  @property
  def num_actions(self) -> int: ...

  def observation_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    """Per-env observation shapes and dtypes (no batch axis)."""

  def reset(self, key: jax.Array) -> EnvState: ...

  def step(self, state: EnvState, action: jax.Array) -> EnvState: ...
