"""The RobustNav job end to end on the tiny variant: a clean agent is trained, evaluated under
corruptions (one of them registered by the test), adapted (PAD, fine-tune, augmentation) ->
result store -> the report reads it; a re-run redoes nothing; config refusals."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import launching
from configs import robustnav as rn_config
from vcbench import config as config_lib
from vcbench import jobs
from vcbench import store as store_lib
from vcbench.benchmarks import nav_agents
from vcbench.benchmarks import robustnav as rn
from vcbench.jobs import robustnav as robustnav_job
from vcbench.robustness import visual


def _invert(key, image, severity, *, scale):
  """A corruption that only a test registers: severity 1-5 blends towards the negative."""
  del key, scale
  x = image.astype(jnp.float32)
  return jnp.round(x + severity / 5 * (255.0 - 2 * x)).astype(jnp.uint8)


@pytest.mark.slow   # ~7 min on 2 shared cores: the default suite's longest test.
def test_tiny_protocol_writes_records_the_report_reads(tmp_path, capsys):
  """The tiny protocol in this process, with a visual corruption registered by the test (no
  change outside this file) as one more condition."""
  config = rn_config.get_config("tiny")
  config.workdir, config.nav_workdir = str(tmp_path), str(tmp_path / "nav")
  config.extra = ("invert:5",)
  invert = visual.corruption("invert", _invert, deterministic=True, description="negative")
  with visual.CORRUPTIONS.temporarily("invert", invert):
    jobs.resolve(config).run(config)
    rows = store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()
    agent = robustnav_job.agent(config, "tiny_rgbd")
    clean_env = agent.env("val", 2, 2)
    seen = jax.jit(rn.corrupted(clean_env, rn.Condition.parse("invert", 5)).reset_to)(0)
    assert np.array_equal(seen.obs["rgb"], 255 - jax.jit(clean_env.reset_to)(0).obs["rgb"])
    capsys.readouterr()
    jobs.resolve(config).run(config)                  # A re-run redoes nothing.
    out = capsys.readouterr().out
    assert " sev " not in out and "SS loss" not in out, out   # No evaluation, no adaptation.
    assert re.search(r"robustnav tiny_rgbd \[none\]: (\d+) cells \(\1 already in", out), out
  cells = {(r["adaptation"], r["corruption"], r["severity"]) for r in rows}
  clean = {("none", name, 0 if name == "none" else 5) for name in config.only}
  adapted = {(m, "defocus_blur", 5) for m in config.adapt.methods} | {("augment", "none", 0)}
  assert cells == clean | adapted | {("none", "invert", 5)}
  assert all(r["task"] == "tiny_rgbd" and r["episodes"] == 6 for r in rows)
  assert all(k in rows[0] for k in ("stop_failure_pos", "stop_failure_neg", "min_distance"))
  for method in ("pad_rp", "finetune", "augment"):
    assert len(list((tmp_path / "adapt" / "tiny_rgbd").glob(f"*/{method}"))) == 1
  assert len(store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()) == len(rows)
  report = launching.run("launch.robustnav_report", f"--store={tmp_path / 'results.jsonl'}",
                         f"--out={tmp_path / 'report'}", tmp_path=tmp_path, timeout=300)
  assert report.returncode == 0, report.stderr[-3000:]
  assert "| 8 | spatter |" in report.stdout and "+ PAD rotation prediction" in report.stdout
  for name in ("table2.md", "table3.md", "severity.png", "behaviour.png"):
    assert (tmp_path / "report" / name).stat().st_size > 0


@pytest.mark.skipif("pointnav_rgbd" not in nav_agents.names(), reason="no agent shipped")
def test_the_default_job_evaluates_the_shipped_agent_on_test_apartments(tmp_path):
  config = rn_config.get_config("table2")
  config.workdir, config.nav_workdir = str(tmp_path), str(tmp_path / "nav")
  config.agents, config.only, config.sweep = ("pointnav_rgbd",), ("none", "defocus_blur"), False
  config.episodes = config.eval_batch = config.val_scenes = 3
  jobs.resolve(config).run(config)
  rows = store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()
  assert {(r["task"], r["corruption"]) for r in rows} == {("pointnav_rgbd", "none"),
                                                          ("pointnav_rgbd", "defocus_blur")}
  shipped = nav_agents.load("pointnav_rgbd").meta
  # Trained nowhere here: the cells name the shipped agent and every step behind it.
  assert not any((tmp_path / "nav").glob("*"))
  assert all(r["extra/agent_update"] == shipped["selected_update"] for r in rows)
  assert all(r["extra/split"] == "test" and r["episodes"] == 3 for r in rows)
  assert all(r["extra/agent_steps"] == sum(st["selected_env_steps"] for st in shipped["stages"])
             for r in rows)


@pytest.mark.parametrize("key, value, message", [
    ("agents", ("pointnav_lidar",), "agents: configs/nav.py: unknown variant 'pointnav_lidar'"),
    ("only", ("fog",), "unknown RobustNav condition"),
    ("extra", ("fog:3",), "unknown RobustNav condition"),
    ("extra", ("spatter:9",), "severity must be 1-5"),
    ("adapt.methods", ("tent",), "'tent'.*pad_ap"),
    ("agents_from", "zoo", "'zoo' in config.agents_from"),
    ("split", "train", "'train' in config.split"),
])
def test_bad_configs_are_refused_before_work(key, value, message):
  config = rn_config.get_config("tiny")
  if "." in key:
    config.adapt[key.split(".")[1]] = value
  else:
    config[key] = value
  with pytest.raises((config_lib.ConfigError, ValueError), match=message):
    jobs.resolve(config)


def test_shipped_agents_are_named_when_missing():
  config = rn_config.get_config("full")
  config.agents = ("pointnav_lidar",)
  with pytest.raises(config_lib.ConfigError, match="no shipped agent 'pointnav_lidar'.*"
                     "agents_from=train"):
    jobs.resolve(config)


def test_report_cli_names_a_missing_store(tmp_path):
  out = launching.run("launch.robustnav_report", f"--store={tmp_path / 'nope.jsonl'}",
                      f"--out={tmp_path}", tmp_path=tmp_path, timeout=300)
  assert out.returncode != 0 and "does not exist" in out.stderr
