"""Runs one job described by a config file.

  python -m launch.main --config configs/<file>.py[:variant] [--config.key=value ...]

The config's `job` key picks what runs: the module vcbench/jobs/<job>.py (see
`vcbench.jobs`); keys the job does not read and values it cannot use are refused with the key
named, before any work starts.
"""
import sys

from absl import app
from absl import logging
from ml_collections import config_flags

from vcbench import config as config_lib
from vcbench import jobs

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "config file, configs/<file>.py[:variant]", lock_config=True)


def main(argv):
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config=configs/<file>.py[:variant] is required")
  try:
    job = jobs.resolve(config)
  except (config_lib.ConfigError, KeyError) as e:
    sys.exit(f"config error: {e}")
  job.run(config)


if __name__ == "__main__":
  app.run(main)
