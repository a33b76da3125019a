"""CortexBench's DeepMind Control tasks as JAX-native envs on MJX (mujoco-mjx 3.3.0): the same
batched functional Env contract as the C MuJoCo adapter behind the host bridge (`dmc.py` through
`host.HostEnv`), so SAC (`algos/sac.py`) trains jitted and vmapped end to end on an accelerator.

Protocol, as `dmc.py` (dm_control 1.0.28, Tassa et al. 2018, "DeepMind Control Suite"):
- Model: the MJCF dm_control loads (`dm_control.suite.<domain>.get_model_and_assets()`),
  unchanged except finger's hinge damping, which dm_control's `Spin.initialize_episode` sets to
  0.03 on every episode and which is set once here. Solver, iterations, cone and contact settings
  are the XML's own (MJX supports all four models as they are).
- Time: dm_control's control timestep in physics substeps (walker 10 x 2.5 ms, cheetah 1 x 10 ms,
  finger 2 x 10 ms, reacher 1 x 20 ms), then the action repeat on top (default 2): one `step`
  is `action_repeat` control steps with their rewards summed, an episode 1000 control steps.
- Physics step: dm_control's "legacy" step (mj_step2 then mj_step1) rebuilt from MJX's stages,
  so that after every substep the kinematics and position/velocity sensors describe the new
  state (what dm_control's observations and rewards read) and the touch sensors (finger) are
  computed after the constraint solve of the last substep, as in C MuJoCo. (`mjx.step` alone
  would leave the kinematics one substep behind, and its `sensor_acc` runs before the solve.)
  This uses MJX's stage functions (`mujoco.mjx._src.forward`), pinned by mujoco-mjx==3.3.0.
- Observations (`state`): dm_control's observation dict flattened in its key order, float32
  (walker: orientations, height, velocity; cheetah: position, velocity; finger-spin: position,
  velocity, touch; reacher: position, to_target, velocity). Rewards: each task's `get_reward`
  with `dm_control.utils.rewards.tolerance`, reimplemented in JAX.
- Initial states: each task's `initialize_episode` in JAX from the episode seed (limited joints
  uniform in range, unlimited hinges uniform in [-pi, pi]; cheetah then settles for 200 physics
  steps; finger rejects states in contact, up to 1000 draws, as dm_control; reacher draws the
  target's angle and radius). They follow dm_control's distributions, not its numbers: the
  random streams differ (jax.random vs numpy RandomState), so seed s here is not seed s there.
  `reset_to(qpos, qvel, target)` starts from a given physics state (the parity tests use it).
- Precision: MJX runs in float32 (C MuJoCo in float64). From the same state under the same
  random actions (tests/envs/test_dmc_mjx.py) observations agree to ~1e-6 for reacher over 50
  decisions and for finger out of contact; with the finger pressing on the spinner, velocities
  and touch readings differ by up to ~1.4e-3 (MJX's contact solve is not C MuJoCo's); a running
  cheetah drifts ~4e-4 relative over 30 decisions, and walker ~6e-5 over 10, growing to ~3e-3 by
  25 as its foot contacts amplify the rounding (chaotic divergence, not a model difference);
  rewards agree to ~1e-5.
- Episodes: no terminal states; `done` after `1000 / action_repeat` steps and a done env is not
  stepped again (it keeps its last observation); `success` is never set and `score` is NaN, as
  the host adapter reports them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vcbench.envs.core import EnvState
from vcbench.envs.mujoco import dmc

TASKS = ("walker-stand", "walker-walk", "cheetah-run", "finger-spin", "reacher-easy",
         "reacher-hard")
SETTLE_STEPS = 200          # cheetah's `initialize_episode`: physics steps before the episode.
MAX_INIT_ATTEMPTS = 1000    # finger's `_set_random_joint_angles`: draws of a contact-free state.


def _mjx():
  try:
    import mujoco  # Optional dependency: imported only when an MJX env is made.
    from mujoco import mjx
    # MJX's stage functions (the legacy step below), pinned by mujoco-mjx==3.3.0.
    from mujoco.mjx._src import forward, sensor, solver
  except ImportError as e:
    raise ImportError("mujoco-mjx is not installed: run `pip install -e .[mujoco]` (installs "
                      "mujoco-mjx==3.3.0).") from e
  return mujoco, mjx, forward, sensor, solver


# dm_control.utils.rewards.tolerance, for the two sigmoids these tasks use.

def _sigmoid(x, value_at_margin: float, kind: str):
  if kind == "gaussian":
    scale = np.sqrt(-2 * np.log(value_at_margin))
    return jnp.exp(-0.5 * (x * scale) ** 2)
  if kind == "linear":
    scaled = x * (1 - value_at_margin)
    return jnp.where(jnp.abs(scaled) < 1, 1 - scaled, 0.0)
  raise ValueError(f"unknown sigmoid {kind!r}; valid: 'gaussian', 'linear'")


def tolerance(x, bounds: tuple[float, float], margin: float = 0.0,
              sigmoid: str = "gaussian", value_at_margin: float = 0.1):
  """1 inside `bounds`, falling off outside as `sigmoid` to `value_at_margin` at `margin`."""
  lower, upper = bounds
  in_bounds = (lower <= x) & (x <= upper)
  if margin == 0:
    return jnp.where(in_bounds, 1.0, 0.0)
  d = jnp.where(x < lower, lower - x, x - upper) / margin
  return jnp.where(in_bounds, 1.0, _sigmoid(d, value_at_margin, sigmoid))


@struct.dataclass
class Sim:
  """One env's simulator state: MJX data and the task's per-episode parameter (reacher's target
  position (x, y); zeros for the other tasks)."""
  data: object
  target: jax.Array


@dataclasses.dataclass(frozen=True)
class _Task:
  domain: str
  name: str
  observe: Callable     # (model, ids, data, target) -> ordered dict of arrays
  reward: Callable      # (model, ids, data, target) -> float32 scalar
  target_size: float = 0.0   # reacher's target radius (easy .05, hard .015)


def _walker_obs(ids, d, target):
  del target
  xmat = d.xmat.reshape(-1, 3, 3)
  return {"orientations": xmat[1:][:, 0, jnp.array([0, 2])].reshape(-1),
          "height": d.xpos[ids["torso"], 2], "velocity": d.qvel}


def _walker_reward(move_speed: float):
  def reward(ids, d, target):
    del target
    height = d.xpos[ids["torso"], 2]
    standing = tolerance(height, (1.2, float("inf")), margin=0.6)
    upright = (1 + d.xmat.reshape(-1, 3, 3)[ids["torso"], 2, 2]) / 2
    stand = (3 * standing + upright) / 4
    if move_speed == 0:
      return stand
    speed = d.sensordata[ids["torso_subtreelinvel"]]
    move = tolerance(speed, (move_speed, float("inf")), margin=move_speed / 2,
                     value_at_margin=0.5, sigmoid="linear")
    return stand * (5 * move + 1) / 6
  return reward


def _cheetah_obs(ids, d, target):
  del ids, target
  return {"position": d.qpos[1:], "velocity": d.qvel}


def _cheetah_reward(ids, d, target):
  del target
  return tolerance(d.sensordata[ids["torso_subtreelinvel"]], (10.0, float("inf")), margin=10.0,
                   value_at_margin=0.0, sigmoid="linear")


def _finger_obs(ids, d, target):
  del target
  s = d.sensordata
  tip = s[ids["tip"] + jnp.array([0, 2])] - s[ids["spinner"] + jnp.array([0, 2])]
  return {"position": jnp.concatenate([s[ids["proximal"]][None], s[ids["distal"]][None], tip]),
          "velocity": s[jnp.array([ids["proximal_velocity"], ids["distal_velocity"],
                                   ids["hinge_velocity"]])],
          "touch": jnp.log1p(s[jnp.array([ids["touchtop"], ids["touchbottom"]])])}


def _finger_reward(ids, d, target):
  del target
  return (d.sensordata[ids["hinge_velocity"]] <= -15.0).astype(jnp.float32)


def _reacher_obs(ids, d, target):
  return {"position": d.qpos, "to_target": target - d.geom_xpos[ids["finger_geom"], :2],
          "velocity": d.qvel}


def _reacher_reward(target_size: float):
  def reward(ids, d, target):
    dist = jnp.linalg.norm(target - d.geom_xpos[ids["finger_geom"], :2])
    return tolerance(dist, (0.0, target_size + ids["finger_size"]))
  return reward


_TASKS = {
    "walker-stand": _Task("walker", "stand", _walker_obs, _walker_reward(0.0)),
    "walker-walk": _Task("walker", "walk", _walker_obs, _walker_reward(1.0)),
    "cheetah-run": _Task("cheetah", "run", _cheetah_obs, _cheetah_reward),
    "finger-spin": _Task("finger", "spin", _finger_obs, _finger_reward),
    "reacher-easy": _Task("reacher", "easy", _reacher_obs, _reacher_reward(0.05), 0.05),
    "reacher-hard": _Task("reacher", "hard", _reacher_obs, _reacher_reward(0.015), 0.015),
}


def _check_task(task: str) -> _Task:
  if task not in _TASKS:
    raise ValueError(f"DMC task {task!r} has no MJX port; valid: {list(TASKS)} (any dm_control "
                     "task runs on C MuJoCo with backend='host').")
  return _TASKS[task]


def load_model(task: str):
  """The C MjModel dm_control builds for `task`, with the per-episode constants set."""
  mujoco = _mjx()[0]
  spec = _check_task(task)
  dmc._suite()  # dm_control's import error, with its install hint.
  module = __import__(f"dm_control.suite.{spec.domain}", fromlist=["get_model_and_assets"])
  model = mujoco.MjModel.from_xml_string(*module.get_model_and_assets())
  if spec.domain == "finger":
    model.dof_damping[model.joint("hinge").dofadr[0]] = 0.03
  return model


def control_substeps(task: str) -> int:
  """Physics substeps per control step: dm_control's control timestep / the model's."""
  spec = _check_task(task)
  env = dmc._suite().load(spec.domain, spec.name)
  try:
    return round(env.control_timestep() / env.physics.model.opt.timestep)
  finally:
    env.close()


def _ids(model, task: str) -> dict:
  """Static indices (bodies, sensor addresses) the task's observation and reward read."""
  mujoco = _mjx()[0]
  ids = {}
  if model.nbody > 1 and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso") >= 0:
    ids["torso"] = model.body("torso").id
  for i in range(model.nsensor):
    ids[model.sensor(i).name] = int(model.sensor_adr[i])
  if task.startswith("reacher"):
    ids["finger_geom"] = model.geom("finger").id
    ids["finger_size"] = float(model.geom("finger").size[0])
  return ids


class MJXEnv:
  """`num_envs` copies of one DMC task on MJX: `reset(seeds)` / `reset_to(...)` /
  `step(state, action)` on batched `EnvState`s, all traceable (jit, scan, vmap)."""

  def __init__(self, task: str, num_envs: int, action_repeat: int = dmc.ACTION_REPEAT):
    if num_envs < 1:
      raise ValueError(f"MJXEnv: num_envs must be >= 1, got {num_envs}.")
    if action_repeat < 1 or dmc.CONTROL_STEPS % action_repeat:
      raise ValueError(f"action_repeat must divide {dmc.CONTROL_STEPS}, got {action_repeat}")
    _, mjx, self._fwd, self._sensor, self._solver = _mjx()
    self.task, self.spec = task, _check_task(task)
    self.action_repeat, self.horizon = action_repeat, dmc.horizon(action_repeat)
    self._num_envs = num_envs
    self.mj_model = load_model(task)
    self.model = mjx.put_model(self.mj_model)
    self._data0 = mjx.make_data(self.model)
    self.substeps = control_substeps(task)
    self._ids = _ids(self.mj_model, task)
    self._ctrl_low, self._ctrl_high = (jnp.asarray(self.mj_model.actuator_ctrlrange[:, i],
                                                   jnp.float32) for i in (0, 1))
    obs = jax.eval_shape(self._observe, self._data0, jnp.zeros(2))
    self._state_dim = int(sum(np.prod(v.shape) for v in obs.values()))

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def action_dim(self) -> int:
    return int(self.mj_model.nu)

  def observation_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    return {"state": jax.ShapeDtypeStruct((self._state_dim,), jnp.float32)}

  # Physics: dm_control's legacy step, from MJX's stages.

  def _position_velocity(self, d):
    """mj_step1: kinematics, contacts and position/velocity sensors at the current state."""
    m, fwd, sensor = self.model, self._fwd, self._sensor
    d = sensor.sensor_pos(m, fwd.fwd_position(m, d))
    return sensor.sensor_vel(m, fwd.fwd_velocity(m, d))

  def _acceleration(self, d):
    """The rest of mj_forward: actuation, the constraint solve, then the force sensors."""
    m, fwd = self.model, self._fwd
    d = fwd.fwd_acceleration(m, fwd.fwd_actuation(m, d))
    if d.efc_J.size == 0:
      d = d.replace(qacc=d.qacc_smooth)
    else:
      d = self._solver.solve(m, d)
    return self._sensor.sensor_acc(m, d)

  def _physics_step(self, d, _=None):
    d = self._fwd.euler(self.model, self._acceleration(d))
    return self._position_velocity(d), None

  def _forward(self, d):
    return self._acceleration(self._position_velocity(d))

  def _control_step(self, d, ctrl, target):
    d = d.replace(ctrl=ctrl)
    d, _ = jax.lax.scan(self._physics_step, d, None, length=self.substeps)
    return d, self.spec.reward(self._ids, d, target).astype(jnp.float32)

  # Observation.

  def _observe(self, d, target):
    return self.spec.observe(self._ids, d, target)

  def _state_obs(self, d, target):
    obs = self._observe(d, target)
    return jnp.concatenate([jnp.asarray(v, jnp.float32).reshape(-1) for v in obs.values()])

  # Episode starts.

  def _start(self, qpos, qvel, target):
    d = self._data0.replace(qpos=jnp.asarray(qpos, jnp.float32),
                            qvel=jnp.asarray(qvel, jnp.float32))
    return Sim(self._forward(d), jnp.asarray(target, jnp.float32))

  def _random_joints(self, key):
    """dm_control's `randomize_limited_and_rotational_joints` for hinge and slide joints."""
    mujoco, m = _mjx()[0], self.mj_model
    types = m.jnt_type
    if np.any((types == mujoco.mjtJoint.mjJNT_BALL) | (types == mujoco.mjtJoint.mjJNT_FREE)):
      raise NotImplementedError(f"{self.task}: ball/free joint randomisation is not ported")
    limited = m.jnt_limited.astype(bool)
    hinge = types == mujoco.mjtJoint.mjJNT_HINGE
    low = np.where(limited, m.jnt_range[:, 0], -np.pi)
    high = np.where(limited, m.jnt_range[:, 1], np.pi)
    draw = jax.random.uniform(key, (m.njnt,), minval=low, maxval=high)
    qpos = jnp.asarray(m.qpos0, jnp.float32)
    randomized = limited | hinge   # Unlimited slides (walker's rootx/rootz) keep qpos0.
    return qpos.at[m.jnt_qposadr].set(jnp.where(randomized, draw, qpos[m.jnt_qposadr]))

  def _reset_one(self, seed):
    key = jax.random.key(seed)
    k_joints, k_target = jax.random.split(key)
    qvel = jnp.zeros(self.mj_model.nv)
    target = jnp.zeros(2)
    domain = self.spec.domain
    if domain == "finger":
      qpos = self._contact_free_joints(k_joints)
    elif domain == "cheetah":
      # Only limited joints are drawn (the root keeps qpos0), then the model settles.
      m = self.mj_model
      draw = self._random_joints(k_joints)
      limited = np.flatnonzero(m.jnt_limited)
      qpos = jnp.asarray(m.qpos0, jnp.float32).at[m.jnt_qposadr[limited]].set(
          draw[m.jnt_qposadr[limited]])
      d = self._start(qpos, qvel, target).data
      d, _ = jax.lax.scan(self._physics_step, d, None, length=SETTLE_STEPS)
      qpos, qvel = d.qpos, d.qvel
    else:
      qpos = self._random_joints(k_joints)
    if domain == "reacher":
      ka, kr = jax.random.split(k_target)
      angle = jax.random.uniform(ka, (), minval=0.0, maxval=2 * np.pi)
      radius = jax.random.uniform(kr, (), minval=0.05, maxval=0.20)
      target = radius * jnp.stack([jnp.sin(angle), jnp.cos(angle)])
    return self._start(qpos, qvel, target)

  def _contact_free_joints(self, key):
    """Redraws the joints until no geoms touch (finger's `_set_random_joint_angles`)."""
    def in_contact(qpos):
      d = self._fwd.fwd_position(self.model, self._data0.replace(qpos=qpos))
      return jnp.any(d.contact.dist < 0)

    def draw(carry):
      key, _, attempt = carry
      key, sub = jax.random.split(key)
      return key, self._random_joints(sub), attempt + 1

    def again(carry):
      _, qpos, attempt = carry
      return (attempt < MAX_INIT_ATTEMPTS) & in_contact(qpos)

    _, qpos, _ = jax.lax.while_loop(again, draw, draw((key, self._random_joints(key), 0)))
    return qpos

  def _episode_state(self, sim: Sim) -> EnvState:
    n = self.num_envs
    obs = {"state": jax.vmap(self._state_obs)(sim.data, sim.target)}
    return EnvState(obs=obs, reward=jnp.zeros(n, jnp.float32),
                    done=jnp.full(n, self.horizon <= 0),
                    metrics={"success": jnp.zeros(n, bool), "steps": jnp.zeros(n, jnp.int32),
                             "score": jnp.full(n, jnp.nan, jnp.float32)},
                    handle=jnp.zeros(n, jnp.int32), sim=sim)

  def reset(self, seeds: jax.Array) -> EnvState:
    seeds = jnp.asarray(seeds, jnp.int32).reshape(-1)
    if seeds.shape != (self.num_envs,):
      raise ValueError(f"MJXEnv.reset: expected {self.num_envs} seeds, got {seeds.shape}.")
    return self._episode_state(jax.vmap(self._reset_one)(seeds))

  def reset_to(self, qpos, qvel, target=None) -> EnvState:
    """Starts every env from a given physics state: qpos [num_envs, nq], qvel [num_envs, nv],
    reacher's target position [num_envs, 2] (x, y; ignored by the other tasks)."""
    n, m = self.num_envs, self.mj_model
    qpos, qvel = jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32)
    if qpos.shape != (n, m.nq) or qvel.shape != (n, m.nv):
      raise ValueError(f"MJXEnv.reset_to: expected qpos {(n, m.nq)} and qvel {(n, m.nv)}, got "
                       f"{qpos.shape} and {qvel.shape}.")
    if target is None:
      if self.spec.domain == "reacher":
        raise ValueError("MJXEnv.reset_to: reacher needs the target position [num_envs, 2].")
      target = jnp.zeros((n, 2))
    return self._episode_state(jax.vmap(self._start)(qpos, qvel, jnp.asarray(target)))

  # Stepping.

  def _step_one(self, sim: Sim, action):
    ctrl = jnp.clip(action, self._ctrl_low, self._ctrl_high)

    def control(d, _):
      return self._control_step(d, ctrl, sim.target)

    d, rewards = jax.lax.scan(control, sim.data, None, length=self.action_repeat)
    return sim.replace(data=d), jnp.sum(rewards), self._state_obs(d, sim.target)

  def step(self, state: EnvState, action: jax.Array) -> EnvState:
    action = jnp.asarray(action, jnp.float32)
    if action.shape != (self.num_envs, self.action_dim):
      raise ValueError(f"MJXEnv.step: expected actions of shape "
                       f"{(self.num_envs, self.action_dim)}, got {action.shape}.")
    sim, reward, obs = jax.vmap(self._step_one)(state.sim, action)
    live = ~state.done

    def keep_done(new, old):   # Done envs are not stepped: they keep their last state.
      mask = live.reshape(live.shape + (1,) * (new.ndim - 1))
      return jnp.where(mask, new, old)

    sim = jax.tree.map(keep_done, sim, state.sim)
    steps = state.metrics["steps"] + live.astype(jnp.int32)
    return state.replace(
        obs={"state": keep_done(obs, state.obs["state"])},
        reward=jnp.where(live, reward, 0.0), done=state.done | (steps >= self.horizon),
        metrics=dict(state.metrics, steps=steps), sim=sim)

  def close(self) -> None:
    """Nothing to release (the host adapter's counterpart closes its simulators)."""


def make_env(task: str, num_envs: int, action_repeat: int = dmc.ACTION_REPEAT) -> MJXEnv:
  """The dmc_expert job's `backend="mjx"` env (`jobs/dmc_expert.py`)."""
  return MJXEnv(task, num_envs, action_repeat)
