"""The DMC tasks on MJX: parity with dm_control on C MuJoCo, the batched Env contract (seeded
resets, jitted scan, done after the horizon), and SAC training through it.

Compiling an MJX model on this CPU takes 30-130 s (finger's collision functions the longest), so
the default run compiles one task (reacher, no contacts: 70 s here, ~3 min on loaded cores); the
walker, cheetah and finger parity, their initial states and the expert job are `slow`
(`-m slow`, ~8 min).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("dm_control")
pytest.importorskip("mujoco.mjx")

import launching

from vcbench.algos import sac
from vcbench.envs.mujoco import dmc, dmc_mjx

# Parity settings per task: (decisions compared, observation atol, rtol). MJX is float32 and C
# MuJoCo float64, and MJX's constraint solver is not C MuJoCo's: the reacher (no contacts)
# stays within ~1e-6 over 50 decisions; finger within ~1e-6 until the finger presses on the
# spinner, then its velocities and touch readings differ by up to ~1.4e-3 (0.5% relative:
# the contact solve); the running cheetah's velocities (~20) drift by ~4e-4 relative over 30
# decisions; walker's 20 substeps per decision and its foot contacts amplify the differences
# (5e-4 by decision 12, 3e-3 by 25: chaotic, not a model difference), so it is compared over
# the first 10 decisions.
PARITY = {"reacher-easy": (50, 1e-5, 1e-5), "cheetah-run": (30, 1e-4, 1e-3),
          "finger-spin": (30, 3e-3, 3e-3), "walker-stand": (10, 1e-3, 1e-3),
          "walker-walk": (10, 1e-3, 1e-3)}
REWARD_ATOL = 1e-4
SLOW_TASKS = ("walker-stand", "walker-walk", "finger-spin", "cheetah-run")


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


def _c_start(task: str, seed: int):
  """A C MuJoCo episode start, moved where the tasks' rewards are not all zero: reacher's
  target next to the finger, finger's spinner turning faster than the spin threshold, the
  cheetah moving forward at 8 m/s."""
  sim = dmc.DMCSim(task)
  sim.reset(seed)
  p = sim.physics
  target = None
  if task.startswith("reacher"):
    finger = p.named.data.geom_xpos["finger", :2]
    p.named.model.geom_pos["target", ["x", "y"]] = finger + 0.03
    target = np.asarray(p.named.model.geom_pos["target", ["x", "y"]])[None]
  if task == "finger-spin":
    p.named.data.qvel["hinge"] = -25.0
  if task == "cheetah-run":
    p.named.data.qvel["rootx"] = 8.0
  p.forward()
  return sim, target


def _c_rollout(sim, actions):
  obs = [dmc.flat_observation(sim.env.task.get_observation(sim.physics))]
  rewards = []
  for a in actions:
    o, r, _, _ = sim.step(a)
    obs.append(o["state"])
    rewards.append(r)
  return np.array(obs), np.array(rewards)


def _mjx_rollout(env, qpos, qvel, target, actions):
  def run(qpos, qvel, target, actions):
    state = env.reset_to(qpos, qvel, target)

    def step(s, a):
      s = env.step(s, a[None])
      return s, (s.obs["state"][0], s.reward[0])

    _, (obs, rewards) = jax.lax.scan(step, state, actions)
    return jnp.concatenate([state.obs["state"], obs]), rewards

  obs, rewards = jax.jit(run)(qpos, qvel, target, actions)
  return np.asarray(obs), np.asarray(rewards)


@pytest.mark.parametrize("task", [
    pytest.param(t, marks=pytest.mark.slow) if t in SLOW_TASKS else t for t in PARITY])
def test_mjx_matches_c_mujoco_from_the_same_state(task):
  decisions, atol, rtol = PARITY[task]
  # Finger: seed 0 and actions around -0.7 press the finger onto the spinner (touch sensors
  # non-zero on 6 of the 30 decisions), so the contact forces are compared too.
  finger = task == "finger-spin"
  sim, target = _c_start(task, seed=0 if finger else 3)
  env = dmc_mjx.MJXEnv(task, num_envs=1)
  assert env.observation_spec()["state"].shape == (dmc.state_dim(task),)
  assert env.action_dim == sim.action_dim
  actions = np.random.RandomState(0).uniform(-1, 1, (decisions, env.action_dim))
  if finger:
    actions = np.clip(0.3 * actions - 0.7, -1, 1)
  actions = actions.astype(np.float32)
  qpos, qvel = sim.physics.data.qpos[None], sim.physics.data.qvel[None]
  try:
    got_obs, got_rewards = _mjx_rollout(env, qpos, qvel, target, actions)
    want_obs, want_rewards = _c_rollout(sim, actions)
  finally:
    sim.close()
  np.testing.assert_allclose(got_obs, want_obs, atol=atol, rtol=rtol)
  np.testing.assert_allclose(got_rewards, want_rewards, atol=REWARD_ATOL, rtol=0)
  assert want_rewards.max() > 0.1   # The comparison covers rewarded states, not only zeros.
  if finger:
    assert (want_obs[:, -2:] > 0).sum() >= 5   # ... and finger's touch sensors in contact.


def test_tolerance_matches_dm_control():
  from dm_control.utils import rewards
  x = np.linspace(-3, 14, 101) + 1e-3   # Off the bounds: float32 vs float64 at the edge.
  for kw in ({"bounds": (1.2, float("inf")), "margin": 0.6},
             {"bounds": (1.0, float("inf")), "margin": 0.5, "value_at_margin": 0.5,
              "sigmoid": "linear"},
             {"bounds": (10.0, float("inf")), "margin": 10.0, "value_at_margin": 0.0,
              "sigmoid": "linear"},
             {"bounds": (0.0, 0.06)}):
    want = np.array([rewards.tolerance(v, **kw) for v in x])
    np.testing.assert_allclose(np.asarray(dmc_mjx.tolerance(jnp.asarray(x), **kw)), want,
                               atol=1e-6, err_msg=str(kw))


def test_scan_rollout_done_after_the_horizon_and_seeded_initial_states():
  # Action repeat 100: a 10-decision episode, so the horizon is reached in a short scan.
  env = dmc_mjx.make_env("reacher-easy", 3, action_repeat=100)
  assert env.horizon == 10

  @jax.jit
  def rollout(seeds, actions):
    state = env.reset(seeds)

    def step(s, a):
      s = env.step(s, a)
      return s, (s.obs["state"], s.reward, s.done, s.metrics["steps"])

    return state, jax.lax.scan(step, state, actions)[1]

  actions = jnp.asarray(np.random.RandomState(1).uniform(-1, 1, (12, 3, 2)), jnp.float32)
  first, (obs, reward, done, steps) = rollout(jnp.array([5, 6, 5]), actions)
  again, _ = rollout(jnp.array([5, 6, 5]), actions)
  s0 = np.asarray(first.obs["state"])
  np.testing.assert_array_equal(s0[0], s0[2])           # Same seed, same episode.
  np.testing.assert_array_equal(s0, np.asarray(again.obs["state"]))
  assert np.abs(s0[0] - s0[1]).max() > 1e-2              # Seeds differ.
  assert not np.asarray(first.done).any()
  done, steps, obs, reward = map(np.asarray, (done, steps, obs, reward))
  assert not done[:9].any() and done[9:].all()
  np.testing.assert_array_equal(steps[:, 0], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10])
  np.testing.assert_array_equal(obs[10:], np.broadcast_to(obs[9], obs[10:].shape))  # Frozen.
  assert (reward[10:] == 0).all() and np.isfinite(obs).all()
  # The initial state follows dm_control's draws: target radius in [.05, .2], wrist in range.
  m = env.mj_model
  target = np.asarray(first.sim.target)
  assert ((np.linalg.norm(target, axis=1) >= 0.05) & (np.linalg.norm(target, axis=1) <= 0.2)).all()
  wrist = np.asarray(first.sim.data.qpos)[:, m.joint("wrist").qposadr[0]]
  assert ((wrist >= m.joint("wrist").range[0]) & (wrist <= m.joint("wrist").range[1])).all()


def test_sac_trains_through_the_mjx_env():
  env = dmc_mjx.make_env("reacher-easy", 2, action_repeat=50)   # 20-decision episodes.
  c = sac.default_config()
  c.num_envs, c.horizon, c.hidden = 2, env.horizon, (16, 16)
  c.batch_size, c.warmup, c.buffer_size = 16, 20, 200
  trainer = sac.make_train(c, env)
  state, metrics = trainer.train_chunk(trainer.init(jax.random.key(0)), 2)
  assert int(state.env_steps) == 2 * 2 * 20
  for name, values in metrics.items():
    assert values.shape == (2,) and np.isfinite(np.asarray(values)).all(), name
  assert float(metrics["critic_loss"][-1]) > 0   # Updates ran after the warmup.
  buffered = np.asarray(state.buffer.obs[:int(state.buffer.size)])
  assert np.abs(buffered).max() > 0 and np.unique(buffered[:, 0]).size > 10


def test_bad_task_and_shapes_are_refused_naming_the_valid_values():
  with pytest.raises(ValueError, match="walker-walk"):
    dmc_mjx.make_env("walker-run", 2)
  with pytest.raises(ValueError, match="action_repeat"):
    dmc_mjx.make_env("reacher-easy", 2, action_repeat=3)
  env = dmc_mjx.make_env("reacher-easy", 2)
  with pytest.raises(ValueError, match="expected 2 seeds"):
    env.reset(jnp.arange(3))
  with pytest.raises(ValueError, match="target"):
    env.reset_to(np.zeros((2, 2)), np.zeros((2, 2)))
  with pytest.raises(ValueError, match=r"qpos \(2, 2\)"):
    env.reset_to(np.zeros((2, 3)), np.zeros((2, 2)), np.zeros((2, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["finger-spin", "cheetah-run", "walker-walk"])
def test_initial_states_are_dm_controls_kind(task):
  """Finger starts contact-free, cheetah at rest after settling, walker's joints in range."""
  import mujoco
  env = dmc_mjx.make_env(task, 4)
  state = jax.jit(env.reset)(jnp.arange(4))
  qpos, qvel = np.asarray(state.sim.data.qpos), np.asarray(state.sim.data.qvel)
  m = env.mj_model
  data = mujoco.MjData(m)
  for q, v in zip(qpos, qvel):
    data.qpos[:], data.qvel[:] = q, v
    mujoco.mj_forward(m, data)
    if task == "finger-spin":
      assert data.ncon == 0
    limited = np.flatnonzero(m.jnt_limited)
    adr = m.jnt_qposadr[limited]
    assert ((q[adr] >= m.jnt_range[limited, 0] - 1e-2)
            & (q[adr] <= m.jnt_range[limited, 1] + 1e-2)).all()
  if task == "cheetah-run":
    assert np.abs(qvel).max() < 0.5      # Settled for 200 steps, as dm_control.
  assert np.abs(qpos[0] - qpos[1]).max() > 1e-2


@pytest.mark.slow
def test_the_expert_job_trains_on_mjx_with_one_flag(tmp_path):
  out = launching.main("--config", "configs/dmc_expert.py:tiny", "--config.backend=mjx",
                       f"--config.workdir={tmp_path / 'run'}", tmp_path=tmp_path, timeout=900)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "expert return" in out.stdout
  assert (tmp_path / "run" / "expert.npz").exists()
