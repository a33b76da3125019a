"""The CortexBench job end to end on a tiny setting: demos -> embeddings -> BC -> rollouts ->
result store -> report; resume; config refusals. And the learning sanity check (slow)."""
import json

import numpy as np

import pytest

pytest.importorskip("metaworld")

import launching  # noqa: E402
from configs import cortexbench as cortexbench_config  # noqa: E402
from vcbench import config as config_lib  # noqa: E402
from vcbench import jobs  # noqa: E402
from vcbench import metrics  # noqa: E402
from vcbench import store as store_lib  # noqa: E402
from vcbench.jobs import cortexbench as job  # noqa: E402
from vcbench.reports import report as report_lib  # noqa: E402

_launch = launching.main


def test_tiny_end_to_end_writes_records_the_report_reads(tmp_path):
  args = ["--config", "configs/cortexbench.py:tiny", f"--config.workdir={tmp_path / 'run'}",
          "--config.pvrs=('state_oracle', 'random_vit_ti')"]
  first = _launch(*args, tmp_path=tmp_path)
  assert first.returncode == 0, first.stderr[-3000:]
  assert "NOTE: the 'tiny' variant reduces the CortexBench protocol" in first.stdout
  assert "| state_oracle |" in first.stdout and "| random_vit_ti |" in first.stdout
  store = store_lib.ResultStore(tmp_path / "run" / "results.jsonl")
  rows = store.to_rows()
  assert sorted(r["pvr"] for r in rows) == ["random_vit_ti", "state_oracle"]
  for r in rows:
    assert r["task"] == "metaworld/button-press-topdown" and r["benchmark"] == "cortexbench"
    assert 0 <= r["score"] <= 100 and r["episodes"] == 2 and r["extra/protocol"] == "tiny"
    assert [e for e, _ in r["val_curve"]] == [2, 4]
    assert len(r["episode_scores"]) == 2 and np.mean(r["episode_scores"]) == pytest.approx(
        r["score"])
  paths = report_lib.write_report(rows, tmp_path / "report")
  assert "random_vit_ti" in paths["markdown"].read_text()
  assert "95% intervals: paired bootstrap" in first.stdout
  assert (tmp_path / "run" / "report" / "rank_distribution.png").stat().st_size > 1000
  second = _launch(*args, tmp_path=tmp_path)
  assert second.returncode == 0, second.stderr[-3000:]
  assert "(2 already in" in second.stdout
  assert len(store.records()) == 2


def _config(**kw):
  c = cortexbench_config.get_config("tiny")
  for k, v in kw.items():
    setattr(c, k, v)
  return c


@pytest.mark.parametrize("key,value,match", [
    ("tasks", ("drawer-opn",), "drawer-opn.*drawer-open"),
    ("pvrs", ("vc2",), "vc2.*state_oracle"),
    ("suite", "dmcc", "did you mean dmc.*choose from adroit, metaworld, dmc"),
    ("suite", "objectnav", "objectnav.*choose from adroit, metaworld, dmc"),   # Not runnable here.
    ("task_subset", "some", "all, quick, tiny"),
    ("epochs", 0, "epochs"),
    ("checkpoints", "vc1_vitb", "expected 'name=value'"),
    ("checkpoints", "vc1_vitb=/x.pth", "not one of"),
])
def test_bad_values_are_refused_with_the_valid_ones(key, value, match):
  with pytest.raises(config_lib.ConfigError, match=match):
    jobs.resolve(_config(**{key: value}))


@pytest.mark.slow
def test_state_oracle_learns_button_press_and_drawer_open(tmp_path):
  """Learning sanity: the state oracle reaches >= 80% test success on
  button-press-topdown and drawer-open under the full BC protocol (25 demos, 100 epochs,
  validation every 5 epochs, 25 test episodes), one seed. ~3 min on 2 CPU cores."""
  out = _launch("--config", "configs/cortexbench.py", f"--config.workdir={tmp_path / 'run'}",
                "--config.tasks=('button-press-topdown', 'drawer-open')",
                "--config.pvrs=('state_oracle',)", "--config.seeds=(0,)", tmp_path=tmp_path,
                timeout=1800)
  assert out.returncode == 0, out.stderr[-3000:]
  rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  scores = {r["task"]: r["score"] for r in rows}
  print(json.dumps(scores))
  assert len(scores) == 2 and min(scores.values()) >= 80, scores


def test_growing_the_sweep_keeps_the_cells_already_done():
  base = cortexbench_config.get_config("tiny")
  grown = cortexbench_config.get_config("tiny")
  grown.seeds, grown.pvrs = (0, 1, 2), ("state_oracle", "random_vit_s")
  grown.workdir, grown.num_workers = "/elsewhere", 2
  assert job.config_hash(base) == job.config_hash(grown)
  changed = cortexbench_config.get_config("tiny")
  changed.epochs = 5
  assert job.config_hash(changed) != job.config_hash(base)


def test_a_suite_added_from_test_code_runs_through_the_job_with_a_return_score(tmp_path):
  """A new suite is one simulator file and one suite entry: the point mass, scored by return,
  registered here, goes through demos -> embeddings -> BC -> rollouts -> store -> report."""
  from vcbench.benchmarks import cortexbench  # pylint: disable=import-outside-toplevel
  from vcbench.envs import pointmass  # pylint: disable=import-outside-toplevel
  suite = cortexbench.Suite("pointmass", "Point mass", ("reach",), num_demos=4, eval_episodes=3,
                            horizon=12, metric="return/10", available=True,
                            make_sim=pointmass.make_sim, expert=pointmass.expert,
                            state_dim=pointmass.STATE_DIM)
  config = cortexbench_config.get_config("tiny")
  config.suite, config.tasks, config.horizon = "pointmass", ("reach",), 12
  config.pvrs = ("state_oracle", "random_vit_ti")
  config.render_size, config.img_size = 16, 32
  config.workdir = str(tmp_path / "run")
  config.tensorboard = True
  with cortexbench.SUITES.temporarily("pointmass", suite):
    text = jobs.resolve(config).run(config)
    rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
    assert "Point mass" in text and "| state_oracle |" in text
  assert sorted(r["pvr"] for r in rows) == ["random_vit_ti", "state_oracle"]
  for r in rows:
    assert r["task"] == "pointmass/reach" and r["episodes"] == config.test_episodes
    assert r["score"] == pytest.approx(r["mean_return"] / 10) and r["mean_return"] < 0
    assert r["mean_length"] == config.horizon   # Return-scored: no episode stops at success.
  demos = list((tmp_path / "run" / "data" / "pointmass" / "reach").glob("demos-*.json"))
  meta = json.loads(demos[0].read_text())["meta"]
  assert meta["attempts"] == config.num_demos and meta["lengths"] == [12] * config.num_demos
  assert all(ret < 0 for ret in meta["returns"])    # Every expert episode is kept.
  for pvr in config.pvrs:   # Each cell's BC curves in TensorBoard: every epoch, each validation.
    scalars = metrics.read_scalars(tmp_path / "run" / "tb" / "reach" / pvr / "seed0")
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, config.epochs + 1))
    assert [s for s, _ in scalars["val/score"]] == list(
        range(config.eval_every, config.epochs + 1, config.eval_every))


def test_tiny_dmc_runs_the_suites_own_protocol_numbers(tmp_path):
  """`--config.suite=dmc` alone switches tasks, camera, demos and scoring to the suite's."""
  args = ["--config", "configs/cortexbench.py:tiny", "--config.suite=dmc",
          f"--config.workdir={tmp_path / 'run'}"]
  out = _launch(*args, tmp_path=tmp_path)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "| DMControl |" in out.stdout
  rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert [r["task"] for r in rows] == ["dmc/reacher-easy"]
  r = rows[0]
  assert r["score"] == pytest.approx(r["mean_return"] / 10) and r["mean_length"] == 30
  assert r["extra/render"]["camera"] == "camera0"
  demos = list((tmp_path / "run" / "data" / "dmc" / "reacher-easy").glob("demos-*.json"))
  meta = json.loads(demos[0].read_text())["meta"]
  assert meta["lengths"] == [500] * 3 and min(meta["returns"]) > 900   # The scripted expert.


@pytest.mark.slow   # Two suites' demos and cells; each suite alone runs in the default tests.
def test_several_suites_run_into_one_store_and_one_report(tmp_path):
  config = _config(suite="dmc,trifinger", workdir=str(tmp_path / "run"))
  config.epochs, config.eval_every = 2, 2
  text = jobs.resolve(config).run(config)
  rows = store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()
  assert sorted(r["task"] for r in rows) == ["dmc/reacher-easy", "trifinger/reach-cube"]
  assert len({r["config_hash"] for r in rows}) == 2     # Each suite's own protocol numbers.
  assert "| DMControl |" in text.replace(" TriFinger |", "") and "TriFinger" in text
  assert "Mean Rank" in text
  with pytest.raises(config_lib.ConfigError, match="several suites"):
    jobs.resolve(_config(suite="dmc,trifinger", tasks=("reacher-easy",)))
  with pytest.raises(config_lib.ConfigError, match="more than once"):
    jobs.resolve(_config(suite="dmc, dmc"))


def test_suite_defaults_fill_only_the_keys_left_empty():
  c = _config(suite="dmc", tasks=(), num_demos=0, test_episodes=0, horizon=0, camera="")
  c.task_subset = "all"
  resolved = job.for_suite(c)
  assert resolved.tasks == ("walker-stand", "walker-walk", "reacher-easy", "cheetah-run",
                            "finger-spin")
  assert (resolved.num_demos, resolved.test_episodes, resolved.horizon, resolved.camera) == (
      100, 10, 500, "camera0")
  c.num_demos, c.task_subset = 7, "quick"
  resolved = job.for_suite(c)
  assert resolved.num_demos == 7 and resolved.tasks == ("reacher-easy", "walker-stand")


def test_per_suite_keys_change_only_their_suite_and_its_hash():
  c = cortexbench_config.get_config("full")
  c.suite, c.task_subset = "metaworld,dmc", "quick"
  before = {n: job.config_hash(c, n) for n in ("metaworld", "dmc")}
  c.per_suite.dmc.horizon = 100
  c.per_suite.adroit.horizon = 50       # A suite not run: ignored.
  job.validate(c)
  assert job.for_suite(c, "dmc").horizon == 100 and job.for_suite(c, "metaworld").horizon == 500
  assert "per_suite" not in job.for_suite(c, "dmc")
  assert job.config_hash(c, "metaworld") == before["metaworld"]
  assert job.config_hash(c, "dmc") != before["dmc"]
  c.per_suite.dmc.horizon = 500         # The suite's own number, spelled out: the same cells.
  assert job.config_hash(c, "dmc") == before["dmc"]
  for key, match in (("horizn", "per_suite.dmc.horizn.*horizon"),
                     ("seeds", "per_suite.dmc.seeds: not a per-suite key")):
    bad = cortexbench_config.get_config("full")
    bad.per_suite.dmc[key] = 1
    with pytest.raises(config_lib.ConfigError, match=match):
      job.validate(bad)


def test_the_quick_variant_runs_four_suites_with_their_quick_tasks():
  c = cortexbench_config.get_config("quick")
  job.validate(c)
  tasks = {n: job.for_suite(c, n).tasks for n in job.suite_names(c)}
  assert tasks == {"metaworld": ("button-press-topdown", "drawer-open"),
                   "dmc": ("reacher-easy", "walker-stand"), "adroit": ("relocate",),
                   "trifinger": ("reach-cube",)}
  assert [job.for_suite(c, n).horizon for n in tasks] == [150, 100, 200, 10]
