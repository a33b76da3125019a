"""Sweeps: pieces that cover the grid, the same records as one process, harvest after a dead
driver, failures that name their piece, and the Slurm path (submitit's local executor)."""
import json
import pathlib

import pytest

from configs import colosseum as colosseum_config
from configs import cortexbench as cortexbench_config
from vcbench import jobs
from vcbench import store as store_lib
from vcbench import sweep
from vcbench.jobs import colosseum as colosseum_job
from vcbench.jobs import cortexbench as cortexbench_job
from vcbench.sweep import backends
from sweep_grid import PLUGIN, pointmass_config  # pylint: disable=wrong-import-order


def stored(workdir) -> dict:
  """(task, pvr, seed) -> metrics of every record; a duplicate cell fails."""
  out = {}
  for r in store_lib.ResultStore(pathlib.Path(workdir) / "results.jsonl").records():
    key = (r["cell"]["task"], r["cell"]["pvr"], r["cell"]["seed"], r["cell"]["corruption"])
    assert key not in out, f"cell {key} stored twice"
    out[key] = {k: v for k, v in r["metrics"].items() if "second" not in k}   # Not timings.
  return out


def test_cortexbench_plan_covers_the_grid_once_and_keeps_the_hash():
  config = cortexbench_config.get_config("quick")
  pieces = cortexbench_job.plan(config)
  cells = [c for p in pieces for c in p.cells]
  assert len(cells) == len(set(cells))
  n = 0
  for name in cortexbench_job.suite_names(config):
    c = cortexbench_job.for_suite(config, name)
    n += len(c.tasks) * len(c.pvrs) * len(c.seeds)
  assert len(cells) == n and len(pieces) == n // len(config.seeds)
  for piece in pieces:
    sub = sweep.subconfig(config, piece, "/elsewhere")
    assert cortexbench_job.config_hash(sub) == piece.config_hash   # A piece's cells are the run's.
    assert sub.data_dir == "runs/cortexbench_quick/data"           # Caches stay shared.
    assert {c.task.split("/")[1] for c in piece.cells} == set(sub.tasks)


def test_colosseum_plan_has_every_test_set_of_a_task_and_pvr_in_one_piece():
  config = colosseum_config.get_config("full")
  config.pvrs, config.seeds = ("in1k_mobilenetv2", "vcbench_vit_ti"), (0, 1)
  pieces = colosseum_job.plan(config)
  assert len(pieces) == len(config.tasks) * 2
  for piece in pieces:
    assert len(piece.cells) == 2 * len(config.test_sets)
    sub = sweep.subconfig(config, piece, "/elsewhere")
    assert colosseum_job.config_hash(sub) == colosseum_job.config_hash(config)


def test_robustnav_plan_restricts_each_piece_to_its_cells():
  from configs import robustnav as robustnav_config  # pylint: disable=import-outside-toplevel
  from vcbench.jobs import robustnav as rn_job  # pylint: disable=import-outside-toplevel
  config = robustnav_config.get_config("full")
  config.extra = ("camera_crack:3", "spatter:2")
  pieces = rn_job.plan(config)
  cells = [c for p in pieces for c in p.cells]
  assert len(cells) == len(set(cells))
  conds = rn_job.conditions(config)
  table3 = len(config.adapt.corruptions) * 3 + 1 + len(config.adapt.corruptions)
  assert len(cells) == len(config.agents) * len(conds) + table3
  agents = {v: rn_job.agent(config, v) for v in config.agents}
  for piece in pieces:
    sub = sweep.subconfig(config, piece, "/elsewhere")
    assert rn_job.config_hash(sub, agents[piece.key[0]]) == piece.config_hash
    if piece.overrides["agents"]:   # Table 2: exactly its conditions, and no adaptation.
      assert [(c.corruption, c.severity) for c in piece.cells] == [
          (c.name, c.severity) for c in rn_job.conditions(sub)]
      assert not sub.adapt.methods
    else:                           # Table 3: one method, no Table 2 agents.
      assert sub.adapt.methods == (piece.key[1],) and sub.agents == ()
      assert {c.adaptation for c in piece.cells} == {piece.key[1]}
  spatter = [p for p in pieces if p.key == ("pointnav_rgb", "spatter")][0]
  assert sorted(c.severity for c in spatter.cells) == [1, 2, 3, 4, 5]   # sev 2 once.


def test_gvue_plan_has_a_piece_per_task_and_pvr():
  from configs import gvue as gvue_config  # pylint: disable=import-outside-toplevel
  from vcbench.jobs import gvue as gvue_job  # pylint: disable=import-outside-toplevel
  config = gvue_config.get_config("quick")
  pieces = gvue_job.plan(config)
  assert len(pieces) == len(config.tasks) * len(config.pvrs)
  for piece in pieces:
    sub = sweep.subconfig(config, piece, "/elsewhere")
    assert gvue_job.task_hash(sub, piece.key[0]) == piece.config_hash
    assert len(piece.cells) == len(config.seeds)


def test_a_job_without_a_plan_is_refused_naming_the_sweepable_ones():
  from configs import mae as mae_config  # pylint: disable=import-outside-toplevel
  config = mae_config.get_config("tiny")
  with pytest.raises(sweep.SweepError, match="cannot be swept.*cortexbench"):
    sweep.plan(jobs.get(config.job), config)


def test_local_sweep_stores_what_one_process_stores(tmp_path):
  one = pointmass_config(tmp_path / "one")
  jobs.resolve(one).run(one)
  swept = pointmass_config(tmp_path / "swept")
  text = sweep.sweep(swept, backends.local, plugins=[PLUGIN])
  assert "| random_vit_ti |" in text
  assert stored(tmp_path / "swept") == stored(tmp_path / "one")
  assert len(stored(tmp_path / "one")) == 4
  # Each piece ran in its own workdir, and left a note of where.
  note = json.loads((tmp_path / "swept" / "sweep" / "pointmass.reach.state_oracle" /
                     "worker.json").read_text())
  assert note["pid"] > 0
  # A second sweep has nothing to run.
  logged = []
  sweep.sweep(swept, backends.local, plugins=[PLUGIN], log=logged.append)
  assert "0 pieces (0 cells) to run" in logged[0]


def test_cells_a_dead_driver_never_stored_are_harvested_not_recomputed(tmp_path):
  config = pointmass_config(tmp_path / "run", pvrs=("state_oracle",))
  piece = sweep.plan(jobs.resolve(config), config)[0]
  records = sweep.run_piece(config, piece, [PLUGIN])   # A worker finished; its driver died.
  assert len(records) == 2 and not stored(tmp_path / "run")

  def no_backend(*args):
    raise AssertionError(f"nothing should run: {args[1]}")
  logged = []
  sweep.sweep(config, no_backend, plugins=[PLUGIN], log=logged.append)
  assert "stored 2 records" in logged[0]
  assert len(stored(tmp_path / "run")) == 2


def test_a_failed_piece_is_named_and_the_others_are_kept(tmp_path):
  config = pointmass_config(tmp_path / "run")

  def half_fails(config, pieces, plugins):
    for piece in pieces:
      if piece.key[-1] == "random_vit_ti":
        yield piece, RuntimeError("out of memory")
      else:
        yield piece, sweep.run_piece(config, piece, plugins)
  with pytest.raises(sweep.SweepError, match=r"2 cells of 1 pieces.*random_vit_ti: RuntimeError"):
    sweep.sweep(config, half_fails, plugins=[PLUGIN])
  assert {k[1] for k in stored(tmp_path / "run")} == {"state_oracle"}


def test_deal_gives_every_piece_to_one_group():
  pieces = list(range(7))
  for k in (0, 1, 3, 7, 20):
    groups = backends.deal(pieces, k)
    assert sorted(p for g in groups for p in g) == pieces
    assert len(groups) == (7 if k in (0, 20) else k) and all(groups)
  assert backends.deal(pieces, 3) == [[0, 3, 6], [1, 4], [2, 5]]


def test_slurm_backend_writes_one_file_per_piece_merged_on_read(tmp_path):
  pytest.importorskip("submitit")
  config = pointmass_config(tmp_path / "run")
  run = backends.slurm(backends.SlurmOptions(cluster="local", timeout_min=10, max_jobs=1))
  sweep.sweep(config, run, plugins=[PLUGIN])
  writers = sorted(p.name for p in (tmp_path / "run" / "results.jsonl.d").glob("*.jsonl"))
  assert writers == ["pointmass.reach.random_vit_ti.jsonl", "pointmass.reach.state_oracle.jsonl"]
  assert not (tmp_path / "run" / "results.jsonl").exists()   # The driver appended nothing.
  assert len(stored(tmp_path / "run")) == 4
