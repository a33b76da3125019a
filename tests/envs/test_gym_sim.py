"""Gymnasium envs behind the host bridge (`GymnasiumSim`), and one of them as a CortexBench
suite registered from test code: demos -> embeddings -> BC -> rollouts -> store, scored by
return. InvertedPendulum-v5 renders through MuJoCo (the classic-control renderer needs
pygame, which is not a dependency)."""
import functools
import json
import types

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")   # InvertedPendulum-v5 and its renderer

from configs import cortexbench as cortexbench_config  # noqa: E402
from vcbench import jobs  # noqa: E402
from vcbench import store as store_lib  # noqa: E402
from vcbench.benchmarks import cortexbench  # noqa: E402
from vcbench.envs import gym_sim, host  # noqa: E402

ENV_ID = "InvertedPendulum-v5"


def _sim(size=16):
  return gym_sim.GymnasiumSim(ENV_ID, image_size=size, make_kwargs=dict(width=size, height=size))


def balance(sim, obs):
  """The scripted expert: a linear controller on (cart, angle, cart speed, angular speed)."""
  del sim
  x, theta, xdot, thetadot = obs["state"]
  return np.array([1.0 * x + 10.0 * theta + 0.5 * xdot + 1.0 * thetadot], np.float32)


def test_a_gymnasium_env_is_a_host_sim_with_frames_and_state():
  sim = _sim()
  try:
    assert sim.action_dim == 1
    assert sim.observation_spec() == {"rgb": ((16, 16, 3), np.uint8),
                                      "proprio": ((4,), np.float32), "state": ((4,), np.float32)}
    assert "rgb" not in gym_sim.make_sim(ENV_ID, None)().reset(0)   # state only: no frames
    first, again = sim.reset(3), None
    assert first["rgb"].shape == (16, 16, 3) and first["rgb"].dtype == np.uint8
    assert first["rgb"].std() > 0   # a real picture, not a blank frame
    again = sim.reset(3)
    for k in first:
      np.testing.assert_array_equal(first[k], again[k], err_msg=k)
    assert not np.array_equal(sim.reset(4)["state"], first["state"])
    obs, reward, terminal, info = sim.step(np.array([100.0]))   # clipped to the Box, +3
    assert reward == 1.0 and not terminal and info == {"success": False}
    assert obs["state"][2] > 0
  finally:
    sim.close()


def test_a_falling_pendulum_ends_the_host_episode_before_the_horizon():
  with host.SimBatch(functools.partial(_sim, 8), 2, horizon=200) as batch:
    batch.reset(np.array([0, 1]))
    for _ in range(60):
      _, _, done, _, steps = batch.step(np.full((2, 1), 3.0, np.float32))
    assert done.all() and (steps < 60).all()


def test_a_worker_process_steps_the_same_episodes_as_the_main_one():
  make = gym_sim.make_sim(ENV_ID, types.SimpleNamespace(size=8), width=8, height=8)
  runs = []
  for workers in (0, 1):   # the factory is pickled into a spawned worker
    with host.SimBatch(make, 2, horizon=10, num_workers=workers) as batch:
      obs = batch.reset(np.array([3, 4]))[0]
      states = [obs["state"]]
      for _ in range(5):
        obs = batch.step(np.stack([balance(None, {"state": s}) for s in obs["state"]]))[0]
        states.append(obs["state"])
      runs.append((np.stack(states), obs["rgb"]))
  np.testing.assert_array_equal(runs[0][0], runs[1][0])
  np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_gymnasium_frames_are_resized_to_the_asked_size():
  sim = gym_sim.GymnasiumSim(ENV_ID, image_size=12, make_kwargs=dict(width=40, height=30))
  try:
    assert sim.reset(0)["rgb"].shape == (12, 12, 3)
  finally:
    sim.close()


def test_a_discrete_action_space_is_refused_naming_it():
  with pytest.raises(ValueError, match=r"Discrete\(2\) is not a Box"):
    gym_sim.GymnasiumSim("CartPole-v1")


def test_host_env_rolls_out_a_gymnasium_sim_from_jitted_code():
  env = host.HostEnv(host.SimBatch(functools.partial(_sim, 8), 2, horizon=5))
  try:
    state = env.reset(jnp.array([0, 1]))
    state = env.step(state, jnp.zeros((2, 1)))
    assert state.obs["rgb"].shape == (2, 8, 8, 3)
    np.testing.assert_array_equal(np.asarray(state.reward), [1.0, 1.0])
  finally:
    env.close()


def _make_sim(task, render, horizon):
  del task, horizon
  size = {} if render is None else dict(width=render.size, height=render.size)
  return gym_sim.make_sim(ENV_ID, render, **size)


def test_a_gymnasium_suite_added_from_test_code_runs_through_the_job(tmp_path):
  horizon = 12
  suite = cortexbench.Suite("gympendulum", "Inverted pendulum", ("balance",), num_demos=3,
                            eval_episodes=2, horizon=horizon, metric="return/10",
                            available=True, make_sim=_make_sim, expert=lambda task: balance,
                            state_dim=4)
  config = cortexbench_config.get_config("tiny")
  config.suite, config.tasks, config.horizon = "gympendulum", ("balance",), horizon
  config.pvrs = ("state_oracle", "random_vit_ti")   # a state policy and a pixel policy
  config.render_size, config.img_size = 16, 32
  config.workdir = str(tmp_path / "run")
  with cortexbench.SUITES.temporarily("gympendulum", suite):
    text = jobs.resolve(config).run(config)
    rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert "Inverted pendulum" in text and "| random_vit_ti |" in text
  assert sorted(r["pvr"] for r in rows) == ["random_vit_ti", "state_oracle"]
  for row in rows:
    assert row["task"] == "gympendulum/balance" and row["episodes"] == config.test_episodes
    # +1 per step alive: a return of at most the horizon, scored as return/10.
    assert 0 < row["mean_return"] <= horizon
    assert row["score"] == pytest.approx(row["mean_return"] / 10)
  demos = list((tmp_path / "run" / "data" / "gympendulum" / "balance").glob("demos-*.json"))
  meta = json.loads(demos[0].read_text())["meta"]
  assert meta["returns"] == [horizon] * config.num_demos   # the expert never drops the pole
