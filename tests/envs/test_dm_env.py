"""dm_env environments behind the host bridge (`DmEnvSim`): a MuJoCo slider written against
the dm_env API here, and a dm_control suite task where dm_control is installed."""
import functools
import types

import jax.numpy as jnp
import numpy as np
import pytest

dm_env = pytest.importorskip("dm_env")
mujoco = pytest.importorskip("mujoco")

from dm_env import specs  # noqa: E402

from vcbench.envs import dm_env_adapter, host  # noqa: E402

_XML = """
<mujoco>
  <worldbody>
    <light pos="0 0 2"/>
    <geom type="plane" size="1 1 .1" rgba=".6 .7 .8 1"/>
    <body name="ball" pos="0 0 .1">
      <joint name="x" type="slide" axis="1 0 0" damping=".1"/>
      <geom type="sphere" size=".1" rgba="1 .2 .1 1"/>
    </body>
    <camera name="top" pos="0 0 1.5"/>
  </worldbody>
  <actuator><motor joint="x" ctrlrange="-1 1" ctrllimited="true"/></actuator>
</mujoco>
"""


class Slider(dm_env.Environment):
  """A ball on a rail; reward -|x|; 20 steps. `reseedable`: seeded like a dm_control task."""

  def __init__(self, seed: int, reseedable: bool = True):
    self.model = mujoco.MjModel.from_xml_string(_XML)
    self.data = mujoco.MjData(self.model)
    random = np.random.RandomState(seed)
    self.task = types.SimpleNamespace(random=random) if reseedable else None
    self._random, self._t, self._renderer = random, 0, None

  def reset(self):
    mujoco.mj_resetData(self.model, self.data)
    self.data.qpos[0] = self._random.uniform(-0.5, 0.5)
    mujoco.mj_forward(self.model, self.data)
    self._t = 0
    return dm_env.restart(self._observation())

  def step(self, action):
    self.data.ctrl[:] = action
    for _ in range(5):
      mujoco.mj_step(self.model, self.data)
    self._t += 1
    reward = -abs(float(self.data.qpos[0]))
    if self._t >= 20:
      return dm_env.truncation(reward, self._observation())
    return dm_env.transition(reward, self._observation())

  def _observation(self):
    return {"position": self.data.qpos.copy(), "velocity": self.data.qvel.copy()}

  def observation_spec(self):
    return {"position": specs.Array((1,), np.float64, "position"),
            "velocity": specs.Array((1,), np.float64, "velocity")}

  def action_spec(self):
    return specs.BoundedArray((1,), np.float64, -1.0, 1.0, "force")

  def render(self, size):
    if self._renderer is None:
      self._renderer = mujoco.Renderer(self.model, size, size)
    self._renderer.update_scene(self.data, camera="top")
    return self._renderer.render()

  def close(self):
    if self._renderer is not None:
      self._renderer.close()


def _render(env, size):
  return env.render(size)


def _sim(reseedable=True, size=16):
  return dm_env_adapter.DmEnvSim(functools.partial(Slider, reseedable=reseedable),
                                 image_size=size, render=_render)


@pytest.mark.parametrize("reseedable", [True, False])
def test_a_dm_env_is_a_host_sim_whose_seed_fixes_the_episode(reseedable):
  sim = _sim(reseedable)
  try:
    assert sim.action_dim == 1
    assert sim.observation_spec() == {"rgb": ((16, 16, 3), np.uint8),
                                      "proprio": ((2,), np.float32), "state": ((2,), np.float32)}
    env = sim.env
    first = sim.reset(5)
    assert (sim.env is env) == reseedable   # dm_control tasks are reseeded, not rebuilt
    assert first["rgb"].shape == (16, 16, 3) and first["rgb"].std() > 0
    again = sim.reset(5)
    for k in first:
      np.testing.assert_array_equal(first[k], again[k], err_msg=k)
    assert sim.reset(6)["state"][0] != first["state"][0]
  finally:
    sim.close()


def test_dm_env_steps_clip_actions_and_end_at_the_last_timestep():
  sim = _sim()
  try:
    start = sim.reset(0)["state"][0]
    obs, reward, terminal, info = sim.step(np.array([50.0]))   # clipped to the spec's +1
    assert obs["state"][1] > 0 and reward == pytest.approx(-abs(obs["state"][0]))
    assert not terminal and info == {"success": False} and obs["state"][0] > start
    ends = [sim.step(np.zeros(1))[2] for _ in range(19)]
    assert ends == [False] * 18 + [True]
  finally:
    sim.close()


def test_host_env_rolls_out_a_dm_env_from_jitted_code():
  env = host.HostEnv(host.SimBatch(functools.partial(_sim, True, 8), 2, horizon=3))
  try:
    state = env.reset(jnp.array([0, 1]))
    for _ in range(3):
      state = env.step(state, jnp.ones((2, 1)))
    assert state.obs["rgb"].shape == (2, 8, 8, 3)
    assert np.asarray(state.done).all() and (np.asarray(state.reward) < 0).all()
  finally:
    env.close()


def test_a_dm_control_suite_task_renders_its_pixels():
  pytest.importorskip("dm_control")
  sim = dm_env_adapter.make_sim("cartpole-swingup", types.SimpleNamespace(size=32))()
  try:
    first = sim.reset(1)
    assert first["rgb"].shape == (32, 32, 3) and first["rgb"].std() > 0
    assert sim.observation_spec()["state"] == ((5,), np.float32)
    np.testing.assert_array_equal(first["state"], sim.reset(1)["state"])
    _, reward, terminal, _ = sim.step(np.zeros(1))
    assert 0.0 <= reward <= 1.0 and not terminal
  finally:
    sim.close()
