"""vcbench-nav behind Gymnasium: the env checker, spaces, SAME_STEP autoreset (equal to the
nav env's own auto-reset), seeding, registration, and bad actions named by their space."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from vcbench import errors  # noqa: E402
from vcbench.envs import gym as nav_gym  # noqa: E402
from vcbench.envs import nav  # noqa: E402
from vcbench.envs.nav import env as nav_env  # noqa: E402

# Tiny pools: building a scene pool and its episodes is most of these tests' time.
SMALL = dict(height=16, width=16, num_scenes=2, num_episodes=8)


@pytest.fixture(scope="module")
def single():
  env = gymnasium.make("vcbench/PointNav-v0", **SMALL)
  yield env
  env.close()


@pytest.fixture(scope="module")
def vec():
  envs = gymnasium.make_vec("vcbench/PointNav-v0", num_envs=3, max_steps=4, **SMALL)
  yield envs
  envs.close()


def test_the_single_env_passes_the_gymnasium_env_checker_without_warnings(single):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    check_env(single.unwrapped)
  assert [str(w.message) for w in caught] == []


def test_registration_gives_the_nav_faces_for_make_and_make_vec(single, vec):
  assert isinstance(single.unwrapped, nav_gym.NavGymEnv)
  assert isinstance(vec, nav_gym.NavVectorEnv) and vec.num_envs == 3
  for name in ("PointNav", "ObjectNav", "ImageNav"):
    spec = gymnasium.spec(f"vcbench/{name}-v0")
    assert spec.vector_entry_point.endswith(":NavVectorEnv")
    assert spec.kwargs["task"] == nav_gym.TASK_IDS[name]


def test_pointnav_spaces_follow_the_sensors(single, vec):
  space = single.observation_space
  assert set(space.spaces) == {"rgb", "depth", "gps_compass"}
  assert space["rgb"].shape == (16, 16, 3) and space["rgb"].dtype == np.uint8
  assert space["depth"].shape == (16, 16, 1) and space["depth"].dtype == np.float32
  assert single.action_space == gymnasium.spaces.Discrete(len(nav_env.ACTIONS))
  assert vec.observation_space["rgb"].shape == (3, 16, 16, 3)
  assert vec.single_observation_space == space
  assert vec.action_space == gymnasium.spaces.MultiDiscrete([4, 4, 4])


@pytest.mark.parametrize("task,sensors,goal_key,split", [
    ("ObjectNav", ("rgb",), "objectgoal", "train"), ("ImageNav", ("depth",), "goal_rgb", "val")])
def test_objectnav_and_imagenav_observations_lie_in_their_spaces(task, sensors, goal_key, split):
  env = gymnasium.make(f"vcbench/{task}-v0", sensors=sensors, height=8, width=8, split=split,
                       num_scenes=1, num_episodes=4)
  np.testing.assert_array_equal(env.unwrapped.nav.scenes.wall, nav.scene_pool(split, 1).wall)
  obs, _ = env.reset(seed=0)
  assert set(obs) == {*sensors, goal_key}
  assert env.observation_space.contains(obs)
  obs, *_ = env.step(nav_env.ROTATE_LEFT)
  assert env.observation_space.contains(obs)


def test_the_same_seed_gives_the_same_observations(single, vec):
  def run(seed):
    obs, _ = single.reset(seed=seed)
    frames = [obs]
    for a in (nav_env.MOVE_AHEAD, nav_env.ROTATE_RIGHT, nav_env.MOVE_AHEAD):
      frames.append(single.step(a)[0])
    return frames
  first, again, other = run(7), run(7), run(8)
  for a, b in zip(first, again):
    for k in a:
      np.testing.assert_array_equal(a[k], b[k], err_msg=k)
  assert any(not np.array_equal(a["rgb"], b["rgb"]) for a, b in zip(first, other))
  obs1, _ = vec.reset(seed=3)
  obs2, _ = vec.reset(seed=[3, 4, 5])   # an int seed gives env i the seed + i
  np.testing.assert_array_equal(obs1["gps_compass"], obs2["gps_compass"])
  after_seed = [vec.reset()[0]["gps_compass"] for _ in range(2)]
  vec.reset(seed=3)
  np.testing.assert_array_equal(vec.reset()[0]["gps_compass"], after_seed[0])
  assert not np.array_equal(*after_seed)


def test_end_terminates_and_the_step_limit_truncates(single):
  single.reset(seed=0)
  *_, terminated, truncated, info = single.step(nav_env.END)
  assert terminated and not truncated and info["episode_length"] == 1
  env = gymnasium.make("vcbench/PointNav-v0", max_steps=2, **SMALL)
  env.reset(seed=0)
  flags = [env.step(nav_env.ROTATE_LEFT)[2:4] for _ in range(2)]
  assert flags == [(False, False), (False, True)]


def test_vector_autoreset_is_same_step_and_matches_the_nav_env_own_auto_reset(vec):
  assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
  obs, _ = vec.reset(seed=11)
  # The reference: the functional env with its built-in auto-reset, from the same start.
  ref_env, ref = vec.nav.replace(auto_reset=True), vec.state
  step = jax.jit(jax.vmap(ref_env.step))
  actions = [[0, 1, 3], [1, 2, 0], [0, 0, 1], [2, 1, 0], [0, 3, 1], [1, 1, 1]]
  ends = []
  for t, a in enumerate(actions):
    obs, reward, terminated, truncated, info = vec.step(np.array(a))
    ref = step(ref, jnp.asarray(a))
    for k in obs:   # after a done, both show the next episode's first frame
      np.testing.assert_array_equal(obs[k], np.asarray(ref.obs[k]), err_msg=f"{k} at {t}")
    np.testing.assert_allclose(reward, np.asarray(ref.reward), rtol=1e-6)
    done = np.asarray(ref.done)
    np.testing.assert_array_equal(terminated | truncated, done)
    np.testing.assert_array_equal(terminated, done & (np.array(a) == nav_env.END))
    if done.any():
      np.testing.assert_array_equal(info["_final_obs"], done)
      np.testing.assert_array_equal(info["final_info"]["_success"], done)
      np.testing.assert_array_equal(info["final_info"]["episode_length"][done],
                                    np.asarray(ref.metrics["episode_length"])[done])
      # The final frame is the finished episode's, not the new one's.
      for i in np.flatnonzero(done):
        assert not np.array_equal(info["final_obs"][i]["gps_compass"], obs["gps_compass"][i])
        assert vec.single_observation_space.contains(info["final_obs"][i])
      assert all(info["final_obs"][i] is None for i in np.flatnonzero(~done))
      ends.append((t, tuple(np.flatnonzero(done))))
    else:
      assert info == {}
  assert ends[0] == (0, (2,))                      # END at the first step terminates
  assert (3, (0, 1)) in ends                       # max_steps=4 truncates the others


def test_reset_can_start_a_given_episode_of_the_set(single):
  first, _ = single.reset(seed=1, options={"episode": 5})
  again, _ = single.reset(seed=2, options={"episode": 5})
  np.testing.assert_array_equal(first["gps_compass"], again["gps_compass"])
  with pytest.raises(ValueError, match=r"episode index in \[0, 8\)"):
    single.reset(options={"episode": 8})


@pytest.mark.parametrize("actions,named", [
    (np.array([0, 1]), "shape (3,)"), (np.array([0.0, 1.0, 2.0]), "integers"),
    (np.array([0, 4, 1]), "[0, 4, 1] are not in"),
    (np.array([[0, 1, 2]]), "shape (3,)")])
def test_a_bad_action_batch_is_a_user_error_naming_the_space(vec, actions, named):
  vec.reset(seed=0)
  with pytest.raises(nav_gym.ActionError, match="action space MultiDiscrete") as info:
    vec.step(actions)
  assert named in str(info.value)
  assert isinstance(info.value, errors.UserError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("action", [4, -1, 1.5, "0"])
def test_an_action_outside_the_single_space_is_a_user_error(single, action):
  single.reset(seed=0)
  with pytest.raises(nav_gym.ActionError, match=r"action space Discrete\(4\)"):
    single.unwrapped.step(action)


def test_gymnasium_episode_statistics_read_the_declared_mode_right(vec):
  envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(vec)
  envs.reset(seed=2)
  checked = 0
  for a in ([0, 3, 1], [1, 0, 3], [0, 0, 0], [3, 1, 2], [2, 2, 2]):
    *_, infos = envs.step(np.array(a))
    for i in np.flatnonzero(infos.get("_final_info", [])):
      final = infos["final_info"]
      assert infos["episode"]["l"][i] == final["episode_length"][i]
      assert infos["episode"]["r"][i] == pytest.approx(final["episode_return"][i], abs=1e-5)
      checked += 1
  assert checked >= 4
