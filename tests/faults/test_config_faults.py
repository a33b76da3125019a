"""Values that used to be used silently, or refused only after minutes of work, are refused by
`jobs.resolve` before anything runs, naming the key."""
import os
import shutil

import pytest

from configs import colosseum as col_config
from configs import cortexbench as cb_config
from configs import mae as mae_config
from configs import robustnav as rn_config
from configs import zoo_demo as zoo_config
from vcbench import config as config_lib
from vcbench import jobs
from vcbench.data import frames
from vcbench.models import convert
from vcbench.models import zoo


def _tiny(tmp_path, **overrides):
  c = cb_config.get_config("tiny")
  c.workdir = str(tmp_path / "run")
  c.pvrs = ("random_vit_ti",)
  for k, v in overrides.items():
    setattr(c, k, v)
  return c


@pytest.mark.parametrize("key, value, message", [
    ("tasks", ("drawer-open", "drawer-open"), "'drawer-open' appear(s) more than once"),
    ("suite", "dmc,dmc", "config.suite='dmc,dmc' names a suite more than once"),
    ("pvrs", (), "config.pvrs: expected a non-empty tuple"),
    ("seeds", (), "config.seeds: expected a non-empty tuple"),
    ("seeds", (0, 0), "config.seeds: 0 appear(s) more than once"),
    ("pvrs", ("random_vit_ti", "random_vit_ti"), "'random_vit_ti' appear(s) more than once"),
    ("camera", "top_cap3", "'top_cap3' in config.camera (did you mean top_cap2"),
])
def test_cortexbench_grid_and_camera(tmp_path, key, value, message):
  with pytest.raises(config_lib.ConfigError) as e:
    jobs.resolve(_tiny(tmp_path, **{key: value}))
  assert message in str(e.value)


def test_other_jobs_refuse_empty_grids(tmp_path):
  c = col_config.get_config("tiny")
  c.test_sets = ()
  with pytest.raises(config_lib.ConfigError, match="config.test_sets"):
    jobs.resolve(c)
  c = rn_config.get_config("tiny")
  c.agents, c.adapt.methods = (), ()   # Nothing to evaluate (Table 3 alone needs no agents).
  with pytest.raises(config_lib.ConfigError, match="config.agents"):
    jobs.resolve(c)
  c = zoo_config.get_config("quick")
  c.encoders = ("random_vit_ti", "random_vit_ti")
  with pytest.raises(config_lib.ConfigError, match="config.encoders"):
    jobs.resolve(c)


def test_image_size_must_fit_the_patch(tmp_path):
  with pytest.raises(zoo.InputSizeError, match="input size 40 is not a multiple of its patch "
                     "size 16 .try 32 or 48"):
    jobs.resolve(_tiny(tmp_path, img_size=40))


def _file(name, data):
  def make(directory):
    (directory / name).write_bytes(data)
    return directory / name
  return make


def _dir(directory):
  (directory / "dir.npz").mkdir()
  return directory / "dir.npz"


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.npz", "no such file"),
    (_dir, "a directory"),
    (_file("empty.npz", b""), "empty file"),
    (_file("cut.npz", b"PK\x03\x04abc"), "not a zip"),
    (_file("w.onnx", b"x"), "unknown checkpoint extension"),
])
def test_checkpoint_files_are_checked_before_work(tmp_path, make, message):
  path = make(tmp_path)
  c = _tiny(tmp_path, checkpoints=f"random_vit_ti={path}")
  with pytest.raises(convert.CheckpointError, match=message):
    jobs.resolve(c)
  assert not os.path.exists(tmp_path / "run" / "data")


def test_pretrained_pvr_without_checkpoint_is_refused_before_work(tmp_path):
  with pytest.raises(zoo.MissingCheckpointError, match="vc1_vitb"):
    jobs.resolve(_tiny(tmp_path, pvrs=("vc1_vitb",)))


def test_unwritable_workdir_is_refused(tmp_path):
  blocked = tmp_path / "file"
  blocked.write_text("a file where the workdir would go")
  with pytest.raises(config_lib.ConfigError, match="config.workdir=.* is not a writable"):
    jobs.resolve(_tiny(tmp_path, workdir=str(blocked / "run")))
  c = _tiny(tmp_path, data_dir=str(blocked / "data"))
  with pytest.raises(config_lib.ConfigError, match="config.data_dir"):
    jobs.resolve(c)


def test_mae_tiny_writes_frames_under_its_workdir(tmp_path):
  from vcbench.jobs import mae as mae_job  # pylint: disable=import-outside-toplevel
  c = mae_config.get_config("tiny")
  c.workdir = str(tmp_path / "mae")
  jobs.resolve(c)
  assert mae_job.frames_dir(c) == os.path.join(c.workdir, "frames")


def test_a_disk_too_small_for_the_frames_is_refused_before_work(tmp_path, monkeypatch):
  from vcbench.jobs import mae as mae_job  # pylint: disable=import-outside-toplevel
  c = mae_config.get_config("tiny")
  c.workdir = str(tmp_path / "mae")
  (need, _), = mae_job.disk_estimate(c).values()
  assert need >= c.data.nav_frames * c.data.size ** 2 * 3
  usage = shutil.disk_usage(tmp_path)
  monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=need - 1))
  with pytest.raises(config_lib.ConfigError, match=r"frames at .* needs about .* GB free"):
    jobs.resolve(c)
  for path in [frames.nav_shard(mae_job.frames_dir(c))] + [
      frames.metaworld_shard(mae_job.frames_dir(c), t)
      for t in frames.metaworld_tasks(c.data.metaworld_tasks)]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").close()
  assert mae_job.disk_estimate(c) == {}          # Shards on disk: nothing more to write.
  jobs.resolve(c)
