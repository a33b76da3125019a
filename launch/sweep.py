"""Runs a job's grid as independent pieces, on Ray, on Slurm or in this process.

  python -m launch.sweep --config configs/<file>.py[:variant] [--config.key=value ...] \\
      --backend=local|ray|slurm [--address=auto] [--cpus_per_piece=1] [--gpus_per_piece=0] \\
      [--plugin=my_suites.py]

The same command runs on a laptop (`--backend=ray` starts a local Ray cluster; `--backend=local`
runs the pieces in turn in this process) and on a cluster (`--address=auto` or
`--address=<head>:6379` joins a running one). The job's config and its checks are those of
`launch.main`; the pieces are the job's `plan` (e.g. one per task and PVR). Results reach
`<workdir>/results.jsonl` as pieces finish; an interrupted sweep is resumed by the same command.
`--plugin` imports a module or .py file in the driver and in every worker first (e.g. one that
registers a CortexBench suite). See `vcbench.sweep` for how cells are never lost or duplicated.
"""
from absl import app
from absl import flags
from ml_collections import config_flags

from launch import cli
from vcbench import sweep as sweep_lib
from vcbench.sweep import backends

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "config file, configs/<file>.py[:variant]", lock_config=True)
_BACKEND = flags.DEFINE_enum("backend", "ray", ["local", "ray", "slurm"], "where pieces run")
_PLUGIN = flags.DEFINE_multi_string("plugin", [], "module or .py file imported everywhere first")
_ADDRESS = flags.DEFINE_string("address", None, "Ray: a running cluster ('auto', host:port); "
                               "default: start a local one")
_LOCAL_CPUS = flags.DEFINE_integer("ray_local_cpus", None, "Ray: CPUs of the local cluster")
_CPUS = flags.DEFINE_float("cpus_per_piece", 1.0, "Ray/Slurm: CPUs each piece asks for")
_GPUS = flags.DEFINE_float("gpus_per_piece", 0.0, "Ray/Slurm: GPUs each piece asks for")
_RETRIES = flags.DEFINE_integer("max_retries", 3, "Ray: re-runs of a piece whose worker died")
_SLURM_CLUSTER = flags.DEFINE_string("slurm_cluster", None,
                                     "submitit cluster: default Slurm; 'local' for a dry run")
_PARTITION = flags.DEFINE_string("slurm_partition", "", "Slurm partition")
_TIMEOUT = flags.DEFINE_integer("slurm_timeout_min", 240, "Slurm: minutes per array task")
_MAX_JOBS = flags.DEFINE_integer("slurm_max_jobs", 0, "Slurm: at most this many array tasks "
                                 "(pieces dealt round-robin); 0 = one per piece")


def _backend():
  if _BACKEND.value == "local":
    return backends.local
  if _BACKEND.value == "ray":
    return backends.ray(backends.RayOptions(
        address=_ADDRESS.value, num_cpus=_CPUS.value, num_gpus=_GPUS.value,
        max_retries=_RETRIES.value, local_cpus=_LOCAL_CPUS.value))
  return backends.slurm(backends.SlurmOptions(
      cluster=_SLURM_CLUSTER.value, partition=_PARTITION.value, timeout_min=_TIMEOUT.value,
      cpus_per_task=max(1, round(_CPUS.value)), gpus_per_node=round(_GPUS.value),
      max_jobs=_MAX_JOBS.value))


def main(argv):
  cli.quiet_jax_logs()
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if _CONFIG.value is None:
    raise app.UsageError("--config=configs/<file>.py[:variant] is required")
  sweep_lib.sweep(_CONFIG.value, _backend(), plugins=_PLUGIN.value)


if __name__ == "__main__":
  cli.run(main)
