"""The DeepMind Control adapter: seeded episodes, action repeat, pixels, cameras, experts."""
import json

import numpy as np
import pytest

pytest.importorskip("dm_control")

from vcbench.envs.core import RenderConfig  # noqa: E402
from vcbench.envs.mujoco import dmc, dmc_experts  # noqa: E402

# A shipped SAC expert must reach its task's target return (DrQ/SAC-level; the README lists each
# one's mean over 100 seeds). A task without a shipped expert is refused by the job, naming the
# command that trains one.
TARGETS = {"walker-stand": 900, "walker-walk": 800, "cheetah-run": 550, "finger-spin": 800}
SHIPPED = sorted(p.stem for p in dmc_experts.EXPERTS_DIR.glob("*.npz"))


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


def test_same_seed_same_episode_and_seeds_differ():
  a, b = dmc.DMCSim("walker-walk"), dmc.DMCSim("walker-walk")
  try:
    np.testing.assert_array_equal(a.reset(5)["state"], b.reset(5)["state"])
    action = np.linspace(-1, 1, a.action_dim)
    for _ in range(3):
      oa, ra, _, _ = a.step(action)
      ob, rb, _, _ = b.step(action)
    np.testing.assert_array_equal(oa["state"], ob["state"])
    assert ra == rb
    assert np.abs(a.reset(6)["state"] - b.reset(5)["state"]).max() > 1e-3
  finally:
    a.close()
    b.close()


def test_a_step_repeats_the_action_and_sums_the_rewards_of_dm_control():
  from dm_control import suite
  sim = dmc.DMCSim("cheetah-run", action_repeat=2)
  env = suite.load("cheetah", "run", task_kwargs={"random": 11})
  try:
    sim.reset(11)
    env.reset()
    action = np.full(sim.action_dim, 0.3)
    _, reward, _, _ = sim.step(action)
    expected = sum(env.step(action).reward for _ in range(2))
    assert reward == pytest.approx(expected)
    np.testing.assert_allclose(sim.physics.data.qpos, env.physics.data.qpos)
  finally:
    sim.close()
    env.close()


def test_episode_ends_after_1000_control_steps():
  sim = dmc.DMCSim("reacher-easy", action_repeat=4)
  try:
    sim.reset(0)
    ends = [sim.step(np.zeros(2))[2] for _ in range(dmc.horizon(4))]
    assert dmc.horizon(4) == 250 and ends[-1] and not any(ends[:-1])
  finally:
    sim.close()


def test_the_episode_score_is_return_over_10_and_keeps_its_scale_when_cut():
  from vcbench.benchmarks import cortexbench
  sim = dmc.DMCSim("reacher-easy", action_repeat=4)
  expert = dmc_experts.expert("reacher-easy")
  try:
    obs, rewards, scores = sim.reset(3), [], []
    for _ in range(dmc.horizon(4)):
      obs, reward, _, info = sim.step(expert(sim, obs))
      rewards.append(reward)
      scores.append(info["score"])
    total = sum(rewards)
    assert total > 900
    suite = cortexbench.suite("dmc")
    full = suite.score({"score": np.array([scores[-1]]), "return": np.array([total])})
    assert full == pytest.approx(total / 10)
    # Cut at 50 decisions (200 control steps): the mean reward per control step, not return/10.
    assert scores[49] == pytest.approx(sum(rewards[:50]) / 200) and 0.5 < scores[49] <= 1
  finally:
    sim.close()


@pytest.mark.parametrize("task", dmc.CORTEXBENCH_TASKS)
def test_pixels_come_from_camera_0_and_state_has_the_task_width(task):
  sim = dmc.DMCSim(task, RenderConfig(size=40, camera=dmc.DEFAULT_CAMERA))
  try:
    obs = sim.reset(0)
    assert obs["rgb"].shape == (40, 40, 3) and obs["rgb"].dtype == np.uint8
    assert obs["rgb"].std() > 5   # A real image, not blank.
    assert obs["state"].shape == (dmc.state_dim(task),)
    assert "proprio" not in sim.observation_spec()   # eai-vc: no proprio for DMC.
  finally:
    sim.close()
  model_camera = dmc.camera_names(task)[1]
  named = dmc.DMCSim(task, RenderConfig(size=40, camera=model_camera))
  try:   # `camera0` is the model's first camera under its own name.
    np.testing.assert_array_equal(named.reset(0)["rgb"], obs["rgb"])
  finally:
    named.close()


def test_bad_task_and_camera_names_list_the_valid_ones():
  with pytest.raises(ValueError, match="walker-walk"):
    dmc.DMCSim("walker-wlak")
  with pytest.raises(ValueError, match="valid"):
    dmc.DMCSim("walker-walk", RenderConfig(size=32, camera="top_cap2"))
  with pytest.raises(ValueError, match="action_repeat"):
    dmc.DMCSim("walker-walk", action_repeat=3)


@pytest.mark.parametrize("task", ["reacher-easy", "reacher-hard"])
def test_scripted_reacher_reaches_the_target(task):
  returns = dmc_experts.episode_returns(task, [200_000, 200_001, 200_002])
  assert returns.min() > 900, returns
  assert dmc_experts.episode_returns(task, [200_000], lambda sim, obs: np.zeros(2))[0] < 500


@pytest.mark.parametrize("task", SHIPPED)
def test_shipped_sac_experts_reach_their_targets(task):
  returns = dmc_experts.episode_returns(task, [200_000, 200_001])
  assert returns.mean() >= TARGETS[task], returns
  meta = dmc_experts.policy(task).meta
  assert meta["task"] == task and meta["mean_return"] >= TARGETS[task]


def test_the_numpy_policy_is_the_trained_actor(tmp_path):
  import jax
  import jax.numpy as jnp
  from vcbench.algos import sac
  actor = sac.Actor((16, 16), 3)
  params = actor.init(jax.random.key(0), jnp.zeros((1, 5)))
  path = tmp_path / "x.npz"
  np.savez(path, meta=np.array(json.dumps({"task": "x"})), **sac.actor_arrays(params))
  obs = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
  np.testing.assert_allclose(dmc_experts.MLPPolicy(path)(obs),
                             sac.mean_action(actor, params, obs), rtol=1e-5, atol=1e-6)
  restored = sac.actor_params(sac.actor_arrays(params))
  np.testing.assert_array_equal(sac.mean_action(actor, restored, obs),
                                sac.mean_action(actor, params, obs))


def test_expert_versions_follow_the_expert(tmp_path, monkeypatch):
  monkeypatch.setattr(dmc_experts, "EXPERTS_DIR", tmp_path)
  with pytest.raises(FileNotFoundError, match="configs/dmc_expert.py:walker-walk"):
    dmc_experts.expert("walker-walk")
  path = tmp_path / "walker-walk.npz"
  np.savez(path, meta=np.array("{}"), w=np.zeros(3))
  first = dmc_experts.version("walker-walk")
  np.savez(path, meta=np.array("{}"), w=np.ones(3))
  assert dmc_experts.version("walker-walk") != first   # New parameters: new demo cache key.
  assert dmc_experts.version("reacher-easy").startswith("scripted-reacher")
