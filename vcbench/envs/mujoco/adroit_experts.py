"""Experts for the Adroit tasks (`adroit.AdroitSim`), written in vcbench, from privileged state.

DAPG's and eai-vc's Adroit demonstrations are human teleoperation (CyberGlove) recordings; the
few-shot BC track needs an expert that can act from any seeded episode, so vcbench writes its
own:
- relocate: a scripted reach-grasp-carry controller. The palm (site `S_grasp`) is driven in
  Cartesian space through the arm's two horizontal slides and its pitch hinge (the vertical
  slide's range stops the palm 0.12 m above the table; pitching the arm lowers the hand to the
  ball), with the arm's own position servos, gravity compensation and velocity damping; the
  open hand hovers above the ball, descends over it, closes all fingers and the opposing thumb
  (a power grasp), then carries the ball, at the offset it was grasped with, to the target and
  holds it there.
- pen: sampling-based model-predictive control (predictive sampling, as in MuJoCo MPC: Howell
  et al. 2022) on a private `MjData` of the simulator's model (which carries the episode's
  target orientation): every step, perturbations of the current plan, spline-parametrised
  over the 24 hand actuators, are rolled out from the simulator's state over a short horizon,
  the cheapest (`PEN_COST`: orientation and position errors, dropping, effort, the pen not yet
  standing up, the pen drifting) is executed for one step and the plan shifts on. Its noise is
  drawn from the episode's seed, so an episode replays exactly. It is the weak expert of the
  two (launch/bench/adroit_experts.py measures both): with a 0.15 s horizon it turns the pen
  quickly when the goal is within ~60 degrees but often lets it drift out of the hand on the
  larger turns.
Each expert resets its per-episode memory when the simulator starts a new episode (`sim.steps`
is 0).
"""
from __future__ import annotations

import hashlib

import numpy as np

from vcbench.envs.mujoco import adroit

# The pen MPC's cost weights, per step of the horizon: orientation (1 - similarity to the goal
# axis), distance (m) to the goal position, the pen dropped, effort (squared action), the goal
# axis' height not yet reached, the pen's speed (m/s). Tried on seeds 0-3: weaker position and
# speed terms turn the pen faster but let it drift out of the hand.
PEN_COST = {"orientation": 1.0, "position": 20.0, "dropped": 100.0, "effort": 0.01, "rise": 2.0,
            "speed": 2.0}


REVISION = 1   # Bumped when an expert's logic changes (its parameters are hashed anyway).


def make(task: str):
  adroit.check_task(task)
  return {"pen": PenMPC, "relocate": RelocateScript}[task]()


def version(task: str) -> str:
  """What identifies the expert of `task` (part of the demo cache key): its revision and a hash
  of its parameters."""
  adroit.check_task(task)
  if task == "relocate":
    c = RelocateScript
    params = (c.GRASP_OFFSET.tolist(), c.HOVER, c.ARM, c.GAIN, c.DAMPING, c.MAX_STEP, c.FLEX,
              c.THUMB.tolist(), c.CLOSE_STEPS, c.GRASP_STEPS, c.DESCEND_STEPS, c.LOST)
  else:
    p = PenMPC()
    params = (p.samples, p.horizon, p.knots, p.noise, sorted(PEN_COST.items()))
  digest = hashlib.sha256(repr(params).encode()).hexdigest()[:12]
  return f"{task}-expert r{REVISION}:{digest}"


def _normalized(env, ctrl: np.ndarray) -> np.ndarray:
  """Actuator targets -> the env's [-1, 1] actions."""
  return np.clip((ctrl - env.act_mean) / env.act_rng, -1.0, 1.0)


class RelocateScript:
  """Reach over the ball, descend, power-grasp, carry to the target (see the module doc)."""
  # Palm (S_grasp) relative to the ball when grasping: found by a sweep over 50 seeds; the
  # grasp fails when the palm is 1 cm higher (fingers close above the ball's equator).
  GRASP_OFFSET = np.array([0.0, -0.03, 0.02])
  HOVER = 0.05            # Height above the grasp pose to line up before descending (m).
  ARM = (0, 2, 3)         # ARTx, ARTz (the horizontal slides) and ARRx (pitch) move the palm.
  GAIN, DAMPING, MAX_STEP = 2.5, 0.1, 0.1
  FLEX = 1.57             # Finger flexion when closed (rad; the joints' upper limit).
  THUMB = np.array([1.0, 1.3, 0.2, 0.5, -1.0])   # THJ4..THJ0 when closed: opposes the fingers.
  FINGER_FLEX = (3, 4, 5, 7, 8, 9, 11, 12, 13, 16, 17, 18)   # Hand-actuator indices.
  CLOSE_STEPS, GRASP_STEPS, DESCEND_STEPS = 6, 10, 30
  LOST = 0.05   # The ball this far from where it was grasped (m) is not in the hand.

  def __init__(self):
    self._sim = None

  def __call__(self, sim, obs) -> np.ndarray:
    del obs   # Acts from the simulator's state.
    if sim.steps == 0 or sim is not self._sim:
      self._sim, self.phase, self.t0, self.carry = sim, "hover", 0, None
      model = sim.env.model
      self._palm, self._ball = model.site("S_grasp").id, model.body("Object").id
      self._target = model.site("target").id
    env, data, t = sim.env, sim.env.data, sim.steps
    palm, ball = data.site_xpos[self._palm].copy(), data.xpos[self._ball].copy()
    grasp = ball + self.GRASP_OFFSET
    if self.phase == "hover":
      goal, close = grasp + [0.0, 0.0, self.HOVER], 0.0
      if np.linalg.norm((palm - goal)[:2]) < 0.02:
        self.phase, self.t0 = "descend", t
    if self.phase == "descend":
      goal, close = grasp, 0.0
      if np.linalg.norm(palm - goal) < 0.015 or t - self.t0 > self.DESCEND_STEPS:
        self.phase, self.t0 = "grasp", t
    if self.phase == "grasp":
      goal, close = grasp, min(1.0, (t - self.t0) / self.CLOSE_STEPS)
      if t - self.t0 > self.GRASP_STEPS:
        self.phase, self.carry = "carry", palm - ball
    if self.phase == "carry" and np.linalg.norm(palm - ball - self.carry) > self.LOST:
      self.phase = "hover"   # The ball slipped out (or was never held): grasp it again.
      goal, close = grasp + [0.0, 0.0, self.HOVER], 0.0
    if self.phase == "carry":
      goal, close = data.site_xpos[self._target] + self.carry, 1.0
    return self._action(env, goal, close)

  def _action(self, env, goal: np.ndarray, close: float) -> np.ndarray:
    import mujoco  # noqa: PLC0415
    model, data = env.model, env.data
    jac = np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jac, None, self._palm)
    cols = list(self.ARM)
    step = np.zeros(4)
    step[cols] = np.linalg.lstsq(jac[:, cols], goal - data.site_xpos[self._palm], rcond=None)[0]
    step = np.clip(step, -self.MAX_STEP, self.MAX_STEP)
    ctrl = env.act_mean.copy()
    # The arm's servos hold q = 2.5 ctrl (gain 500, bias -200 q): command the joint target at
    # that ratio, damp the velocity, and add gravity compensation in actuator units.
    ratio = -model.actuator_biasprm[:4, 1] / model.actuator_gainprm[:4, 0]
    ctrl[:4] = (ratio * (data.qpos[:4] + self.GAIN * step - self.DAMPING * data.qvel[:4])
                + data.qfrc_bias[:4] / model.actuator_gainprm[:4, 0])
    ctrl[4:6] = 0.0
    hand = np.zeros(24)
    hand[list(self.FINGER_FLEX)] = close * self.FLEX
    hand[19:24] = close * self.THUMB
    ctrl[6:] = hand
    return _normalized(env, ctrl).astype(np.float32)


class PenMPC:
  """Predictive-sampling MPC of the pen's orientation (see the module docstring)."""

  def __init__(self, samples: int = 16, horizon: int = 15, knots: int = 4, noise: float = 0.2):
    self.samples, self.horizon, self.knots, self.noise = samples, horizon, knots, noise
    self._sim = None

  def __call__(self, sim, obs) -> np.ndarray:
    del obs   # Acts from the simulator's state.
    import mujoco  # noqa: PLC0415
    if sim.steps == 0 or sim is not self._sim:
      self._start(sim, mujoco)
    self._plan(sim.env, mujoco)
    action = np.zeros(adroit.ACTION_DIM, np.float32)
    action[adroit.ARM_DIM:] = self._nominal[0]
    self._nominal = np.concatenate([self._nominal[1:], self._nominal[-1:]])   # Shift on.
    return action

  def _start(self, sim, mujoco):
    self._sim, model = sim, sim.env.model
    self._rng = np.random.default_rng([sim.seed or 0, 17])
    self._data = mujoco.MjData(model)   # The planner's own: the simulator's is never touched.
    self._nominal = np.zeros((self.horizon, model.nu))
    self._sites = {n: model.site(n).id for n in ("object_top", "object_bottom", "target_top",
                                                 "target_bottom", "eps_ball")}
    self._pen = model.body("Object").id
    # Linear spline: `knots` perturbations spread over the horizon's steps.
    at = np.linspace(0, self.knots - 1, self.horizon)
    lo = np.floor(at).astype(int).clip(0, self.knots - 2)
    self._basis = np.zeros((self.horizon, self.knots))
    self._basis[np.arange(self.horizon), lo] = 1 - (at - lo)
    self._basis[np.arange(self.horizon), lo + 1] = at - lo

  def _plan(self, env, mujoco) -> None:
    """Replaces the plan by the cheapest of itself and `samples - 1` perturbations of it."""
    noise = self._rng.normal(0.0, self.noise, (self.samples, self.knots, env.model.nu))
    noise[0] = 0.0
    plans = np.clip(self._nominal[None] + np.einsum("hk,skn->shn", self._basis, noise), -1, 1)
    costs = [self._rollout(env, plan, mujoco) for plan in plans]
    self._nominal = plans[int(np.argmin(costs))]

  def _rollout(self, env, plan, mujoco) -> float:
    d, real = self._data, env.data
    d.qpos[:], d.qvel[:], d.act[:], d.time = real.qpos, real.qvel, real.act, real.time
    cost = 0.0
    for u in plan:
      d.ctrl[:] = env.act_mean + u * env.act_rng
      mujoco.mj_step(env.model, d, nstep=env.frame_skip)
      cost += self._cost(d, u)
    return cost

  def _cost(self, d, u) -> float:
    s, w = self._sites, PEN_COST
    axis = d.site_xpos[s["object_top"]] - d.site_xpos[s["object_bottom"]]
    goal = d.site_xpos[s["target_top"]] - d.site_xpos[s["target_bottom"]]
    axis, goal = axis / np.linalg.norm(axis), goal / np.linalg.norm(goal)
    pos = d.xpos[self._pen]
    return float(
        w["orientation"] * (1.0 - axis @ goal)
        + w["position"] * np.linalg.norm(pos - d.site_xpos[s["eps_ball"]])
        + w["dropped"] * (pos[2] < adroit.PEN_DROP_HEIGHT)
        + w["effort"] * (u @ u)
        # Every goal stands the pen up (axis z >= 0.54); turning the lying pen within the
        # palm's plane only looks like progress, rising is the way there.
        + w["rise"] * max(0.0, goal[2] - axis[2])
        # The pen drifts before it falls: its slide joints' speed.
        + w["speed"] * np.linalg.norm(d.qvel[-6:-3]))


def expert(task: str):
  """(sim, obs) -> action: the task's expert acting in an `AdroitSim` from its privileged
  simulator state (the suite entry's `expert`)."""
  adroit.check_task(task)
  return make(task)
