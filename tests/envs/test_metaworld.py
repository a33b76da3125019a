"""The MetaWorld adapter: seeded episodes, pixels, proprio, experts, and the bridge on it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("metaworld")

from vcbench.envs import host, rollout  # noqa: E402
from vcbench.envs.mujoco import metaworld as mw  # noqa: E402

RENDER = mw.RenderConfig(size=48)


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


def test_same_seed_same_episode_and_seeds_differ():
  a, b = mw.MetaWorldSim("drawer-open", RENDER), mw.MetaWorldSim("drawer-open", RENDER)
  try:
    oa, ob = a.reset(7), b.reset(7)
    for k in oa:
      np.testing.assert_array_equal(oa[k], ob[k])
    assert np.abs(a.reset(8)["state"] - ob["state"]).max() > 1e-3
    spec = a.observation_spec()
    assert {k: v[0] for k, v in spec.items()} == {"proprio": (4,), "state": (21,),
                                                  "rgb": (48, 48, 3)}
    assert oa["rgb"].dtype == np.uint8 and oa["rgb"].std() > 5  # A real image, not blank.
    np.testing.assert_allclose(oa["proprio"], oa["state"][:4])
  finally:
    a.close()
    b.close()


@pytest.mark.parametrize("task", mw.CORTEXBENCH_TASKS)
def test_cortexbench_tasks_load_and_have_experts(task):
  sim = mw.MetaWorldSim(task, None)
  try:
    sim.reset(0)
    action = sim.expert_action(mw.expert_policy(task))
    assert action.shape == (4,) and np.abs(action).max() <= 1
    assert "rgb" not in sim.observation_spec()
  finally:
    sim.close()


def test_any_v3_task_loads_by_name_and_bad_names_list_valid_ones():
  assert "pick-place" in mw.task_names() and len(mw.task_names()) == 50
  mw.MetaWorldSim("pick-place", None).close()
  with pytest.raises(ValueError, match="drawer-open"):
    mw.check_task("drawer-opn")
  with pytest.raises(ValueError, match="unknown camera 'nope'.*corner"):
    mw.MetaWorldSim("reach", mw.RenderConfig(size=32, camera="nope"))


def test_model_cameras_render_upright_by_name():
  sim = mw.MetaWorldSim("reach", mw.RenderConfig(size=32, camera="corner"))
  try:
    assert sim.reset(0)["rgb"].shape == (32, 32, 3)
  finally:
    sim.close()


def test_scanned_rollout_equals_python_loop_on_metaworld():
  """Pixels rendered inside the jitted scan (from JAX's callback thread) and in a plain loop
  agree exactly, as do the trajectories."""
  def policy(carry, obs):
    target = obs["state"][:, 4:7] + jnp.array([0.0, 0.0, 0.05])
    a = jnp.clip(10.0 * (target - obs["proprio"][:, :3]), -1, 1)
    return carry, jnp.concatenate([a, -jnp.ones((a.shape[0], 1))], axis=1)

  seeds = np.array([3, 4])
  with host.SimBatch(mw.make_sim("drawer-open", RENDER), 2, horizon=12) as batch:
    env = host.HostEnv(batch)
    fn = jax.jit(lambda s: rollout.rollout(env, policy, (), s, 12, record=("rgb", "state"))[1])
    traj = fn(jnp.asarray(seeds))
    ref = rollout.python_rollout(batch, policy, (), seeds, 12, record=("rgb", "state"))
  np.testing.assert_array_equal(np.asarray(traj.obs["rgb"]), ref.obs["rgb"])
  np.testing.assert_allclose(np.asarray(traj.obs["state"]), ref.obs["state"], atol=1e-6)
  np.testing.assert_allclose(np.asarray(traj.action), ref.action, atol=1e-6)
  assert np.asarray(traj.obs["rgb"]).std() > 5
