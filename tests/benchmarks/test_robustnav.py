"""RobustNav protocol: the condition grid, corrupted envs (what changes, seeding), the report."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.benchmarks import robustnav as rn
from vcbench.envs import nav
from vcbench.reports import robustnav as report


def test_table2_grid_matches_the_paper():
  conds = rn.table2()
  assert len(conds) == 19 and conds[0].name == "none"
  assert [c.kind for c in conds].count("vis") == 7 and [c.kind for c in conds].count("dyn") == 5
  assert [c.name for c in conds[13:]] == [
      "defocus_blur+motion_bias_stochastic", "speckle_noise+motion_bias_stochastic",
      "spatter+motion_bias_stochastic", "defocus_blur+motion_drift",
      "speckle_noise+motion_drift", "spatter+motion_drift"]
  assert all(c.severity == 5 for c in conds if c.visual and c.visual not in rn.SINGLE_LEVEL)
  assert len(rn.sweep()) == 20
  for c in conds + rn.sweep():
    assert rn.Condition.parse(c.name, c.severity) == c


def test_condition_errors():
  with pytest.raises(ValueError, match="severity must be 1-5"):
    rn.Condition(visual="spatter", severity=7)
  with pytest.raises(ValueError, match="unknown RobustNav condition 'fog'"):
    rn.Condition.parse("fog", 5)
  with pytest.raises(KeyError, match="unknown dynamics"):
    rn.Condition(dynamics="slippery")


@pytest.fixture(scope="module")
def env():
  return nav.make("pointnav", "val", num_scenes=2, num_episodes=4, height=32, width=32,
                  sensors=("rgb", "depth"))


def _first_obs(env):
  return jax.jit(jax.vmap(env.reset_to))(jnp.arange(4)).obs


def test_visual_corruption_changes_rgb_only_and_is_seeded(env):
  clean = _first_obs(env)
  cond = rn.Condition(visual="speckle_noise", severity=5)
  a = _first_obs(rn.corrupted(env, cond, seed=0))
  b = _first_obs(rn.corrupted(env, cond, seed=0))
  c = _first_obs(rn.corrupted(env, cond, seed=1))
  np.testing.assert_array_equal(a["depth"], clean["depth"])           # depth stays clean
  assert np.mean(np.abs(a["rgb"].astype(float) - clean["rgb"])) > 5
  np.testing.assert_array_equal(a["rgb"], b["rgb"])
  assert not np.array_equal(a["rgb"], c["rgb"])


def test_camera_crack_is_fixed_per_apartment(env):
  crack = rn.corrupted(env, rn.Condition(visual="camera_crack", severity=1))
  clean = jax.vmap(env.reset_to)(jnp.arange(4)).obs["rgb"]
  obs = jax.vmap(crack.reset_to)(jnp.arange(4)).obs["rgb"]
  scenes = np.asarray(env.episodes.scene[:4])
  changed = np.asarray(obs != clean).any(-1)      # the crack's pixels, per episode
  # Same apartment: the same pixels are cracked; the crack differs between apartments.
  same = [(i, j) for i in range(4) for j in range(i + 1, 4) if scenes[i] == scenes[j]]
  diff = [(i, j) for i in range(4) for j in range(i + 1, 4) if scenes[i] != scenes[j]]
  assert same and diff
  for i, j in same:
    assert np.mean(changed[i] == changed[j]) > 0.9
  assert any(np.mean(changed[i] == changed[j]) < 0.99 for i, j in diff)


def test_lower_fov_renders_narrower(env):
  low = rn.corrupted(env, rn.Condition(visual="lower_fov", severity=1))
  assert low.camera.hfov == rn.LOWER_FOV_DEGREES and env.camera.hfov == 79.0
  assert low.visual is None
  assert not np.array_equal(_first_obs(low)["depth"], _first_obs(env)["depth"])
  with pytest.raises(ValueError, match="already has"):
    rn.corrupted(rn.corrupted(env, rn.Condition(dynamics="motion_drift")), rn.Condition())


def _row(task, adaptation, corruption, severity, sr):
  return {"benchmark": "robustnav", "task": task, "adaptation": adaptation,
          "corruption": corruption, "severity": severity, "success": sr, "spl": sr / 2,
          "failed_actions": 1.0, "min_distance": 0.5, "stop_failure_pos": 10.0,
          "stop_failure_neg": None}


def test_report_tables_and_plots_from_rows(tmp_path):
  rows = [_row("pointnav_rgb", "none", "none", 0, 90.0),
          _row("pointnav_rgb", "none", "spatter", 5, 30.0),
          _row("pointnav_rgb", "none", "spatter", 3, 50.0),
          _row("pointnav_rgbd", "none", "spatter+motion_drift", 5, 70.0),
          _row("pointnav_rgb", "pad_rp", "spatter", 5, 40.0)]
  t2 = report.table2_markdown(rows)
  line = next(l for l in t2.splitlines() if "| spatter |" in l)
  assert "30.0 | 15.0" in line and line.rstrip().endswith("– | – |")
  assert "70.0 | 35.0" in next(l for l in t2.splitlines() if "spatter+motion_drift" in l)
  t3 = report.table3_markdown(rows)
  assert "+ PAD rotation prediction | 40.0 | 20.0" in t3
  assert "over ? fixed episodes per cell of the val apartments" in t2
  # Intervals and the recorded split and episode count, where the rows have them.
  rows[1].update({"success_ci95": 4.04, "extra/split": "test", "episodes": 500})
  t2 = report.table2_markdown(rows)
  assert "| 30.0 ± 4.0 | 15.0 |" in next(l for l in t2.splitlines() if "| spatter |" in l)
  assert "over 500 fixed episodes per cell of the test and val apartments" in t2
  sev = report.severity_markdown(rows)
  line = next(l for l in sev.splitlines() if l.startswith("| spatter |"))
  assert line.split("|")[2:8] == [" 90.0 (45.0) ", " – ", " – ", " 50.0 (25.0) ", " – ",
                                  " 30.0 ± 4.0 (15.0) "]
  paths = report.write_report(rows, tmp_path)
  assert all(p.stat().st_size > 0 for p in paths.values()) and len(paths) == 5
  with pytest.raises(ValueError, match="no RobustNav records"):
    report.write_report([{"benchmark": "cortexbench"}], tmp_path)


def test_fine_tuning_starts_from_the_agent_exactly():
  """Zero updates of Table 3's fine-tuning reproduce the clean agent: same params and the
  same per-episode results on the same episodes, whatever env the fine-tuning trains in."""
  from configs import nav as nav_configs
  from vcbench.benchmarks import nav as nav_bench
  config = nav_configs.get_config("tiny_rgbd")
  agent = nav_bench.make_trainer(config, log_fn=False)
  params = agent.init(jax.random.key(3)).params
  train_env = rn.corrupted(nav_bench.make_env(config, "train"), rn.Condition("defocus_blur", 5))
  tuner = rn.finetune_trainer(config, train_env, steps=10_000, lr=1e-4)
  state = tuner.init_from(jax.random.key(0), params)
  jax.tree.map(np.testing.assert_array_equal, jax.device_get(state.params),
               jax.device_get(params))
  val = nav_bench.make_env(config, "val", config.val_episodes)
  clean = rn.evaluate(agent, params, val, batch=config.eval_batch)
  np.testing.assert_equal(rn.evaluate(agent, state.params, val, batch=config.eval_batch), clean)
  np.testing.assert_equal(rn.evaluate(tuner, state.params, val, batch=config.eval_batch), clean)
