"""The TriFinger adapter (seeded episodes, pixels, eai-vc's scores, the experts, the job on it)
and the per-episode score channel of the host bridge (on a toy simulator, no pybullet)."""
import functools
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.benchmarks import bc_protocol, cortexbench
from vcbench.envs import pointmass
from vcbench.envs import trifinger as tf
from vcbench.models import embedder as embedder_lib

try:
  import trifinger_simulation  # noqa: F401
  HAVE_SIM = True
except ImportError:
  HAVE_SIM = False
needs_sim = pytest.mark.skipif(not HAVE_SIM, reason="pip install -e .[trifinger]")
RENDER = tf.RenderConfig(size=48, camera="camera60")


# -- the score channel, on a toy simulator --------------------------------------------------


class _Scored(pointmass.PointMass):
  """A point mass whose episode ends after 2 + seed % 3 steps, reporting score 0.1 x steps."""

  def reset(self, seed):
    self.length, self.steps = 2 + seed % 3, 0
    return super().reset(seed)

  def step(self, action):
    obs, reward, _, info = super().step(action)
    self.steps += 1
    return obs, reward, self.steps >= self.length, {**info, "score": 0.1 * self.steps}


def _episodes(make_sim, seeds):
  protocol = bc_protocol.Protocol(horizon=6, eval_envs=2, history=1, use_proprio=False,
                                  stop_on_success=False)
  evaluator = bc_protocol.Evaluator(make_sim, protocol)
  emb = embedder_lib.make(embedder_lib.STATE_ORACLE, state_dim=pointmass.STATE_DIM)
  act = lambda policy, x: jnp.zeros((x.shape[0], 2))   # noqa: E731 - a policy that stays.
  try:
    return evaluator.episodes(emb, act, {}, seeds)
  finally:
    evaluator.close()


def test_each_episode_reports_its_last_score_through_the_bridge():
  episodes = _episodes(functools.partial(_Scored, 8), [0, 1, 2])   # 2 envs: one padded batch.
  np.testing.assert_array_equal(episodes["length"], [2, 3, 4])
  np.testing.assert_allclose(episodes["score"], [0.2, 0.3, 0.4], rtol=1e-6)
  assert cortexbench.METRICS.get("score")(episodes) == pytest.approx(30.0)


def test_simulators_without_a_score_report_nan_and_the_score_metric_refuses_them():
  episodes = _episodes(functools.partial(pointmass.PointMass, 8), [0, 1])
  assert np.isnan(episodes["score"]).all() and set(episodes) >= {"success", "length", "return"}
  with pytest.raises(ValueError, match="reports info\\['score'\\].*'success' or 'return/10'"):
    cortexbench.METRICS.get("score")(episodes)


# -- the scores ----------------------------------------------------------------------------


def test_reach_score_is_the_relative_distance_to_the_inscribed_sphere():
  cube = np.array([0.0, 0.0, tf.CUBE_HALF])
  start = cube + np.array([0.0, 0.0, tf.CUBE_HALF + 0.1])     # 10 cm above the sphere.
  assert tf.reach_score(start, start, cube) == 0.0
  assert tf.reach_score(cube + [0, 0, tf.CUBE_HALF + 0.05], start, cube) == pytest.approx(0.5)
  assert tf.reach_score(cube + [tf.CUBE_HALF, 0, 0], start, cube) == 1.0    # On the sphere.
  assert tf.reach_score(cube + [0.3, 0, 0], start, cube) == 0.0              # Clipped.


def test_push_score_is_the_relative_distance_to_the_goal():
  start, goal = np.array([0.05, 0, tf.CUBE_HALF]), np.array([-0.05, 0, tf.CUBE_HALF])
  assert tf.push_score(start, start, goal) == 0.0
  assert tf.push_score(goal, start, goal) == 1.0
  assert tf.push_score(np.array([0.0, 0.03, tf.CUBE_HALF]), start, goal) == pytest.approx(
      1 - np.hypot(0.05, 0.03) / 0.1)
  assert tf.push_score(start + [0.2, 0, 0], start, goal) == 0.0


@needs_sim
def test_push_score_and_the_official_cost_agree_on_the_table():
  """move_cube.evaluate_state (difficulty 1) weighs xy by the arena diameter and z by 10 cm,
  unnormalised: with every point on the table, 1 - cost(cube) / cost(start) is the score;
  a lifted cube costs more than the score says."""
  start, goal = np.array([0.06, -0.02, tf.CUBE_HALF]), np.array([-0.04, 0.05, tf.CUBE_HALF])
  for cube in ([0.0, 0.0, tf.CUBE_HALF], [-0.03, 0.04, tf.CUBE_HALF], goal):
    ratio = tf.official_cost(np.array(cube), goal) / tf.official_cost(start, goal)
    assert 1 - ratio == pytest.approx(tf.push_score(np.array(cube), start, goal), abs=1e-9)
  lifted = goal + [0, 0, 0.01]
  assert tf.official_cost(lifted, goal) == pytest.approx((0.01 / 0.1) / 2)
  assert tf.official_cost(goal, goal) == 0.0


# -- the simulator -------------------------------------------------------------------------


def test_bad_task_and_camera_names_list_the_valid_ones():
  with pytest.raises(ValueError, match="'reach'.*reach-cube.*push-cube"):
    tf.make_sim("reach", None)
  with pytest.raises(ValueError, match="'reach'.*reach-cube"):
    tf.expert("reach")
  with pytest.raises(ValueError, match="unknown trifinger tasks.*push-cube"):
    cortexbench.check_tasks("trifinger", ["push"])
  if HAVE_SIM:
    with pytest.raises(ValueError, match="'top_cap2'.*camera60"):
      tf.TriFingerSim("push-cube", tf.RenderConfig(size=32, camera="top_cap2"))


def test_a_missing_simulator_names_the_package_and_the_install_command(monkeypatch):
  monkeypatch.setitem(sys.modules, "trifinger_simulation", None)   # Makes its import fail.
  with pytest.raises(ImportError, match=r"trifinger-simulation.*pip install -e \.\[trifinger\]"):
    tf.TriFingerSim("push-cube", None)


@needs_sim
def test_same_seed_same_episode_seeds_differ_and_frames_are_real():
  a, b = tf.TriFingerSim("push-cube", RENDER), tf.TriFingerSim("push-cube", RENDER)
  try:
    oa, ob = a.reset(7), b.reset(7)
    for k in oa:
      np.testing.assert_array_equal(oa[k], ob[k])
    action = np.linspace(-1, 1, 9)
    sa, sb = a.step(action)[0], b.step(action)[0]
    for k in sa:
      np.testing.assert_array_equal(sa[k], sb[k])
    assert {k: v[0] for k, v in a.observation_spec().items()} == {
        "proprio": (9,), "state": (tf.STATE_DIM,), "rgb": (48, 48, 3)}
    assert oa["rgb"].dtype == np.uint8 and oa["rgb"].std() > 5   # Not blank.
    np.testing.assert_allclose(oa["proprio"], oa["state"][:9])
    np.testing.assert_allclose(oa["state"][9:12], a.episode["position"], atol=1e-6)
    np.testing.assert_allclose(oa["state"][16:], a.episode["goal"], atol=1e-6)
    other = a.reset(8)["state"]
    assert np.abs(other[9:] - oa["state"][9:]).max() > 1e-3      # Another cube and goal.
    assert np.linalg.norm(a.episode["goal"] - a.episode["position"]) >= tf.MIN_GOAL_DISTANCE
  finally:
    a.close()
    b.close()


@needs_sim
def test_ik_puts_the_fingertips_on_their_targets():
  sim = tf.TriFingerSim("push-cube", None)
  try:
    tips = sim.ik.tips(tf.Q_NOMINAL)
    targets = tips + np.array([[0.01, -0.005, 0.0], [0.0, 0.01, -0.01], [-0.004, 0.0, 0.008]])
    q = sim.ik.solve(targets, tf.Q_NOMINAL)   # One control tick's move is <= 2 mm.
    assert np.abs(sim.ik.tips(q) - targets).max() < 1e-4
  finally:
    sim.close()


@needs_sim
def test_reach_moves_finger_0_only_keeps_the_cube_and_ends_after_5_steps():
  sim = tf.TriFingerSim("reach-cube", None)
  try:
    obs = sim.reset(3)
    tips, cube = obs["proprio"].reshape(3, 3), obs["state"][9:12]
    for step in range(1, 6):
      obs, score, terminal, info = sim.step(np.array([-1, -1, 1] * 3))
      assert terminal == (step == 5) and score == info["score"]
    moved = np.linalg.norm(obs["proprio"].reshape(3, 3) - tips, axis=1)
    assert moved[0] > 0.05 and moved[1:].max() < 0.005, moved
    np.testing.assert_allclose(obs["state"][9:12], cube, atol=1e-6)
  finally:
    sim.close()


@needs_sim
@pytest.mark.parametrize("task", tf.TASKS)
def test_experts_reach_their_targets(task):
  sim = tf.TriFingerSim(task, None)
  policy = tf.expert(task)
  try:
    for seed in range(3):
      obs, steps, terminal = sim.reset(seed), 0, False
      while not terminal:
        obs, _, terminal, info = sim.step(policy(sim, obs))
        steps += 1
      assert steps == tf.EPISODE_STEPS[task]
      # The reach bound is 1 - 1.2 cm / start distance (~0.92); push leaves a few mm.
      assert info["score"] > 0.85 and info["success"], (task, seed, info)
  finally:
    sim.close()


@needs_sim
def test_the_cortexbench_job_runs_the_trifinger_suite_with_the_state_oracle(tmp_path):
  from configs import cortexbench as cortexbench_config  # pylint: disable=import-outside-toplevel
  from vcbench import jobs  # pylint: disable=import-outside-toplevel
  from vcbench import store as store_lib  # pylint: disable=import-outside-toplevel
  config = cortexbench_config.get_config("tiny")
  config.suite, config.tasks, config.camera = "trifinger", ("reach-cube",), "camera60"
  config.horizon = tf.HORIZON
  config.render_size, config.img_size = 32, 32
  config.workdir = str(tmp_path / "run")
  text = jobs.resolve(config).run(config)
  assert "TriFinger" in text and "| state_oracle |" in text
  (row,) = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert row["task"] == "trifinger/reach-cube" and row["episodes"] == config.test_episodes
  assert 0 <= row["score"] <= 100
  assert row["mean_length"] == tf.EPISODE_STEPS["reach-cube"]   # The simulator ends it.


@needs_sim
@pytest.mark.slow
def test_pixel_policies_run_both_tasks_with_rendering_workers(tmp_path):
  """A pixel PVR through the job on both tasks (one evaluator moved from task to task, frames
  rendered in 2 worker processes). ~2 min on 2 CPU cores."""
  from configs import cortexbench as cortexbench_config  # pylint: disable=import-outside-toplevel
  from vcbench import jobs  # pylint: disable=import-outside-toplevel
  from vcbench import store as store_lib  # pylint: disable=import-outside-toplevel
  config = cortexbench_config.get_config("tiny")
  config.suite, config.tasks, config.camera = "trifinger", tf.TASKS, "camera60"
  config.pvrs, config.num_workers, config.horizon = ("random_vit_ti",), 2, tf.HORIZON
  config.render_size, config.img_size = 32, 32
  config.workdir = str(tmp_path / "run")
  jobs.resolve(config).run(config)
  rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert sorted(r["task"] for r in rows) == ["trifinger/push-cube", "trifinger/reach-cube"]
  for r in rows:
    assert 0 <= r["score"] <= 100
    assert r["mean_length"] == tf.EPISODE_STEPS[r["task"].split("/")[1]]
