"""The vcbench-nav environment: a LoCoBot in a procedural apartment, pure JAX.

    env = nav.make("pointnav", split="train", num_scenes=200, num_episodes=4000)
    state = jax.vmap(env.reset)(jax.random.split(key, 64))
    state = jax.vmap(env.step)(state, actions)          # jittable end to end

`NavEnv` is a flax struct dataclass: its scene pool, episode set and texture atlas are pytree
fields, so the env is passed *into* jitted functions as an argument (a big pool is not baked
into the compiled program as a constant) and is sharded or replicated like any other pytree.
Its settings (task, camera, sensors, step limit) are static fields.

One env (no batch axis) per call; `vmap` batches. The agent (LoCoBot: disc of radius 0.18 m)
moves 0.25 m or turns 30 degrees per action; a move whose end pose would overlap a wall or an
object (or leave the navigable grid's reach, see `_act`) does not happen and counts as a
failed action. A dynamics corruption (`vcbench.robustness.dynamics`) changes what an action
does; a visual hook changes the RGB the agent sees (both None: the clean env). END finishes the episode; success is the
task's rule (`tasks.py`). With `auto_reset` a finished episode is replaced by a new one drawn
from the episode set inside the same `step` (its first frame is the returned obs; reward, done
and the episode's metrics are those of the finished one), so a training rollout renders once
per step. Without it (evaluation) a done env stays put.

Observations: the chosen sensors ('rgb' uint8 [H, W, 3]; 'depth' float32 [H, W, 1] in [0, 1],
metres / camera.max_depth as habitat's normalize_depth; 'semantic' int32 [H, W]) plus the
goal: 'gps_compass' (PointNav, `gps_compass`), 'objectgoal' (ObjectNav, category - 1) or
'goal_rgb' (ImageNav, the view from the goal pose).
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from vcbench.envs.core import EnvState
from vcbench.envs.nav import episodes as ep
from vcbench.envs.nav import geodesic
from vcbench.envs.nav import render as rd
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import tasks as tk

MOVE_AHEAD, ROTATE_LEFT, ROTATE_RIGHT, END = range(4)
ACTIONS = ("MOVE_AHEAD", "ROTATE_LEFT", "ROTATE_RIGHT", "END")
FORWARD_STEP = 0.25                 # metres
TURN_ANGLE = math.radians(30.0)
NUM_CATEGORIES = len(sc.CATEGORIES) - 1   # ObjectNav's goal categories (CATEGORIES[0] is none)

METRICS = ("success", "spl", "episode_return", "episode_length", "failed_actions",
           "min_distance", "final_distance", "stop_failure", "difficulty")


@struct.dataclass
class Motion:
  """What one action does, in the agent's frame (a dynamics corruption changes it)."""
  forward: jax.Array     # metres along the heading
  lateral: jax.Array     # metres to the right of the heading
  turn: jax.Array        # radians, positive = clockwise (ROTATE_RIGHT)


def ideal_motion(action) -> Motion:
  """The uncorrupted action: MOVE 0.25 m, ROTATE -/+30 degrees, END nothing."""
  action = jnp.asarray(action, jnp.int32)
  forward = jnp.where(action == MOVE_AHEAD, FORWARD_STEP, 0.0).astype(jnp.float32)
  turn = jnp.where(action == ROTATE_LEFT, -TURN_ANGLE,
                   jnp.where(action == ROTATE_RIGHT, TURN_ANGLE, 0.0)).astype(jnp.float32)
  return Motion(forward=forward, lateral=jnp.zeros((), jnp.float32), turn=turn)


@struct.dataclass
class NavSim:
  """The simulator part of an EnvState (per env)."""
  episode: jax.Array          # int32 index into the episode set
  pos: jax.Array              # float32 [2] metres
  heading: jax.Array          # float32 radians
  steps: jax.Array            # int32 actions taken this episode
  path_length: jax.Array      # float32 metres travelled
  distance: jax.Array         # float32 geodesic distance to the goal now
  min_distance: jax.Array
  failed_actions: jax.Array   # int32 collisions
  ep_return: jax.Array
  goal_visible: jax.Array     # bool: goal category in the current view (ObjectNav)
  # bool [NUM_CATEGORIES]: which object categories the current view shows (ObjectNav; all
  # False otherwise): labels for a policy's recognition head (`nav_bc` aux_coef).
  categories_visible: jax.Array
  key: jax.Array              # for drawing the next episode (auto_reset)


@struct.dataclass
class NavEnv:
  scenes: sc.Scene
  episodes: ep.Episodes
  atlas: jax.Array
  goal_images: jax.Array      # uint8 [N, H, W, 3] ImageNav goal views; [N, 0, 0, 3] otherwise
  task: str = struct.field(pytree_node=False, default="pointnav")
  camera: rd.Camera = struct.field(pytree_node=False, default=rd.Camera())
  sensors: tuple = struct.field(pytree_node=False, default=("rgb", "depth"))
  max_steps: int = struct.field(pytree_node=False, default=300)
  auto_reset: bool = struct.field(pytree_node=False, default=True)
  # Robustness hooks (static and hashable, so they are part of the compiled program):
  # dynamics.motion(episode, step, action) -> Motion replaces the ideal
  # action; visual(scene, episode, step, rgb) -> rgb transforms the RGB the agent sees
  # (a corruption, or an augmentation during training). See vcbench/robustness/.
  dynamics: Any = struct.field(pytree_node=False, default=None)
  visual: Any = struct.field(pytree_node=False, default=None)
  odometry: bool = struct.field(pytree_node=False, default=False)   # observe `odometry(...)`

  # -- the Env contract --------------------------------------------------------------------

  @property
  def num_actions(self) -> int:
    return len(ACTIONS)

  def observation_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    key = jax.random.key(0)
    return jax.eval_shape(lambda: self.reset(key).obs)

  def reset(self, key: jax.Array) -> EnvState:
    """A new episode drawn uniformly from the episode set."""
    key, sub = jax.random.split(key)
    index = jax.random.randint(sub, (), 0, len(self.episodes))
    return self.reset_to(index, key)

  def reset_to(self, index, key=None) -> EnvState:
    """Starts episode `index` of the episode set (evaluation walks the set in order)."""
    key = jax.random.key(0) if key is None else key
    sim = self._start(jnp.asarray(index, jnp.int32), key)
    obs, sim = self._observe(sim)
    zero = jnp.zeros((), jnp.float32)
    return EnvState(obs=obs, reward=zero, done=jnp.zeros((), bool),
                    metrics=self._metrics(sim, jnp.zeros((), bool), zero),
                    handle=jnp.zeros((), jnp.int32), sim=sim)

  def step(self, state: EnvState, action: jax.Array) -> EnvState:
    sim = state.sim
    was_done = jnp.zeros((), bool) if self.auto_reset else state.done
    action = jnp.asarray(action, jnp.int32)
    moved = self._act(sim, action)
    end = action == END
    success = end & self.in_range(moved)
    distance = moved.distance
    reward = (sim.distance - distance) + tk.SUCCESS_REWARD * success + tk.SLACK_REWARD
    moved = moved.replace(ep_return=sim.ep_return + reward)
    done = end | (moved.steps >= self.max_steps)
    metrics = self._metrics(moved, success, distance, stopped=end)
    if self.auto_reset:
      key, sub = jax.random.split(moved.key)
      fresh = self._start(jax.random.randint(sub, (), 0, len(self.episodes)), key)
      moved = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, moved)
    else:  # a finished evaluation episode stays as it ended
      moved = jax.tree.map(lambda a, b: jnp.where(was_done, a, b), sim, moved)
      reward, done = jnp.where(was_done, 0.0, reward), done | was_done
      metrics = jax.tree.map(lambda a, b: jnp.where(was_done, a, b), state.metrics, metrics)
    obs, moved = self._observe(moved)
    return EnvState(obs=obs, reward=reward.astype(jnp.float32), done=done, metrics=metrics,
                    handle=state.handle, sim=moved)

  # -- pieces -------------------------------------------------------------------------------

  def scene(self, index) -> sc.Scene:
    return jax.tree.map(lambda a: a[index], self.scenes)

  def episode(self, sim: NavSim) -> ep.Episodes:
    """The current episode of `sim` (its row of the episode set)."""
    return jax.tree.map(lambda a: a[sim.episode], self.episodes)

  def _start(self, index, key) -> NavSim:
    e = jax.tree.map(lambda a: a[index], self.episodes)
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return NavSim(episode=index, pos=f32(e.start), heading=f32(e.start_heading),
                  steps=jnp.zeros((), jnp.int32), path_length=f32(0.0), distance=e.distance,
                  min_distance=e.distance, failed_actions=jnp.zeros((), jnp.int32),
                  ep_return=f32(0.0), goal_visible=jnp.zeros((), bool),
                  categories_visible=jnp.zeros((NUM_CATEGORIES,), bool), key=key)

  def _act(self, sim: NavSim, action) -> NavSim:
    """Applies one action: turns always succeed; a blocked move leaves the pose unchanged."""
    scene = self.scene(self.episodes.scene[sim.episode])
    m = (ideal_motion(action) if self.dynamics is None
         else self.dynamics.motion(sim.episode, sim.steps, action))
    heading = jnp.mod(sim.heading + m.turn + jnp.pi, 2 * jnp.pi) - jnp.pi
    cos, sin = jnp.cos(sim.heading), jnp.sin(sim.heading)
    # Lateral is to the right of the heading, i.e. towards heading + 90 degrees.
    step = m.forward * jnp.stack([cos, sin]) + m.lateral * jnp.stack([-sin, cos])
    target = sim.pos + step
    moving = (m.forward != 0.0) | (m.lateral != 0.0)
    e = self.episode(sim)
    target_distance = geodesic.distance_at(e.field, scene.navigable, target)
    # A pose must also lie within reach of the navigable grid: pockets the grid does not
    # cover (a gap between a wall and a sofa) would have no geodesic distance.
    blocked = moving & (collides(scene, target) | (target_distance >= geodesic.UNREACHABLE))
    pos = jnp.where(moving & ~blocked, target, sim.pos)
    distance = jnp.where(moving & ~blocked, target_distance, sim.distance)
    return sim.replace(pos=pos, heading=heading, steps=sim.steps + 1,
                       path_length=sim.path_length + jnp.linalg.norm(pos - sim.pos),
                       distance=distance, min_distance=jnp.minimum(sim.min_distance, distance),
                       failed_actions=sim.failed_actions
                       + (blocked & (action == MOVE_AHEAD)).astype(jnp.int32))

  def near_goal(self, sim: NavSim) -> jax.Array:
    """The distance part of the task's success rule at the current pose."""
    t = tk.get(self.task)
    if not t.needs_visible:
      return sim.distance <= t.success_distance
    e = self.episode(sim)
    scene = self.scene(e.scene)
    return ep.point_category_distance(scene, e.category, sim.pos) <= t.success_distance

  def in_range(self, sim: NavSim) -> jax.Array:
    """The task's success rule at the current pose (before END is counted)."""
    if tk.get(self.task).needs_visible:
      return self.near_goal(sim) & sim.goal_visible
    return self.near_goal(sim)

  def coarse_depth(self, sim: NavSim, cells: int) -> jax.Array:
    """float32 [cells * cells]: the clean depth of the current view ([0, 1] as the 'depth'
    observation) averaged over a cells x cells grid of blocks, row-major; rendered whatever
    the sensors (the label of an RGB policy's depth head, `NavPolicy.aux_depth`)."""
    e = self.episode(sim)
    depth = rd.render(self.scene(e.scene), self.atlas, sim.pos, sim.heading, self.camera,
                      ("depth",))["depth"][..., 0] / self.camera.max_depth
    h, w = depth.shape
    if h % cells or w % cells:
      raise ValueError(f"coarse_depth: a {h}x{w} frame does not split into {cells}x{cells} "
                       "blocks")
    return depth.reshape(cells, h // cells, cells, w // cells).mean((1, 3)).reshape(-1)

  def _metrics(self, sim: NavSim, success, distance, stopped=None) -> dict[str, jax.Array]:
    e = self.episode(sim)
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    spl = success * e.distance / jnp.maximum(jnp.maximum(e.distance, sim.path_length), 1e-6)
    stopped = jnp.zeros((), bool) if stopped is None else stopped
    return dict(success=f32(success), spl=f32(spl), episode_return=f32(sim.ep_return),
                episode_length=f32(sim.steps), failed_actions=f32(sim.failed_actions),
                min_distance=f32(sim.min_distance), final_distance=f32(distance),
                stop_failure=f32(stopped & ~success), difficulty=f32(e.difficulty))

  def _observe(self, sim: NavSim) -> tuple[dict[str, jax.Array], NavSim]:
    e = self.episode(sim)
    scene = self.scene(e.scene)
    want = tuple(s for s in rd.SENSORS if s in self.sensors or
                 (s == "semantic" and self.task == "objectnav"))
    frame = rd.render(scene, self.atlas, sim.pos, sim.heading, self.camera, want)
    obs = {k: frame[k] for k in self.sensors}
    if self.visual is not None and "rgb" in obs:
      obs["rgb"] = self.visual(e.scene, sim.episode, sim.steps, obs["rgb"])
    if "depth" in obs:  # habitat's normalize_depth: [0, 1] = metres / max_depth
      obs["depth"] = obs["depth"] / self.camera.max_depth
    if self.task == "pointnav":
      obs["gps_compass"] = gps_compass(sim.pos, sim.heading, e.goal)
    elif self.task == "objectnav":
      obs["objectgoal"] = e.category - 1
      seen = categories_in_view(frame["semantic"])
      sim = sim.replace(goal_visible=seen[e.category - 1], categories_visible=seen)
    else:
      obs["goal_rgb"] = self.goal_images[sim.episode]
    if self.odometry:
      obs["odometry"] = odometry(sim.pos, sim.heading, e.start, e.start_heading)
    return obs, sim


def categories_in_view(semantic) -> jax.Array:
  """bool [NUM_CATEGORIES]: whether each object category (CATEGORIES[1:]) has a pixel in a
  semantic frame [H, W]."""
  labels = sc.SEM_OBJECT0 + jnp.arange(NUM_CATEGORIES)
  return jnp.any(semantic[..., None] == labels, axis=(0, 1))


def gps_compass(pos, heading, goal) -> jax.Array:
  """The goal in the agent's frame, habitat's pointgoal_with_gps_compass as
  (distance, cos, sin) of the bearing, so the policy never sees the angle wrap around."""
  delta = goal - pos
  rho = jnp.linalg.norm(delta)
  phi = jnp.arctan2(delta[1], delta[0]) - heading
  return jnp.stack([rho, jnp.cos(phi), jnp.sin(phi)]).astype(jnp.float32)


def odometry(pos, heading, start, start_heading) -> jax.Array:
  """habitat's GPS + compass for ObjectNav / ImageNav: the position relative to the episode's
  start in the start's frame (metres: x ahead, y to the right, as the heading turns) and the
  heading's change as (cos, sin)."""
  delta = pos - start
  cos, sin = jnp.cos(start_heading), jnp.sin(start_heading)
  turn = heading - start_heading
  return jnp.stack([cos * delta[0] + sin * delta[1], -sin * delta[0] + cos * delta[1],
                    jnp.cos(turn), jnp.sin(turn)]).astype(jnp.float32)


def collides(scene: sc.Scene, xy) -> jax.Array:
  """Whether the agent's disc at `xy` overlaps a wall or object cell (the 3x3 block around it
  is all it can reach, since the radius is below one cell)."""
  rc = geodesic.point_cell(xy)
  offsets = jnp.array([(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
  g = scene.grid_size
  cells = rc + offsets
  inside = jnp.all((cells >= 0) & (cells < g), axis=-1)
  cells = jnp.clip(cells, 0, g - 1)
  solid = (scene.wall[cells[:, 0], cells[:, 1]] > 0) | (scene.obj_inst[cells[:, 0], cells[:, 1]] >= 0)
  lo = cells[:, ::-1].astype(jnp.float32) * sc.CELL
  nearest = jnp.clip(xy, lo, lo + sc.CELL)
  touch = jnp.sum((nearest - xy) ** 2, axis=-1) < sc.AGENT_RADIUS ** 2
  return jnp.any((solid | ~inside) & touch)
