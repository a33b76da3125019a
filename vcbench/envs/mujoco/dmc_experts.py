"""The demonstrators of CortexBench's DeepMind Control tasks, written or trained in vcbench.

eai-vc's DMC demos come from DDPG experts of URLB, downloads that cannot be fetched here; vcbench
makes its own:
- reacher (easy and hard): scripted. Damped least-squares inverse kinematics of the fingertip
  (MuJoCo's Jacobian) towards the target, then a joint-velocity damping term: a 2-link arm needs
  nothing learned. Gains chosen on seeds 0-29 of both tasks (mean return 984 easy, 979 hard).
- walker, cheetah, finger: SAC on state (`vcbench.algos.sac`, `configs/dmc_expert.py`), whose
  deterministic policy ships as `experts/<task>.npz` (the actor's parameters and a `meta` JSON
  with its training settings and measured returns). The policy runs here in NumPy: demo
  generation needs no JAX and the expert is picklable.

Every expert has a `version` string that enters the demo cache key (the scripted controller's
gains; the file's sha256), so demos of one expert are never reused for another.
"""
from __future__ import annotations

import functools
import hashlib
import json
import pathlib

import numpy as np

from vcbench.envs.mujoco import dmc

EXPERTS_DIR = pathlib.Path(__file__).parent / "experts"
REACHER_GAINS = (8.0, 0.3, 0.01)   # Position gain, velocity damping, least-squares damping.


def reacher_action(physics, gains=REACHER_GAINS) -> np.ndarray:
  """Torques moving reacher's fingertip towards the target."""
  import mujoco  # noqa: PLC0415
  kp, kd, lam = gains
  m, d = physics.model.ptr, physics.data.ptr
  finger, target = m.geom("finger").id, m.geom("target").id
  jac = np.zeros((3, m.nv))
  mujoco.mj_jac(m, d, jac, None, d.geom_xpos[finger], m.geom_bodyid[finger])
  j = jac[:2]
  error = d.geom_xpos[target][:2] - d.geom_xpos[finger][:2]
  dq = j.T @ np.linalg.solve(j @ j.T + lam * np.eye(2), error)
  return np.clip(kp * dq - kd * d.qvel, -1.0, 1.0).astype(np.float32)


class MLPPolicy:
  """The deterministic SAC policy tanh(mean(state)) from an exported actor, in NumPy."""

  def __init__(self, path: pathlib.Path):
    with np.load(path) as z:
      self.meta = json.loads(str(z["meta"]))
      names = sorted((k for k in z.files if k.endswith("/kernel")),
                     key=lambda k: int(k.split("/")[-2].split("_")[-1]))
      self.layers = [(z[k], z[k[: -len("kernel")] + "bias"]) for k in names]

  def __call__(self, state: np.ndarray) -> np.ndarray:
    x = np.asarray(state, np.float32)
    for i, (w, b) in enumerate(self.layers):
      x = x @ w + b
      if i < len(self.layers) - 1:
        x = np.maximum(x, 0)
    mean = x[..., : x.shape[-1] // 2]
    return np.tanh(mean).astype(np.float32)


def expert_path(task: str) -> pathlib.Path:
  return EXPERTS_DIR / f"{task}.npz"


def is_scripted(task: str) -> bool:
  return task.startswith("reacher-")


def available(task: str) -> bool:
  return is_scripted(task) or expert_path(task).exists()


def _missing(task: str) -> FileNotFoundError:
  return FileNotFoundError(
      f"no DMC expert for {task!r}: {expert_path(task)} is missing. Train one with `python -m "
      f"launch.main --config configs/dmc_expert.py:{task} --config.export_to="
      f"{expert_path(task)}` (scripted experts: reacher-*; shipped: "
      f"{sorted(p.stem for p in EXPERTS_DIR.glob('*.npz'))})")


def policy(task: str) -> MLPPolicy:
  if not expert_path(task).exists():
    raise _missing(task)
  return _load(expert_path(task))


@functools.lru_cache(maxsize=None)
def _load(path: pathlib.Path) -> MLPPolicy:
  """One load per file (keyed by path, so another experts directory is another cache entry)."""
  return MLPPolicy(path)


def expert(task: str):
  """(sim, obs) -> action: the expert of `task` acting in a `dmc.DMCSim`."""
  if is_scripted(task):
    return lambda sim, obs: reacher_action(sim.physics)
  pi = policy(task)
  return lambda sim, obs: pi(obs["state"])


def version(task: str) -> str:
  """What identifies the expert of `task` (part of the demo cache key)."""
  if is_scripted(task):
    return "scripted-reacher:" + ",".join(map(str, REACHER_GAINS))
  if not expert_path(task).exists():
    raise _missing(task)
  return "sac:" + hashlib.sha256(expert_path(task).read_bytes()).hexdigest()[:16]


def episode_returns(task: str, seeds, policy=None) -> np.ndarray:
  """Returns of `policy` ((sim, obs) -> action; default: the task's expert) on one episode per
  seed, without pixels."""
  sim, policy = dmc.DMCSim(task), policy or expert(task)
  out = []
  try:
    for seed in seeds:
      obs, total, done = sim.reset(int(seed)), 0.0, False
      while not done:
        obs, reward, done, _ = sim.step(policy(sim, obs))
        total += reward
      out.append(total)
  finally:
    sim.close()
  return np.array(out)
