"""The Colosseum job end to end on the tiny variant: expert check -> demos -> embeddings -> BC
-> every test set -> result store -> the report reads it; a re-run redoes nothing; refusals."""
import math

import pytest

pytest.importorskip("metaworld")

import launching  # noqa: E402
from configs import colosseum as colosseum_config  # noqa: E402
from vcbench import config as config_lib  # noqa: E402
from vcbench import jobs  # noqa: E402
from vcbench import store as store_lib  # noqa: E402
from vcbench.benchmarks import colosseum as col  # noqa: E402
from vcbench.jobs import colosseum as job  # noqa: E402
from vcbench.jobs import grid as grid_lib  # noqa: E402

_run = launching.run


def test_tiny_sweep_writes_records_the_report_reads(tmp_path):
  args = ["--config", "configs/colosseum.py:tiny", f"--config.workdir={tmp_path / 'run'}"]
  first = _run("launch.main", *args, tmp_path=tmp_path)
  assert first.returncode == 0, first.stderr[-3000:]
  store = store_lib.ResultStore(tmp_path / "run" / "results.jsonl")
  rows = store.to_rows()
  config = colosseum_config.get_config("tiny")
  evaluated = [r for r in rows if r["benchmark"] == col.BENCHMARK]
  expert = [r for r in rows if r["benchmark"] == col.EXPERT_BENCHMARK]
  assert {r["corruption"] for r in evaluated} == set(config.test_sets)
  assert {r["pvr"] for r in evaluated} == {"random_vit_ti", "state_oracle"}
  assert {r["corruption"] for r in expert} == set(config.test_sets) - {"MO_Size"}
  by_set = {r["corruption"]: r for r in evaluated if r["pvr"] == "random_vit_ti"}
  oracle = {r["corruption"]: r for r in evaluated if r["pvr"] == "state_oracle"}
  # The state oracle sees no pixels: a visual factor's episodes are its clean ones.
  assert oracle["MO_Color"]["score"] == oracle[col.NONE]["score"]
  assert oracle["MO_Color"]["mean_length"] == oracle[col.NONE]["mean_length"]
  # MO_Size does not apply to button-press-topdown: stored as excluded, with the reason.
  assert math.isnan(by_set["MO_Size"]["score"] if by_set["MO_Size"]["score"] is not None
                    else math.nan)
  assert "part of the button box" in by_set["MO_Size"]["extra/excluded"]
  for name in (col.NONE, col.ALL, "MO_Color"):
    assert by_set[name]["episodes"] == config.test_episodes and 0 <= by_set[name]["score"] <= 100
  assert "| button-press-topdown |" in first.stdout
  again = _run("launch.main", *args, tmp_path=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "BC on" not in again.stdout                 # every cell was stored
  assert len(store_lib.ResultStore(tmp_path / "run" / "results.jsonl").to_rows()) == len(rows)
  report = _run("launch.colosseum_report", f"--store={tmp_path / 'run' / 'results.jsonl'}",
                f"--out={tmp_path / 'report'}", tmp_path=tmp_path, timeout=300)
  assert report.returncode == 0, report.stderr[-3000:]
  assert "| button-press-topdown |" in report.stdout
  for name in ("tables.md", "expert.md", "percent_change.png", "polar.png", "comparison.md",
               "comparison.png"):
    assert (tmp_path / "report" / name).stat().st_size > 0


def test_gallery_draws_every_test_set(tmp_path):
  out = tmp_path / "gallery.png"
  done = _run("launch.colosseum_gallery", f"--out={out}", "--size=32",
              "--tasks=drawer-open", tmp_path=tmp_path, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  from PIL import Image  # noqa: PLC0415
  with Image.open(out) as im:
    assert im.size[0] > len(col.TEST_SETS) * 96 and im.size[1] > 96
  bad = _run("launch.colosseum_gallery", f"--out={out}", "--tasks=stack-cups",
             tmp_path=tmp_path, timeout=120)
  assert bad.returncode != 0 and "unknown tasks ['stack-cups']" in bad.stderr


@pytest.mark.parametrize("key, value, message", [
    ("tasks", ("stack-cups",), "stack-cups"),
    ("test_sets", ("MO_Colour",), "MO_Colour"),
    ("expert_min_success", 1.5, "a rate in"),
    ("expert_rule", "lenient", "lenient"),
    ("camera", "corner", "corner"),
    ("task_horizons", "hammer=0", "positive integer"),
    ("task_horizons", "stack-cups=300", "stack-cups"),
    ("eval_overlap", "maybe", "maybe"),
])
def test_bad_configs_are_refused_before_work(key, value, message):
  config = colosseum_config.get_config("tiny")
  config[key] = value
  with pytest.raises(config_lib.ConfigError, match=message):
    jobs.resolve(config)


@pytest.mark.slow  # A benchmark script's smoke run (~25 s); the tiny sweep covers the job itself.
def test_speed_bench_runs_the_evaluation_path(tmp_path):
  done = _run("launch.bench.colosseum", "--pvr=random_vit_ti", "--render=32", "--img=32",
              "--tasks=drawer-open", "--episodes=1", "--horizon=3", "--envs=4", "--workers=0",
              f"--data_dir={tmp_path / 'data'}", tmp_path=tmp_path, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  applicable = sum(1 for t in col.TEST_SETS
                   if t in (col.NONE, col.ALL) or not col.inapplicable("drawer-open", t))
  for mode in ("batches", "stream", "overlap"):
    assert f"drawer-open / {mode}: {applicable} episodes" in done.stdout
  assert "same episodes: True" in done.stdout
  assert f"10 tasks x {len(col.FACTORS)} factors x 25 episodes at" in done.stdout


@pytest.mark.parametrize("rule", col.EXPERT_RULES)
def test_only_factors_are_excluded_by_the_expert_check(tmp_path, rule):
  """A stored expert rate below the bar excludes a factor, never the baselines (no
  perturbation, all perturbations); inapplicable factors carry their own reason. The relative
  rule's bar is 90% of the clean expert's rate (here 80% -> 72%), the absolute one's 90%."""
  config = colosseum_config.get_config("tiny")
  config.test_sets = (col.NONE, col.ALL, "MO_Color", "Camera_Pose", "MO_Size")
  config.expert_rule = rule
  grid = grid_lib.Grid("colosseum", tmp_path, job.config_hash(config))
  for test_set, rate in ((col.NONE, 0.8), (col.ALL, 0.5), ("MO_Color", 0.7),
                         ("Camera_Pose", 0.75)):
    grid.record(store_lib.Cell(benchmark=col.EXPERT_BENCHMARK, task="button-press-topdown",
                               pvr="expert", seed=0, corruption=test_set),
                {"success_rate": rate, "episodes": 2})
  out = job.expert_exclusions(config, grid, "button-press-topdown")
  if rule == "relative":
    assert set(out) == {"MO_Color", "MO_Size"}
    assert "70% of 2 episodes (< 72%: 90% of its 80% without perturbation)" in out["MO_Color"]
  else:
    assert set(out) == {"MO_Color", "Camera_Pose", "MO_Size"}
    assert "75% of 2 episodes (< 90%)" in out["Camera_Pose"]
  assert "button box" in out["MO_Size"]
