"""The vcbench-nav job end to end on the tiny variant: train -> checkpoint -> evaluate on val
-> result store; a re-run resumes (no retraining, no re-evaluation); a run started from another
run's params; config refusals."""
import json
import shutil

import jax
import numpy as np
import pytest

import launching
from configs import nav as nav_config
from vcbench import config as config_lib
from vcbench import jobs
from vcbench import metrics
from vcbench import store as store_lib
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import robustnav as rn
from vcbench.jobs import nav as nav_job


@pytest.mark.parametrize("algo", ["ppo", "bc"])
def test_tiny_job_trains_evaluates_stores_and_resumes(tmp_path, algo):
  tensorboard = algo == "ppo"   # on for one learner, off (the default) for the other
  args = ["--config", "configs/nav.py:tiny", f"--config.workdir={tmp_path}",
          f"--config.algo={algo}", f"--config.tensorboard={tensorboard}"]
  first = launching.main(*args, tmp_path=tmp_path)
  assert first.returncode == 0, first.stderr[-3000:]
  assert "| SR | SPL | SR easy | SR medium | SR hard |" in first.stdout
  rows = store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()
  assert len(rows) == 1
  row = rows[0]
  assert (row["benchmark"], row["task"], row["pvr"], row["adaptation"]) == (
      "vcbench-nav", "pointnav", "scratch_cnn", "scratch")
  assert row["episodes"] == 6 and 0 <= row["success"] <= 100 and 0 <= row["spl"] <= 100
  curve = json.loads((tmp_path / "tiny" / "curve.json").read_text())
  assert len(curve["success"]) == 4
  again = launching.main(*args, tmp_path=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "update 1 " not in again.stdout                     # resumed: nothing retrained
  assert len(store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()) == 1
  assert json.loads((tmp_path / "tiny" / "curve.json").read_text()) == curve
  tb = tmp_path / "tiny" / "tb"
  assert tb.exists() == tensorboard
  if tensorboard:   # every update once, after the re-run too; curve.json's values
    scalars = metrics.read_scalars(tb)
    assert [s for s, _ in scalars["train/policy_loss"]] == [1, 2, 3, 4]
    assert [v for _, v in scalars["train/policy_loss"]] == pytest.approx(
        curve["policy_loss"], rel=1e-6)
    assert [s for s, _ in scalars["val/success"]] == [2, 4]


def test_init_from_trains_the_start_run_first_and_starts_from_its_best_params(tmp_path):
  config = nav_config.get_config("tiny")
  config.workdir, config.variant = str(tmp_path), "tiny_continued"
  config.init_from = "configs/nav.py:tiny"
  config.ppo.lr = 1e-9   # so the continued run's params stay where they started
  nav_job.run(config)
  start = nav_job.start_config(config)
  start_params, _ = nav_bench.best_params(start)
  params, _ = nav_bench.best_params(config)
  fresh = nav_bench.make_trainer(config, log_fn=False).init(jax.random.key(0)).params
  gap = lambda a, b: max(jax.tree.leaves(jax.tree.map(lambda x, y: float(np.max(np.abs(x - y))),
                                                       a, b)))
  # Adam moves each weight by ~lr per step: 16 steps at 1e-9 here, 1e-3 in the start run's.
  assert gap(params, start_params) < 1e-6 < 1e-4 < gap(fresh, start_params)
  # The params' training history is both runs up to their selected updates.
  first, second = nav_job.stages(config)
  assert (first["variant"], second["variant"]) == ("tiny", "tiny_continued")
  per_update = config.ppo.num_envs * config.ppo.rollout_len
  assert first["selected_env_steps"] == first["selected_update"] * per_update
  agent = rn.Agent(config, params, nav_bench.best_params(config)[1],
                   steps_before=first["selected_env_steps"])
  assert agent.info["agent_steps"] == (first["selected_update"]
                                       + second["selected_update"]) * per_update
  # The continued run's results depend on the start run's config.
  changed = nav_config.get_config("tiny")
  changed.update(workdir=str(tmp_path), variant="tiny_continued", init_from=config.init_from)
  changed.ppo.lr = 1e-9
  assert nav_job.config_hash(changed) == nav_job.config_hash(config)
  changed.init_from = ""
  assert nav_job.config_hash(changed) != nav_job.config_hash(config)
  # A start run killed half way is finished first, not taken as it is.
  checkpoints = tmp_path / "tiny" / "train" / "checkpoints"
  shutil.rmtree(checkpoints / "4")
  assert runner.updates_done(tmp_path / "tiny" / "train") == 2
  nav_job.trained(start)
  assert runner.updates_done(tmp_path / "tiny" / "train") == 4


@pytest.mark.parametrize("override, message", [
    ({"init_from": "configs/nav.py:tiny_rgbd"}, "trains another network: sensors"),
    ({"init_from": "configs/nav.py:tiny_lidar"}, "init_from.*unknown variant"),
    ({"task": "pointgoal"}, "task"),
    ({"algo": "dagger"}, "dagger.*bc, ppo|ppo, bc"),
    ({"sensors": ("lidar",)}, "sensors"),
    ({"hfov": 200.0}, "hfov"),
    ({"algo": "bc", "bc.aux_coef": 0.5, "policy.aux_categories": 6},
     "aux_goal_visible / aux_categories are recognition heads trained on ObjectNav's in-view "
     "labels, but config.task = 'pointnav' has none"),
    ({"algo": "bc", "bc.aux_coef": 0.5, "policy.aux_depth": 3},
     "aux_depth = 3: the 16x16 frame must split into that many blocks per side"),
])
def test_bad_configs_are_refused_before_work(override, message):
  config = nav_config.get_config("tiny")
  for k, v in override.items():
    *parents, leaf = k.split(".")
    node = config
    for p in parents:
      node = node[p]
    node[leaf] = v
  with pytest.raises((config_lib.ConfigError, ValueError), match=message):
    jobs.resolve(config)


def test_unknown_variant_is_named():
  with pytest.raises(ValueError, match="configs/nav.py: unknown variant 'pointnav_lidar'"):
    nav_config.get_config("pointnav_lidar")
