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
  assert all(r["pvr"] == "scratch_cnn" for r in rows)   # A SimpleCNN agent's cells.
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


def _pvr_tiny(tmp_path, pvr):
  config = rn_config.get_config("pvr_tiny")
  config.workdir, config.nav_workdir, config.pvr = str(tmp_path), str(tmp_path / "nav"), pvr
  return config


def test_a_pvr_agent_trains_apart_and_its_cells_name_the_pvr(tmp_path):
  """The leaderboard's tiny RobustNav run of one PVR (~1 min): its agent is trained in the PVR's
  own directory with the PVR as its encoder, its cells and sweep pieces carry the PVR; another
  PVR's agent would be another run, in another directory."""
  config = _pvr_tiny(tmp_path, "random_vit_ti")
  config.nav_updates, config.only = 2, ("none", "defocus_blur")
  jobs.resolve(config).run(config)
  nav = robustnav_job.nav_config(config, "tiny_rgb")
  assert nav.workdir == str(tmp_path / "nav" / "random_vit_ti")
  assert nav.policy.encoder == "random_vit_ti" and not nav.policy.finetune_encoder
  assert (tmp_path / "nav" / "random_vit_ti" / "tiny_rgb" / "best" / "validation.json").exists()
  rows = store_lib.ResultStore(tmp_path / "results.jsonl").to_rows()
  assert {(r["task"], r["pvr"], r["adaptation"], r["corruption"]) for r in rows} == {
      ("tiny_rgb", "random_vit_ti", "none", name) for name in config.only}
  nav_rows = store_lib.ResultStore(nav.workdir + "/results.jsonl").to_rows()
  assert [(r["pvr"], r["adaptation"]) for r in nav_rows] == [("random_vit_ti", "frozen")]
  pieces = robustnav_job.plan(config)   # The agent is trained: nothing is trained again.
  assert [p.key for p in pieces] == [("tiny_rgb", "random_vit_ti", n) for n in config.only]
  assert {c.pvr for p in pieces for c in p.cells} == {"random_vit_ti"}
  assert {p.config_hash for p in pieces} == {r["config_hash"] for r in rows}
  other = _pvr_tiny(tmp_path, "random_mobilenetv2")
  assert robustnav_job.nav_config(other, "tiny_rgb").workdir == str(
      tmp_path / "nav" / "random_mobilenetv2")
  assert sorted(p.name for p in (tmp_path / "nav").iterdir()) == ["random_vit_ti"]


class _Agent:
  variant, info = "tiny_rgb", {"agent_update": 4, "agent_val_success": 0.0, "agent_steps": 128}


def test_the_pvr_and_its_checkpoint_enter_the_config_hash_and_the_agents_directory():
  config = rn_config.get_config("pvr_tiny")
  hashes, dirs = {}, {}
  for pvr, checkpoint in (("", ""), ("random_vit_ti", ""), ("random_mobilenetv2", ""),
                          ("random_vit_ti", "a.npz"), ("random_vit_ti", "b.npz")):
    config.pvr, config.pvr_checkpoint = pvr, checkpoint
    hashes[pvr, checkpoint] = robustnav_job.config_hash(config, _Agent())
    dirs[pvr, checkpoint] = robustnav_job.agents_workdir(config)
  assert len(set(hashes.values())) == len(set(dirs.values())) == len(hashes)
  assert dirs["", ""] == config.nav_workdir
  assert dirs["random_vit_ti", ""] == f"{config.nav_workdir}/random_vit_ti"
  assert dirs["random_vit_ti", "a.npz"].startswith(f"{config.nav_workdir}/random_vit_ti@")
  del config["pvr"], config["pvr_checkpoint"]   # A config of before the keys hashes the same.
  assert robustnav_job.config_hash(config, _Agent()) == hashes["", ""]


@pytest.mark.parametrize("variant, overrides, message", [
    ("table2", {"pvr": "random_vit_ti"},
     "config.pvr = 'random_vit_ti'.*must be trained.*agents_from=train"),
    ("pvr_tiny", {"pvr": "no_such_pvr"},
     "'no_such_pvr' in config.pvr.*in1k_mobilenetv2.*random_vit_ti"),
    ("pvr_tiny", {"pvr": "random_vit_ti", "pvr_checkpoint": "/no/such/weights.npz"},
     "config.pvr_checkpoint = '/no/such/weights.npz': no such file"),
    ("pvr_tiny", {"pvr": "", "pvr_checkpoint": "w.npz"}, "config.pvr, which is not set"),
    ("pvr_tiny", {"pvr": "vc1_vitb"}, "'vc1_vitb'.*needs its checkpoint"),
    ("pvr_tiny", {"pvr": "random_vit_ti", "agents": ("tiny",)},
     "encodes RGB frames, but agent 'tiny' observes \\('depth',\\)"),
    ("pvr_tiny", {"pvr": "random_vit_ti", "agents": ("pointnav_rgb",)},
     "agent 'pointnav_rgb' starts from the params of 'configs/nav.py:pointnav_rgb_il'"),
    ("tiny", {"pvr": "random_vit_ti"}, "pad_rp adapt the agent's own SimpleCNN"),
])
def test_bad_pvr_configs_are_refused_before_work(tmp_path, variant, overrides, message):
  config = rn_config.get_config(variant)
  config.workdir, config.nav_workdir = str(tmp_path), str(tmp_path / "nav")
  config.update(overrides)
  with pytest.raises(config_lib.ConfigError, match=message):
    jobs.resolve(config)
  assert not (tmp_path / "nav").exists()
