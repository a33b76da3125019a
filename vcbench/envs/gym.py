"""vcbench-nav behind Gymnasium: a single `gymnasium.Env` and a batched `VectorEnv`.

    import gymnasium, vcbench.envs.gym   # registers vcbench/{PointNav,ObjectNav,ImageNav}-v0
    envs = gymnasium.make_vec("vcbench/PointNav-v0", num_envs=16, height=32, width=32)
    obs, info = envs.reset(seed=0)
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Keyword arguments (both faces): height, width, sensors (a subset of rgb/depth/semantic; the
task's goal key is always added), split (train/val/test apartments and episodes),
num_scenes, num_episodes, and the rest of `vcbench.envs.nav.make`'s (max_steps, seed, ...).
Observations are a Dict of Boxes, one per key; the action space is Discrete(4) over
`vcbench.envs.nav.ACTIONS` (MultiDiscrete for the vector env).

`NavVectorEnv` steps all its envs with one jitted, vmapped call (the functional `NavEnv` is
passed into it as an argument, so its scene pool is not baked into the program).

Autoreset is Gymnasium's SAME_STEP mode, because that is what vcbench-nav's own `auto_reset`
does: the step that ends an episode also starts the next one and returns its first frame,
with the reward and terminated/truncated flags of the finished episode. `info["final_obs"][i]`
(the last observation of env i's finished episode) and `info["final_info"]` (its metrics:
success, spl, episode_return, ...) carry what ended, masked by `info["_final_obs"]` and
`info["_final_info"]`, as Gymnasium's own vector envs lay them out. The next episode is drawn
from the finished one's key exactly as `NavEnv(auto_reset=True).step` draws it, so both give
the same episodes; the finished frame is rendered first and the new one only on steps where
some env is done.

terminated: the agent called END (the task's success rule decides `final_info["success"]`).
truncated: the episode reached its step limit without END.
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vcbench.envs import nav
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import scene as nav_scene
from vcbench.errors import UserError

TASK_IDS = {"PointNav": "pointnav", "ObjectNav": "objectnav", "ImageNav": "imagenav"}
# Small enough to build in seconds; a training run asks for more with `num_scenes=`.
_DEFAULT_POOL = dict(num_scenes=8, num_episodes=128)


class ActionError(UserError, ValueError):
  """An action (or batch of actions) that is not in the env's action space."""


def make_nav(task: str = "pointnav", *, split: str = "train", height: int = 64,
             width: int = 64, sensors: Sequence[str] = ("rgb", "depth"),
             num_scenes: int = _DEFAULT_POOL["num_scenes"],
             num_episodes: int = _DEFAULT_POOL["num_episodes"], **nav_kwargs
             ) -> nav_env.NavEnv:
  """The functional vcbench-nav env behind both faces, without auto-reset (the faces reset).

  Extra keyword arguments go to `vcbench.envs.nav.make` (max_steps, seed, grid_size, hfov,
  balanced, texture_size)."""
  return nav.make(task, split, height=height, width=width, sensors=tuple(sensors),
                  num_scenes=num_scenes, num_episodes=num_episodes, auto_reset=False,
                  **nav_kwargs)


def _sensor_space(name: str, spec: jax.ShapeDtypeStruct, max_distance: float) -> spaces.Box:
  """The Box of one observation key; bounds are what the renderer can produce."""
  shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
  if name in ("rgb", "goal_rgb"):
    return spaces.Box(0, 255, shape, np.uint8)
  if name == "depth":   # metres / max_depth, the renderer clips at max_depth
    return spaces.Box(0.0, 1.0, shape, np.float32)
  if name == "semantic":
    return spaces.Box(0, nav_scene.NUM_SEMANTIC - 1, shape, np.int32)
  if name == "objectgoal":
    return spaces.Box(0, len(nav_scene.CATEGORIES) - 2, shape, np.int32)
  if name == "gps_compass":   # (distance, cos, sin) of the goal bearing
    return spaces.Box(np.array([0.0, -1.0, -1.0], np.float32),
                      np.array([max_distance, 1.0, 1.0], np.float32), shape, np.float32)
  if name == "odometry":      # (x, y) from the start, cos and sin of the turn since
    return spaces.Box(np.array([-max_distance, -max_distance, -1.0, -1.0], np.float32),
                      np.array([max_distance, max_distance, 1.0, 1.0], np.float32), shape,
                      np.float32)
  return spaces.Box(-np.inf, np.inf, shape, dtype)


def observation_space(env: nav_env.NavEnv) -> spaces.Dict:
  # No two points of a square apartment are further apart than its diagonal.
  diagonal = float(env.scenes.wall.shape[-1] * nav_scene.CELL * np.sqrt(2.0))
  return spaces.Dict({k: _sensor_space(k, s, diagonal)
                      for k, s in env.observation_spec().items()})


def _to_numpy(obs: dict[str, jax.Array]) -> dict[str, np.ndarray]:
  # Copies: a view of a JAX buffer is read-only, and callers may write into what they get.
  return {k: np.array(v) for k, v in obs.items()}


def _seed_key(seed: int) -> jax.Array:
  return jax.random.key(int(seed) % 2**32)


@jax.jit
def _reset_one(env, key):
  return env.reset(key)


@jax.jit
def _reset_one_to(env, index, key):
  return env.reset_to(index, key)


@jax.jit
def _step_one(env, state, action):
  return env.step(state, action)


class NavGymEnv(gymnasium.Env):
  """One vcbench-nav env as a `gymnasium.Env`; call `reset` after an episode ends.

  `reset(options={"episode": i})` starts episode `i` of the episode set (evaluation walks the
  set in order); otherwise an episode is drawn with the reset's key."""

  metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

  def __init__(self, task: str = "pointnav", render_mode: str | None = None, **kwargs):
    self.nav = make_nav(task, **kwargs)
    self.observation_space = observation_space(self.nav)
    self.action_space = spaces.Discrete(self.nav.num_actions)
    if render_mode not in (None, "rgb_array"):
      raise ValueError(f"NavGymEnv: render_mode must be None or 'rgb_array', got {render_mode!r}.")
    if render_mode == "rgb_array" and "rgb" not in self.nav.sensors:
      raise ValueError("NavGymEnv: render_mode='rgb_array' needs 'rgb' among the sensors.")
    self.render_mode = render_mode
    self._state = None

  def reset(self, *, seed: int | None = None, options: dict | None = None):
    super().reset(seed=seed)
    key = _seed_key(self.np_random.integers(2**32))
    if options and "episode" in options:
      episode, count = options["episode"], len(self.nav.episodes)
      if not isinstance(episode, (int, np.integer)) or not 0 <= episode < count:
        raise ValueError(f"NavGymEnv.reset: options['episode'] must be an episode index in "
                         f"[0, {count}), got {episode!r}.")
      self._state = _reset_one_to(self.nav, jnp.int32(episode), key)
    else:
      self._state = _reset_one(self.nav, key)
    return _to_numpy(self._state.obs), {}

  def step(self, action):
    if self._state is None:
      raise gymnasium.error.ResetNeeded("NavGymEnv: call reset() before step().")
    if not self.action_space.contains(action):
      raise ActionError(f"action {action!r} is not in the action space {self.action_space} "
                        f"(actions: {dict(enumerate(nav_env.ACTIONS))}).")
    action = int(action)
    self._state = _step_one(self.nav, self._state, jnp.int32(action))
    done = bool(self._state.done)
    terminated = done and action == nav_env.END
    info = {k: float(v) for k, v in self._state.metrics.items()}
    return (_to_numpy(self._state.obs), float(self._state.reward), terminated,
            done and not terminated, info)

  def render(self):
    if self.render_mode == "rgb_array" and self._state is not None:
      return np.asarray(self._state.obs["rgb"])
    return None


def _select(done, new, old):
  """Per env: `new` where done, else `old` (leaves carry a leading batch axis)."""
  def pick(a, b):
    return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)
  return jax.tree.map(pick, new, old)


@jax.jit
def _reset_batch(env, keys):
  return jax.vmap(env.reset)(keys)


@jax.jit
def _step_batch(env, state, actions):
  """One step of every env, SAME_STEP autoreset: (next state, finished state)."""
  ended = jax.vmap(env.step)(state, actions)
  def restart(ended):
    fresh = jax.vmap(env.reset)(ended.sim.key)   # as NavEnv's own auto-reset draws it
    return _select(ended.done, fresh, ended)
  # A real branch (outside vmap): the reset frames are rendered only when some env is done.
  nxt = jax.lax.cond(jnp.any(ended.done), restart, lambda s: s, ended)
  return nxt, ended


class NavVectorEnv(VectorEnv):
  """`num_envs` vcbench-nav envs stepped by one jitted call; autoreset SAME_STEP (above)."""

  metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

  def __init__(self, num_envs: int, task: str = "pointnav", **kwargs):
    if int(num_envs) < 1:
      raise ValueError(f"NavVectorEnv: num_envs must be >= 1, got {num_envs}.")
    self.num_envs = int(num_envs)
    self.nav = make_nav(task, **kwargs)
    self.single_observation_space = observation_space(self.nav)
    self.single_action_space = spaces.Discrete(self.nav.num_actions)
    self.observation_space = batch_space(self.single_observation_space, self.num_envs)
    self.action_space = batch_space(self.single_action_space, self.num_envs)
    self.render_mode = None
    self._state = None

  def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None):
    """seed: an int (env i gets seed + i, Gymnasium's rule), one seed per env, or None (seeds
    drawn from the generator of the last seeded reset). Every env restarts; there are no
    options (a per-env reset mask is for the DISABLED autoreset mode)."""
    if options:
      raise ValueError(f"NavVectorEnv.reset takes no options, got {sorted(options)}.")
    if seed is None:
      base = int(self.np_random.integers(2**31))
      seeds = [base + i for i in range(self.num_envs)]
    elif isinstance(seed, (int, np.integer)):
      seeds = [int(seed) + i for i in range(self.num_envs)]
    else:
      seeds = [int(s) for s in seed]
      if len(seeds) != self.num_envs:
        raise ValueError(f"NavVectorEnv.reset: {len(seeds)} seeds for {self.num_envs} envs.")
    if seed is not None:
      self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(seeds[0])
    keys = jnp.stack([_seed_key(s) for s in seeds])
    self._state = _reset_batch(self.nav, keys)
    return _to_numpy(self._state.obs), {}

  @property
  def state(self):
    """The functional, batched `EnvState` of the envs (None before the first reset)."""
    return self._state

  def check_actions(self, actions) -> np.ndarray:
    """The batch as int32 [num_envs], or an ActionError naming the action space."""
    arr = np.asarray(actions)
    if arr.shape != (self.num_envs,) or not np.issubdtype(arr.dtype, np.integer):
      raise ActionError(f"actions must be integers of shape ({self.num_envs},) for the action "
                        f"space {self.action_space}; got {arr.dtype} {arr.shape}.")
    if not self.action_space.contains(arr.astype(self.action_space.dtype)):
      raise ActionError(f"actions {arr.tolist()} are not in the action space "
                        f"{self.action_space} (each in {self.single_action_space}).")
    return arr.astype(np.int32)

  def step(self, actions):
    if self._state is None:
      raise gymnasium.error.ResetNeeded("NavVectorEnv: call reset() before step().")
    actions = self.check_actions(actions)
    self._state, ended = _step_batch(self.nav, self._state, jnp.asarray(actions))
    done = np.asarray(ended.done)
    terminated = done & (actions == nav_env.END)
    infos: dict[str, Any] = {}
    if done.any():
      infos = _final_infos(ended, done)
    return (_to_numpy(self._state.obs), np.asarray(ended.reward), terminated,
            done & ~terminated, infos)


def _final_infos(ended, done: np.ndarray) -> dict[str, Any]:
  """Gymnasium's SAME_STEP info, laid out as `SyncVectorEnv` lays it out: `final_obs` an
  object array of per-env observations (None where no episode ended), `final_info` a dict of
  per-env arrays, each with its `_key` mask."""
  obs = _to_numpy(ended.obs)
  final_obs = np.full(len(done), None, dtype=object)
  for i in np.flatnonzero(done):
    final_obs[i] = {k: v[i] for k, v in obs.items()}
  final_info = {k: np.asarray(v) for k, v in ended.metrics.items()}
  final_info.update({f"_{k}": done.copy() for k in ended.metrics})
  return {"final_obs": final_obs, "_final_obs": done.copy(),
          "final_info": final_info, "_final_info": done.copy()}


def register() -> None:
  """Registers vcbench/<Task>-v0 for `gymnasium.make` and `gymnasium.make_vec` (idempotent)."""
  for name, task in TASK_IDS.items():
    env_id = f"vcbench/{name}-v0"
    if env_id in gymnasium.registry:
      continue
    gymnasium.register(id=env_id, entry_point=f"{__name__}:NavGymEnv",
                       vector_entry_point=f"{__name__}:NavVectorEnv", kwargs={"task": task})


register()
__all__ = ["NavGymEnv", "NavVectorEnv", "ActionError", "make_nav", "observation_space",
           "register"]
