"""Jobs: what `python -m launch.main --config configs/<file>.py[:variant]` runs.

`config.job` names a module of this package (`vcbench/jobs/<name>.py`), imported on demand (no
import list, so adding a job touches nothing else). A job module defines

  default_config()   the schema: every key the job reads, at its protocol's defaults (the
                     config files in configs/ start from it)
  validate(config)   refuses values it cannot use (ConfigError naming the key), before any work
  run(config)        the job; cells go through the shared grid runner (`grid.py`)
  GRIDS              (optional) the sweep axes: keys that must be non-empty, without repeats
  DIRS               (optional, default ("workdir",)) keys of directories it writes: each must
                     accept a probe file before any work starts
  disk_estimate(config)  (optional) {directory: (bytes, what)}: what the job will write there
                     (stated estimates, of what is not on disk yet); each must be free
  MULTIPROCESS       (optional, default False) True when the job can run as several processes
                     (`launch.main --coordinator`); the others are refused there
  plan(config)       (optional) its grid as pieces for `launch.sweep` (`grid.Slice`)

`resolve(config)` finds the job and checks the config against its schema (keys outside it are
refused: a typo is never a silent default), its grids, its `validate` and its directories;
`Job.run` holds the workdir's lock, so a second job into the same workdir is refused.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import pkgutil
from typing import Any, Callable

import jax

from vcbench import config as config_lib
from vcbench import distributed
from vcbench import files
from vcbench.registry import Registry

_NOT_JOBS = ("grid",)   # Modules here that are shared pieces, not jobs.


def _nothing_to_estimate(config) -> dict:
  del config
  return {}


@dataclasses.dataclass(frozen=True)
class Job:
  name: str
  body: Callable[[Any], Any]
  default_config: Callable[[], Any]
  validate: Callable[[Any], None]
  grids: tuple[str, ...] = ()
  dirs: tuple[str, ...] = ("workdir",)
  disk_estimate: Callable[[Any], dict] = _nothing_to_estimate
  multiprocess: bool = False
  plan: Callable[[Any], list] | None = None   # The job's sweep pieces (`grid.Slice`), if any.

  def check(self, config) -> None:
    """Everything that can be checked before work: keys, grids, the job's own checks, and
    that the directories it writes accept files."""
    if not self.multiprocess and jax.process_count() > 1:
      raise config_lib.ConfigError(
          f"job {self.name!r} runs in one process; of the jobs, "
          f"{', '.join(n for n in names() if get(n).multiprocess)} run as several "
          "(--coordinator); launch.sweep spreads a grid over processes instead")
    config_lib.check_keys(config, self.default_config())
    config_lib.require_grid(config, self.grids)
    self.validate(config)
    for key in self.dirs:
      config_lib.require_writable(config, key)
    for directory, (need, what) in self.disk_estimate(config).items():
      config_lib.require_free_space(directory, need, what)

  def run(self, config):
    """The job, holding its workdir's lock (one writer per workdir; in a multi-process run,
    process 0 holds it for all)."""
    with (files.workdir_lock(config.workdir) if distributed.is_main()
          else contextlib.nullcontext()):
      return self.body(config)


def names() -> list[str]:
  return [m.name for m in pkgutil.iter_modules(__path__)
          if not m.name.startswith("_") and m.name not in _NOT_JOBS]


def get(name: str) -> Job:
  """The job module `name`; an unknown name is refused with the known ones."""
  known = Registry("job")
  for job in names():
    known.register(job)(job)
  module = importlib.import_module(f"{__name__}.{known.get(name)}")
  return Job(name, module.run, module.default_config, module.validate,
             getattr(module, "GRIDS", ()), getattr(module, "DIRS", ("workdir",)),
             getattr(module, "disk_estimate", _nothing_to_estimate),
             getattr(module, "MULTIPROCESS", False), getattr(module, "plan", None))


def resolve(config) -> Job:
  """The job `config.job` names, after checking the config against its schema."""
  if "job" not in config:
    raise config_lib.ConfigError(f"config has no 'job' key; known jobs: {', '.join(names())}")
  try:
    job = get(config.job)
  except KeyError as e:
    raise config_lib.ConfigError(f"config.job: {e}") from None
  job.check(config)
  return job
