"""Runs one job described by a config file.

  python -m launch.main --config configs/<file>.py[:variant] [--config.key=value ...] [--verbose]

The config's `job` key picks what runs: the module vcbench/jobs/<job>.py (see
`vcbench.jobs`). Before any work the job checks the whole config (keys it does not read, values
it cannot use, checkpoint files, writable directories) and takes the workdir's lock; a mistake
is one line naming the key or file (exit status 2, `--verbose` for the traceback). Ctrl-C
exits with 130: what was finished is in the store and a re-run of the same command resumes.
"""
from absl import app
from ml_collections import config_flags

from launch import cli
from vcbench import jobs

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "config file, configs/<file>.py[:variant]", lock_config=True)


def main(argv):
  cli.quiet_jax_logs()
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config=configs/<file>.py[:variant] is required")
  jobs.resolve(config).run(config)


if __name__ == "__main__":
  cli.run(main)
