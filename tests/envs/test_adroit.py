"""The Adroit adapter: seeded episodes, one layout for both tasks, pixels, DAPG success counting,
the experts, and the CortexBench job on the adroit suite."""
import sys
import types

import numpy as np
import pytest

pytest.importorskip("gymnasium_robotics")

from vcbench.envs import host  # noqa: E402
from vcbench.envs.core import RenderConfig  # noqa: E402
from vcbench.envs.mujoco import adroit, adroit_experts  # noqa: E402

RENDER = RenderConfig(size=48, camera="vil_camera")
PEN_SEEDS = [1, 5, 7]


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


@pytest.mark.parametrize("task", ["pen", "relocate"])
def test_same_seed_same_episode_and_seeds_differ(task):
  a, b = adroit.AdroitSim(task, RENDER), adroit.AdroitSim(task, RENDER)
  try:
    oa, ob = a.reset(7), b.reset(7)
    for k in oa:
      np.testing.assert_array_equal(oa[k], ob[k])
    action = np.random.default_rng(0).uniform(-1, 1, adroit.ACTION_DIM)
    for _ in range(3):   # Same actions from the same seed: the same trajectory.
      sa, sb = a.step(action), b.step(action)
    np.testing.assert_array_equal(sa[0]["state"], sb[0]["state"])
    assert np.abs(a.reset(8)["state"] - ob["state"]).max() > 1e-3
  finally:
    a.close()
    b.close()


def test_both_tasks_share_shapes_and_dtypes():
  specs = {}
  for task in adroit.task_names():
    sim = adroit.AdroitSim(task, RENDER)
    try:
      obs = sim.reset(0)
      specs[task] = sim.observation_spec()
      assert sim.action_dim == adroit.ACTION_DIM == 30
      for k, (shape, dtype) in specs[task].items():
        assert obs[k].shape == shape and obs[k].dtype == dtype, k
      assert specs[task]["state"][0] == (adroit.STATE_DIM,) and specs[task]["rgb"][0] == (48, 48, 3)
    finally:
      sim.close()
  assert specs["pen"] == specs["relocate"]


def test_proprio_is_eai_vcs_joint_positions_and_state_the_full_observation():
  for task, native_obs, arm in (("pen", 45, False), ("relocate", 39, True)):
    sim = adroit.AdroitSim(task, None)
    try:
      obs = sim.reset(3)
      raw = np.asarray(sim._raw_obs, np.float32)   # pylint: disable=protected-access
      assert raw.shape == (native_obs,)
      np.testing.assert_array_equal(obs["state"][:native_obs], raw)
      assert not obs["state"][native_obs:].any()
      qpos = sim.env.data.qpos.astype(np.float32)
      if arm:
        np.testing.assert_array_equal(obs["proprio"], qpos[:30])
      else:   # The pen hand has no arm: its 24 joints sit in the hand's slots.
        np.testing.assert_array_equal(obs["proprio"][6:], qpos[:24])
        assert not obs["proprio"][:6].any()
    finally:
      sim.close()


def test_pen_ignores_the_arm_entries_of_the_action():
  a, b = adroit.AdroitSim("pen", None), adroit.AdroitSim("pen", None)
  try:
    a.reset(1), b.reset(1)
    action = np.random.default_rng(1).uniform(-1, 1, adroit.ACTION_DIM)
    other = action.copy()
    other[:6] = -other[:6]
    np.testing.assert_array_equal(a.step(action)[0]["state"], b.step(other)[0]["state"])
  finally:
    a.close()
    b.close()


def test_vil_camera_renders_a_real_image_and_bad_names_list_valid_ones():
  sim = adroit.AdroitSim("relocate", RENDER)
  try:
    img = sim.reset(0)["rgb"]
    assert img.dtype == np.uint8 and img.std() > 5   # Not blank.
    # Upright: the table (bright) fills the lower rows, the dark background the top ones.
    assert img[-8:].mean() > img[:8].mean() + 20
  finally:
    sim.close()
  assert "vil_camera" in adroit.camera_names("pen")
  with pytest.raises(ValueError, match="unknown Adroit camera 'top_cap2'.*vil_camera"):
    adroit.AdroitSim("pen", RenderConfig(size=32, camera="top_cap2"))
  with pytest.raises(ValueError, match=r"unknown Adroit task 'hammer'.*\['pen', 'relocate'\]"):
    adroit.AdroitSim("hammer", None)
  with pytest.raises(ValueError, match="30-d action"):
    adroit.AdroitSim("pen", None).step(np.zeros(24))


def test_a_missing_gymnasium_robotics_names_the_install_command(monkeypatch):
  monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)   # `import` raises ImportError.
  with pytest.raises(ImportError, match=r"gymnasium-robotics.*pip install -e \.\[adroit\]"):
    adroit.AdroitSim("pen", None)


def _hold_relocate_ball_at_target(sim: adroit.AdroitSim):
  """Puts the ball on the target (a privileged edit of the simulator's state) so every step
  that follows achieves the goal."""
  model, data = sim.env.model, sim.env.data
  target = data.site_xpos[model.site("target").id].copy()
  model.opt.gravity[:] = 0.0   # The ball floats where it is put.
  sim.env.set_state(np.r_[data.qpos[:30], target - model.body("Object").pos, 0, 0, 0],
                    np.zeros(model.nv))


def test_success_counts_goal_steps_as_dapg_not_the_per_step_flag():
  """DAPG: success once the goal was achieved on more than 25 steps. A per-step flag would
  say success at the first goal step; the count says it at the 26th, and stays."""
  sim = adroit.AdroitSim("relocate", None)
  try:
    sim.reset(0)
    _hold_relocate_ball_at_target(sim)
    flags = []
    for _ in range(30):
      _, _, terminal, info = sim.step(np.zeros(adroit.ACTION_DIM))
      assert info["goal_achieved"] and not terminal
      flags.append(info["success"])
    assert flags == [False] * 25 + [True] * 5
    assert sim.goal_steps == 30
  finally:
    sim.close()


def test_episodes_end_at_dapgs_lengths_and_a_dropped_pen_ends_one():
  for task, length in (("pen", 100), ("relocate", 200)):
    sim = adroit.AdroitSim(task, None)
    try:
      sim.reset(0)
      terminals = [sim.step(np.zeros(adroit.ACTION_DIM))[2] for _ in range(length)]
      assert terminals == [False] * (length - 1) + [True], task
    finally:
      sim.close()
  sim = adroit.AdroitSim("pen", None)
  try:
    sim.reset(0)
    data = sim.env.data
    qpos = data.qpos.copy()
    qpos[24] += 0.2   # The pen's first slide, along -z in the world: below the drop height.
    sim.env.set_state(qpos, data.qvel * 0)
    assert data.xpos[sim.env.model.body("Object").id][2] < adroit.PEN_DROP_HEIGHT
    assert sim.step(np.zeros(adroit.ACTION_DIM))[2]
  finally:
    sim.close()


def _expert_successes(task: str, seeds) -> list[bool]:
  sim, policy = adroit.AdroitSim(task, None), adroit_experts.expert(task)
  out = []
  try:
    for seed in seeds:
      obs, done, info = sim.reset(seed), False, {}
      while not done:
        obs, _, done, info = sim.step(policy(sim, obs))
      out.append(info["success"])
  finally:
    sim.close()
  return out


def test_relocate_expert_succeeds_and_replays_exactly():
  assert _expert_successes("relocate", [0, 1, 2]) == [True, True, True]
  runs = []
  for _ in range(2):
    sim, policy = adroit.AdroitSim("relocate", None), adroit_experts.expert("relocate")
    obs, actions = sim.reset(5), []
    for _ in range(40):
      actions.append(policy(sim, obs))
      obs = sim.step(actions[-1])[0]
    sim.close()
    runs.append(np.stack(actions))
  np.testing.assert_array_equal(*runs)
  assert runs[0].shape == (40, 30) and np.abs(runs[0]).max() <= 1


def test_pen_expert_plans_on_its_own_copy_and_replays_exactly():
  """The MPC's rollouts leave the simulator's state as it was; its noise comes from the
  episode's seed, so the same seed gives the same actions; the arm entries stay 0."""
  runs = []
  for _ in range(2):
    sim, policy = adroit.AdroitSim("pen", None), adroit_experts.expert("pen")
    try:
      obs, actions = sim.reset(4), []
      for _ in range(3):
        before = (sim.env.data.qpos.copy(), sim.env.data.qvel.copy(), sim.env.data.time)
        actions.append(policy(sim, obs))
        np.testing.assert_array_equal(sim.env.data.qpos, before[0])
        np.testing.assert_array_equal(sim.env.data.qvel, before[1])
        assert sim.env.data.time == before[2]
        obs = sim.step(actions[-1])[0]
    finally:
      sim.close()
    runs.append(np.stack(actions))
  np.testing.assert_array_equal(*runs)
  assert not runs[0][:, :6].any() and np.abs(runs[0]).max() <= 1 and runs[0].std() > 0


@pytest.mark.slow
def test_pen_expert_succeeds():
  """The MPC expert on 3 seeds where the 100-seed measurement (launch/bench/adroit_experts.py)
  saw it succeed: a regression check, not its success rate. 25-70 s on 2 shared CPU cores."""
  assert _expert_successes("pen", PEN_SEEDS) == [True] * len(PEN_SEEDS)


def test_the_two_tasks_share_one_evaluator_batch():
  """The BC track moves one compiled rollout from task to task (`HostEnv.rebind`): it needs
  the same shapes in both."""
  pen = host.SimBatch(adroit.make_sim("pen", None, 200), 2, horizon=200)
  env = host.HostEnv(pen)
  env.rebind(host.SimBatch(adroit.make_sim("relocate", None, 200), 2, horizon=200)).close()
  env.close()


def test_adroit_suite_runs_through_the_cortexbench_job(tmp_path):
  """demos (relocate's expert) -> state oracle BC -> rollouts -> store -> report."""
  from configs import cortexbench as cortexbench_config  # noqa: PLC0415
  from vcbench import jobs  # noqa: PLC0415
  from vcbench import store as store_lib  # noqa: PLC0415
  config = cortexbench_config.get_config("tiny")
  config.suite, config.num_demos = "adroit", 2   # Task (the first quick one) and camera: the
  config.workdir = str(tmp_path / "run")          # suite's.
  text = jobs.resolve(config).run(config)
  rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert "Adroit" in text and "| state_oracle |" in text
  assert [r["task"] for r in rows] == ["adroit/relocate"]
  assert rows[0]["episodes"] == config.test_episodes and 0 <= rows[0]["score"] <= 100
  demos = list((tmp_path / "run" / "data" / "adroit" / "relocate").glob("demos-*.npz"))
  arrays = np.load(demos[0])
  assert arrays["actions"].shape[1] == 30 and arrays["state"].shape[1] == adroit.STATE_DIM


def test_the_job_tries_twice_as_many_seeds_as_adroits_100_demos(monkeypatch):
  """100 demos from the default 100 seeds would need an expert that never fails; MetaWorld's
  25 keep the default (and their demo cache keys). The suite's defaults and expert version
  reach the demo config."""
  from configs import cortexbench as cortexbench_config  # noqa: PLC0415
  from vcbench.benchmarks import cortexbench  # noqa: PLC0415
  from vcbench.data import demos as demos_lib  # noqa: PLC0415
  from vcbench.jobs import cortexbench as job  # noqa: PLC0415
  asked = []
  monkeypatch.setattr(demos_lib, "load_or_generate",
                      lambda root, cfg, source: asked.append(cfg) or types.SimpleNamespace(
                          num_episodes=0, actions=(), meta={"expert_success_rate": 0.0,
                                                            "attempts": 0}))
  for suite, num_demos, attempts in (("adroit", 0, 200), ("metaworld", 0, 100),
                                     ("adroit", 30, 100)):
    config = cortexbench_config.get_config()
    config.suite, config.num_demos = suite, num_demos   # 0: the suite's (100, 25).
    config = job.for_suite(config)
    job.Track(config, cortexbench.suite(suite)).demos(config.tasks[0])
    assert asked[-1].max_attempts == attempts and asked[-1].num_demos == config.num_demos



def test_the_suite_entry_matches_the_adapter():
  from vcbench.benchmarks import cortexbench  # noqa: PLC0415
  suite = cortexbench.suite("adroit")
  assert suite.available and suite.all_tasks() == ["pen", "relocate"]
  assert (suite.num_demos, suite.eval_episodes, suite.horizon, suite.metric) == (100, 25, 200,
                                                                                 "success")
  assert suite.state_width("pen") == suite.state_width("relocate") == adroit.STATE_DIM
  assert suite.camera == "vil_camera" and suite.camera in suite.cameras("relocate")
  assert suite.version().startswith("gymnasium-robotics-")
  assert adroit_experts.version("pen") != adroit_experts.version("relocate")
  assert suite.demo_source("relocate", None, 200).version.endswith(
      adroit_experts.version("relocate"))
