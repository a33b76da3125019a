"""The training jobs' `tensorboard` switch: off by default, and never part of a config hash
(turning it on keeps the cells already in a store and lets a run resume)."""
import pytest

from configs import cortexbench, colosseum, nav
from vcbench.jobs import colosseum as colosseum_job
from vcbench.jobs import cortexbench as cortexbench_job
from vcbench.jobs import mae as mae_job
from vcbench.jobs import nav as nav_job


@pytest.mark.parametrize("job", [nav_job, cortexbench_job, colosseum_job, mae_job])
def test_off_by_default_and_not_hashed(job):
  assert job.default_config().tensorboard is False
  assert "tensorboard" in job.NOT_HASHED


@pytest.mark.parametrize("job,configs,variant", [
    (nav_job, nav, "tiny"), (cortexbench_job, cortexbench, "tiny"),
    (colosseum_job, colosseum, "tiny")])
def test_turning_it_on_changes_no_hash(job, configs, variant):
  config = configs.get_config(variant)
  before = job.config_hash(config)
  config.tensorboard = True
  assert job.config_hash(config) == before


def test_nav_trainer_config_does_not_see_it():
  """The learner's checkpoint fingerprint is built from the algo config, which leaves the job's
  logging switches out: a run resumed with TensorBoard turned on is not refused."""
  from vcbench.benchmarks import nav as nav_bench  # pylint: disable=import-outside-toplevel
  config = nav.get_config("tiny")
  config.tensorboard = True
  assert "tensorboard" not in nav_bench.algo_config(config)
