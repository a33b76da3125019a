"""TriFinger (trifinger-simulation 2.0.0, pybullet) as a `host.HostSim`: CortexBench's TriFinger
suite, reach-cube and push-cube, with experts written here.

The protocol follows eai-vc's `cortexbench/trifinger_vc` (VC-1, Majumdar et al. 2023), whose
BC rollouts run in its `CubeReachEnv` / `MoveCubeEnv`:
- Simulation: TriFingerPro in pybullet at a 4 ms time step; one policy step is 0.4 s (100
  simulation steps, eai-vc's `downsample_time_step`). Episodes are 2 s (reach: 5 policy steps)
  and 4 s (push: 10 policy steps); the simulator ends them itself (`terminal`).
- Action: 9 fingertip displacements (3 fingers x xyz) over the policy step, clipped to [-1, 1]
  in units of eai-vc's action bound (its policies clip `delta_ftpos` to the demos' `max_a`:
  5 cm for reach, 8 cm for push; `MAX_DELTA`). As in eai-vc
  the displacements accumulate into a fingertip *plan* that the low-level controller tracks by
  linear interpolation over the step. In reach-cube only finger 0 moves (eai-vc's
  `finger_to_move_list = [0]`; its 9-wide demo actions are zero for fingers 1 and 2): the other
  six entries are ignored. eai-vc tracks the plan with a Cartesian impedance controller; here
  the plan goes through inverse kinematics (damped Newton on pinocchio's fingertip Jacobians,
  at 62.5 Hz) to the platform's joint PD position controller (its D gains scaled by 0.2: the
  defaults oscillate at a 4 ms step), with gravity compensation.
- Pixels: one of the platform's three cameras (`camera60`, `camera180`, `camera300`; eai-vc's
  policies see `camera60`) rendered with pybullet's TinyRenderer at `RenderConfig.size`
  (eai-vc: 270). eai-vc conditions push policies on the embedding of a goal image (the demo's
  last frame); vcbench's BC policy sees one image, so push-cube shows the goal as a translucent
  green cube marker in every frame (eai-vc's own RL env draws the same marker) instead.
- `proprio` = the 3 fingertip positions (eai-vc's `ft_state`); `state` = fingertip positions,
  cube position and quaternion, and the goal position (push: the goal; reach: the cube centre,
  its target) - the state oracle's input.
- Episodes from the seed: the cube starts upright-on-a-face with a random yaw and a centre
  uniform in a disc of radius 9 cm (the spread of eai-vc's demo starts); the push goal lies
  on the table in a disc of radius 10 cm, at least 5 cm from the start (closer goals make the
  normalised score below ill-conditioned). The robot starts at eai-vc's nominal joint angles.
  In reach-cube the cube is fixed to the table (eai-vc's `fix_cube_base`).
- Score (per step in `info['score']`; the episode's score is its last step's, as eai-vc reads
  `scaled_success[-1]`), eai-vc's definitions:
  reach: 1 - min(1, max(|f0 - c| - w/2, 0) / (|f0_start - c| - w/2)), finger 0's distance to
    the cube's inscribed sphere (c its centre, w = 6.5 cm the cube width) relative to the start;
  push: max(0, 1 - |c - g| / |c_start - g|), the cube centre's distance to the goal relative to
    the start.
  The fingertip frame sits 1.2 cm inside the tip's surface, so a fingertip touching the cube
  scores 1 - 1.2 cm / (start distance): about 0.92 on average over the reach starts, not 1.
  `info['success']` (vcbench's, eai-vc has none): within 2 cm (reach: of the inscribed sphere,
  push: of the goal). The step's reward is its score (BC does not use rewards).
- The official evaluation of the TriFinger challenge (`move_cube.evaluate_state`, difficulty 1)
  is a cost, not a score: (|c - g|_xy / 0.39 m + |c - g|_z / 0.1 m) / 2 (arena diameter,
  height range), absolute, not relative to the start. `official_cost` exposes it: with the
  start, the cube and the goal on the table, 1 - cost(c) / cost(c_start) is exactly the push
  score (tested); off the table they differ, the cost weighing height 3.9 times more than
  horizontal distance where the score's Euclidean distance weighs them alike.
"""
from __future__ import annotations

import functools
import importlib.metadata
import warnings

import numpy as np

from vcbench.envs import sim_obs
from vcbench.envs.core import RenderConfig  # noqa: F401 - the frames are configured by it.

TASKS = ("reach-cube", "push-cube")
CAMERAS = ("camera60", "camera180", "camera300")
SIM_TIME_STEP = 0.004      # eai-vc's sim_time_step: 250 Hz.
SUBSTEPS = 100             # Simulation steps per policy step: 0.4 s (eai-vc's downsample step).
IK_EVERY = 4               # Simulation steps between IK solves: 62.5 Hz.
# Joint PD damping: the platform's default D gains (0.5, 1, 0.5) make the joints oscillate at a
# 4 ms step (a limit cycle at the torque limit); a fifth of them holds and tracks without one.
POSITION_KD = np.array([0.1, 0.2, 0.1] * 3)
# Metres of fingertip motion per unit of action: eai-vc's max_a (reach 5 cm, push 8 cm).
MAX_DELTA = {"reach-cube": 0.05, "push-cube": 0.08}
EPISODE_STEPS = {"reach-cube": 5, "push-cube": 10}   # eai-vc: 500 and 1000 sim steps of 4 ms.
HORIZON = max(EPISODE_STEPS.values())
NUM_FINGERS = 3
PROPRIO_DIM = 3 * NUM_FINGERS
STATE_DIM = 3 * NUM_FINGERS + 3 + 4 + 3   # fingertips, cube position, cube quaternion, goal.
CUBE_WIDTH = 0.065         # trifinger_simulation's move_cube._CUBE_WIDTH.
CUBE_HALF = CUBE_WIDTH / 2
Q_NOMINAL = np.array([-0.08, 1.15, -1.5] * NUM_FINGERS)   # eai-vc's initial joint angles.
START_RADIUS = 0.09        # Cube start centres: a disc of this radius around the arena centre.
GOAL_RADIUS = 0.10
MIN_GOAL_DISTANCE = 0.05
SUCCESS_DISTANCE = 0.02
TIP_RADIUS = 0.012         # Fingertip frame to tip surface, measured by pressing on the cube.

# Cube orientations with one face up (x, y, z, w); a random yaw is applied on top.
_S = np.sqrt(0.5)
_FACE_UP = np.array([[0, 0, 0, 1], [_S, 0, 0, _S], [1, 0, 0, 0], [-_S, 0, 0, _S],
                     [0, -_S, 0, _S], [0, _S, 0, _S]])


def _modules():
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")   # gym 0.26 (its dependency) warns about NumPy 2.
      import pinocchio  # noqa: PLC0415 - optional dependency.
      import pybullet  # noqa: PLC0415
      from trifinger_simulation import camera  # noqa: PLC0415
      from trifinger_simulation import trifinger_platform  # noqa: PLC0415
      from trifinger_simulation import trifingerpro_limits  # noqa: PLC0415
      from trifinger_simulation import visual_objects  # noqa: PLC0415
  except ImportError as e:
    raise ImportError("trifinger-simulation is not installed: run `pip install -e .[trifinger]` "
                      "(trifinger-simulation==2.0.0, which brings pybullet and pinocchio).") from e
  return pinocchio, pybullet, camera, trifinger_platform, trifingerpro_limits, visual_objects


# Bumped when this adapter changes what an episode is (control, sampling, observations), so
# demo caches made by an older one are not reused.
ADAPTER_REVISION = 1


def version() -> str:
  """The installed trifinger-simulation and pybullet versions and the adapter's revision (part
  of every demo cache key)."""
  found = [f"vcbench adapter r{ADAPTER_REVISION}"]
  for package in ("trifinger-simulation", "pybullet"):
    try:
      found.append(f"{package}=={importlib.metadata.version(package)}")
    except importlib.metadata.PackageNotFoundError:
      found.append(f"{package} missing")
  return ", ".join(found)


def task_names() -> list[str]:
  return list(TASKS)


def check_task(task: str) -> str:
  if task not in TASKS:
    raise ValueError(f"unknown TriFinger task {task!r}; valid tasks: {list(TASKS)}")
  return task


def camera_names(task: str = "") -> list[str]:
  """The cameras `RenderConfig.camera` may name (the platform's three)."""
  del task
  return list(CAMERAS)


def reach_score(tip: np.ndarray, start_tip: np.ndarray, cube: np.ndarray) -> float:
  """eai-vc's reach score of finger 0's tip `tip` (started at `start_tip`) to the cube at
  `cube`: 1 - its distance to the cube's inscribed sphere relative to the start's, in [0, 1]."""
  now = max(float(np.linalg.norm(tip - cube)) - CUBE_HALF, 0.0)
  start = float(np.linalg.norm(start_tip - cube)) - CUBE_HALF
  if start <= 0:   # eai-vc's guard: a start inside the sphere is measured to the centre.
    start = float(np.linalg.norm(start_tip - cube))
  return 1.0 - min(1.0, now / start)


def push_score(cube: np.ndarray, start: np.ndarray, goal: np.ndarray) -> float:
  """eai-vc's push score: 1 - the cube's distance to the goal relative to the start's, >= 0."""
  return max(0.0, 1.0 - float(np.linalg.norm(cube - goal)) / float(np.linalg.norm(start - goal)))


def official_cost(cube: np.ndarray, goal: np.ndarray) -> float:
  """The TriFinger challenge's `move_cube.evaluate_state` cost of a cube position (difficulty
  1-3: positions only), lower is better; for comparison with `push_score`."""
  _modules()   # A clear ImportError without trifinger-simulation.
  from trifinger_simulation.tasks import move_cube  # noqa: PLC0415
  identity = (0, 0, 0, 1)
  return float(move_cube.evaluate_state(move_cube.Pose(np.asarray(goal), identity),
                                        move_cube.Pose(np.asarray(cube), identity), 1))


def sample_episode(task: str, seed: int) -> dict[str, np.ndarray]:
  """The cube's start pose and the goal of episode `seed` (see the module docstring)."""
  rng = np.random.default_rng(seed)

  def disc(radius):
    r, theta = radius * np.sqrt(rng.random()), rng.uniform(0, 2 * np.pi)
    return np.array([r * np.cos(theta), r * np.sin(theta), CUBE_HALF])

  start = disc(START_RADIUS)
  yaw = rng.uniform(0, 2 * np.pi)
  orientation = _quat_mul(np.array([0, 0, np.sin(yaw / 2), np.cos(yaw / 2)]),
                          _FACE_UP[rng.integers(len(_FACE_UP))])
  goal = start.copy()
  if task == "push-cube":
    goal = disc(GOAL_RADIUS)
    while np.linalg.norm(goal - start) < MIN_GOAL_DISTANCE:
      goal = disc(GOAL_RADIUS)
  return {"position": start, "orientation": orientation, "goal": goal}


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Hamilton product of (x, y, z, w) quaternions."""
  (ax, ay, az, aw), (bx, by, bz, bw) = a, b
  return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                   aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


class FingertipIK:
  """Joint angles putting each fingertip at a target: damped Newton steps on pinocchio's
  per-finger 3x3 Jacobians, warm-started from the last solution (sub-millimetre in 2 steps
  for the small moves between control ticks)."""

  def __init__(self, kinematics, low: np.ndarray, high: np.ndarray, iterations: int = 2):
    self.pin = _modules()[0]
    self.model, self.data = kinematics.robot_model, kinematics.data
    self.frames = list(kinematics.tip_link_ids)
    self.low, self.high, self.iterations = low, high, iterations

  def tips(self, q: np.ndarray) -> np.ndarray:
    """[3, 3] fingertip positions at joint angles `q`."""
    self.pin.framesForwardKinematics(self.model, self.data, q)
    return np.stack([np.array(self.data.oMf[f].translation) for f in self.frames])

  def solve(self, targets: np.ndarray, q: np.ndarray) -> np.ndarray:
    pin = self.pin
    q = np.asarray(q, np.float64).copy()
    for _ in range(self.iterations):
      pin.computeJointJacobians(self.model, self.data, q)
      pin.framesForwardKinematics(self.model, self.data, q)
      for i, frame in enumerate(self.frames):
        jac = pin.getFrameJacobian(self.model, self.data, frame,
                                   pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3, 3 * i:3 * i + 3]
        err = targets[i] - np.asarray(self.data.oMf[frame].translation)
        # Damping keeps the step bounded near singular (stretched) configurations.
        q[3 * i:3 * i + 3] += np.linalg.solve(jac.T @ jac + 1e-6 * np.eye(3), jac.T @ err)
    return np.clip(q, self.low, self.high)

  def gravity(self, q: np.ndarray) -> np.ndarray:
    return np.asarray(self.pin.computeGeneralizedGravity(self.model, self.data, q))


class TriFingerSim:
  """One TriFinger task as a `HostSim`; `render=None` skips pixels (state oracle, experts)."""
  action_dim = 3 * NUM_FINGERS

  def __init__(self, task: str, render: RenderConfig | None = RenderConfig(camera="camera60")):
    _, self._pb, camera, platform_lib, limits, visual_objects = _modules()
    self.task, self.render_config = check_task(task), render
    self.episode_steps, self.max_delta = EPISODE_STEPS[task], MAX_DELTA[task]
    if render is not None and render.camera not in CAMERAS:
      raise ValueError(f"unknown TriFinger camera {render.camera!r}; valid: {list(CAMERAS)}")
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      self.platform = platform_lib.TriFingerPlatform(
          time_step_s=SIM_TIME_STEP, initial_robot_position=Q_NOMINAL, enable_cameras=False)
    self.finger = self.platform.simfinger
    self._client = self.finger._pybullet_client_id  # noqa: SLF001 - the platform's own client.
    self._cube_id = self.platform.cube._object_id  # noqa: SLF001
    self.ik = FingertipIK(self.finger.kinematics, limits.robot_position.low.astype(np.float64),
                          limits.robot_position.high.astype(np.float64))
    if task == "reach-cube":   # The reach target cannot be pushed away (eai-vc: fix_cube_base).
      self._pb.changeDynamics(self._cube_id, -1, mass=0, physicsClientId=self._client)
    self._marker = None
    if task == "push-cube":
      self._marker = visual_objects.CubeMarker(CUBE_WIDTH, [0, 0, -1], [0, 0, 0, 1],
                                               pybullet_client_id=self._client)
    self._camera = None
    if render is not None:
      # The platform's camera poses (as TriFingerCameras places them) at the frame size.
      position, orientation = _CAMERA_POSES[CAMERAS.index(render.camera)]
      self._camera = camera.Camera(camera_position=position, camera_orientation=orientation,
                                   image_size=(render.size, render.size),
                                   pybullet_client_id=self._client)
    self.steps, self.plan, self.q_target = 0, None, Q_NOMINAL.copy()
    self.episode: dict[str, np.ndarray] = {}
    self.start_tips = None
    self.expert_memory: dict = {}

  def observation_spec(self):
    return sim_obs.obs_spec(STATE_DIM, PROPRIO_DIM, sim_obs.render_size(self.render_config))

  # -- episode -------------------------------------------------------------------------------

  def reset(self, seed: int):
    self.episode = sample_episode(self.task, seed)
    self.finger.reset_finger_positions_and_velocities(Q_NOMINAL)
    pb, cid = self._pb, self._client
    pb.resetBasePositionAndOrientation(self._cube_id, self.episode["position"].tolist(),
                                       self.episode["orientation"].tolist(), physicsClientId=cid)
    pb.resetBaseVelocity(self._cube_id, [0, 0, 0], [0, 0, 0], physicsClientId=cid)
    if self._marker is not None:
      self._marker.set_state(self.episode["goal"].tolist(), [0, 0, 0, 1])
    self.steps = 0
    self.q_target = Q_NOMINAL.copy()
    self.plan = self.ik.tips(Q_NOMINAL)
    self.start_tips = self.plan.copy()
    self.expert_memory = {}
    return self._obs()

  def step(self, action):
    delta = np.clip(np.asarray(action, np.float64).reshape(NUM_FINGERS, 3), -1, 1)
    delta *= self.max_delta
    if self.task == "reach-cube":
      delta[1:] = 0.0   # Only finger 0 moves (module docstring).
    start = self.plan
    for k in range(SUBSTEPS):
      if k % IK_EVERY == 0:   # A control tick: new joint targets and gravity compensation.
        frac = min(1.0, (k + IK_EVERY) / SUBSTEPS)   # Aim at where the plan is a tick ahead.
        self.q_target = self.ik.solve(start + frac * delta, self.q_target)
        command = self.finger.Action(torque=self.ik.gravity(self._joint_positions()),
                                     position=self.q_target)
        command.position_kd = POSITION_KD
      self.finger.append_desired_action(command)
    self.plan = start + delta
    self.steps += 1
    score = self.score()
    info = {"success": self.distance() < SUCCESS_DISTANCE, "score": score}
    return self._obs(), score, self.steps >= self.episode_steps, info

  # -- measurements --------------------------------------------------------------------------

  def _joint_positions(self) -> np.ndarray:
    # The observation after the last simulated step (t + 1 is the latest state).
    return np.asarray(self.finger.get_observation(self.finger._t + 1).position)  # noqa: SLF001

  def tips(self) -> np.ndarray:
    """[3, 3] current fingertip positions."""
    return self.ik.tips(self._joint_positions())

  def cube_pose(self) -> tuple[np.ndarray, np.ndarray]:
    pos, orn = self._pb.getBasePositionAndOrientation(self._cube_id, physicsClientId=self._client)
    return np.asarray(pos), np.asarray(orn)

  def distance(self) -> float:
    """What `success` thresholds: reach, finger 0 to the inscribed sphere; push, cube to goal."""
    cube = self.cube_pose()[0]
    if self.task == "reach-cube":
      return max(float(np.linalg.norm(self.tips()[0] - cube)) - CUBE_HALF, 0.0)
    return float(np.linalg.norm(cube - self.episode["goal"]))

  def score(self) -> float:
    cube = self.cube_pose()[0]
    if self.task == "reach-cube":
      return reach_score(self.tips()[0], self.start_tips[0], cube)
    return push_score(cube, self.episode["position"], self.episode["goal"])

  def render(self) -> np.ndarray:
    img = self._camera.get_image(renderer=self._pb.ER_TINY_RENDERER)
    return np.ascontiguousarray(np.asarray(img, np.uint8).reshape(
        self.render_config.size, self.render_config.size, -1)[..., :3])

  def _obs(self):
    tips = self.tips().reshape(-1)
    pos, orn = self.cube_pose()
    state = np.concatenate([tips, pos, orn, self.episode["goal"]]).astype(np.float32)
    obs = {"proprio": tips.astype(np.float32), "state": state}
    if self._camera is not None:
      obs["rgb"] = self.render()
    return obs

  # -- experts -------------------------------------------------------------------------------

  def expert_action(self) -> np.ndarray:
    """The task's scripted expert on the privileged state (`reach_expert`, `push_expert`)."""
    targets = (reach_expert if self.task == "reach-cube" else push_expert)(self)
    return np.clip((targets - self.plan).reshape(-1) / self.max_delta, -1,
                   1).astype(np.float32)

  def close(self):
    self.finger._disconnect_from_pybullet()  # noqa: SLF001 - the platform has no close().
    # pybullet reuses client ids: the finger's, cube's and marker's destructors would otherwise
    # disconnect (or remove bodies from) a simulator created after this one in the process.
    for owner in (self.finger, self.platform.cube, self._marker):
      if owner is not None:
        owner._pybullet_client_id = -1  # noqa: SLF001
    self._marker = None


# camera60, camera180, camera300 as trifinger_simulation's TriFingerCameras places them.
_CAMERA_POSES = (
    ((0.2496, 0.2458, 0.4190), (0.3760, 0.8690, -0.2918, -0.1354)),
    ((0.0047, -0.2834, 0.4558), (0.9655, -0.0098, -0.0065, -0.2603)),
    ((-0.2470, 0.2513, 0.3943), (-0.3633, 0.8686, -0.3141, 0.1220)),
)

SAFE_HEIGHT = 0.09   # Fingertip height that clears the cube's top (6.5 cm) with the tip.
# How far inside the cube's faces the closed cage aims: a light squeeze holds the cube in the
# cage; deeper ones (1 cm and more) wedge it off the table, which the 3-D score counts.
GRIP_SQUEEZE = 0.006
# How far below the top face the reach expert aims the tip: enough to keep it pressed there
# (3 cm lost 2 points of score over 20 episodes against 1 cm, 4 mm gained 0.3).
PRESS = 0.004


def _step_towards(sim: TriFingerSim, plan: np.ndarray, target: np.ndarray) -> np.ndarray:
  """The point one policy step (at most `sim.max_delta` per axis) from `plan` to `target`."""
  return plan + np.clip(target - plan, -sim.max_delta, sim.max_delta)


def reach_expert(sim: TriFingerSim) -> np.ndarray:
  """Finger 0 over the cube at a safe height, then down onto the centre of its top face,
  commanded `PRESS` into it so the position controller keeps the tip pressed on the face."""
  plan = sim.plan.copy()
  cube = sim.cube_pose()[0]
  press = np.array([cube[0], cube[1], cube[2] + CUBE_HALF + TIP_RADIUS - PRESS])
  if np.abs(cube[:2] - plan[0, :2]).max() > sim.max_delta:
    plan[0] = _step_towards(sim, plan[0], np.array([cube[0], cube[1], SAFE_HEIGHT]))
  else:
    # Within one step: straight to the press point. The straight line only comes below the
    # safe height within 2 cm (horizontally) of the centre, over the top face.
    plan[0] = press
  return plan


def push_expert(sim: TriFingerSim) -> np.ndarray:
  """Cage and carry: each finger comes to the side of the cube that faces it (the three 120
  degrees apart), closes in at the cube's mid-height, then the closed cage moves until the
  cube's centre (measured) is at the goal."""
  memory = sim.expert_memory
  cube = sim.cube_pose()[0]
  goal = sim.episode["goal"]
  if "directions" not in memory:   # Each finger's side: towards its resting fingertip.
    rest = sim.start_tips[:, :2] - cube[:2]
    memory["directions"] = rest / np.linalg.norm(rest, axis=1, keepdims=True)
    memory["phase"] = "approach"
  dirs = np.concatenate([memory["directions"], np.zeros((NUM_FINGERS, 1))], axis=1)
  open_radius = CUBE_HALF * np.sqrt(2) + TIP_RADIUS + 0.012   # Clears the corners at any yaw.
  grip_radius = CUBE_HALF + TIP_RADIUS - GRIP_SQUEEZE         # Inside the faces: squeezes.
  centre = np.array([cube[0], cube[1], CUBE_HALF])   # Fingertips at the cube's mid-height.
  if memory["phase"] == "approach":
    targets = centre + open_radius * dirs
    high = np.abs(targets[:, :2] - sim.plan[:, :2]).max() > 1e-3
    if high:   # Travel above the cube's top until over the pre-grasp points, then descend.
      targets[:, 2] = np.maximum(SAFE_HEIGHT, sim.plan[:, 2])
      return np.stack([_step_towards(sim, p, t) for p, t in zip(sim.plan, targets)])
    memory["phase"] = "close"
    return targets
  if memory["phase"] == "close":
    memory["phase"] = "carry"
    return centre + grip_radius * dirs
  # Carry: move the cage by the cube's remaining error to the goal.
  return np.stack([_step_towards(sim, p, p + (goal - centre) * np.array([1, 1, 0]))
                   for p in sim.plan])


def expert(task: str):
  """(sim, obs) -> action: the task's scripted expert acting in a `TriFingerSim`."""
  check_task(task)
  return lambda sim, obs: sim.expert_action()


def make_sim(task: str, render: RenderConfig | None, horizon: int = 0):
  """A picklable factory for `host.SimBatch` workers. `horizon` is not used: each task's
  episode length is the simulator's own (`EPISODE_STEPS`); the bridge may cut it shorter."""
  del horizon
  check_task(task)
  return functools.partial(TriFingerSim, task, render)
