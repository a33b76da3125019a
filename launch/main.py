"""Runs one job described by a config file.

  python -m launch.main --config configs/<file>.py[:variant] [--config.key=value ...] [--verbose]

Several processes, one run (multi-host training: every process runs the same command):

  python -m launch.main --config ... --coordinator=auto            # TPU pod slice, Slurm
  python -m launch.main --config ... --coordinator=host0:1234 --num_processes=N --process_id=I

Every process feeds its share of each batch and holds its shards of the state; process 0 alone
logs, holds the workdir's lock and writes what is written once (exports, result records).

The config's `job` key picks what runs: the module vcbench/jobs/<job>.py (see
`vcbench.jobs`). Before any work the job checks the whole config (keys it does not read, values
it cannot use, checkpoint files, writable directories) and takes the workdir's lock; a mistake
is one line naming the key or file (exit status 2, `--verbose` for the traceback). Ctrl-C
exits with 130: what was finished is in the store and a re-run of the same command resumes.
"""
import contextlib
import os
import sys

from absl import app
from absl import flags
from ml_collections import config_flags

from launch import cli
from vcbench import distributed
from vcbench import jobs

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "config file, configs/<file>.py[:variant]", lock_config=True)
_COORDINATOR = flags.DEFINE_string(
    "coordinator", "", "multi-process run: 'auto' (TPU, Slurm, Open MPI) or process 0's "
    "host:port; '' = this process alone")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "with --coordinator=host:port")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "with --coordinator=host:port")
_CPU_DEVICES = flags.DEFINE_integer("cpu_devices", 0, "CPU devices in this process (0: one)")


def main(argv):
  cli.quiet_jax_logs()
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config=configs/<file>.py[:variant] is required")
  try:
    distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value,
                           _CPU_DEVICES.value)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  with contextlib.ExitStack() as stack:
    if not distributed.is_main():   # One log: process 0's (errors still reach stderr).
      sys.stdout = stack.enter_context(open(os.devnull, "w", encoding="utf-8"))
    jobs.resolve(config).run(config)


if __name__ == "__main__":
  cli.run(main)
