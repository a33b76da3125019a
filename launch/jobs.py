"""The jobs `launch.main` can run, keyed by `config.job`.

A job is a function of its config plus the schema it reads (the defaults of
its canonical config file): keys outside the schema are refused before any
work starts, so a typo never becomes a silent default.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from vcbench import config as config_lib
from vcbench.registry import Registry


def _no_checks(config) -> None:
  del config


@dataclasses.dataclass(frozen=True)
class Job:
  run: Callable[[Any], Any]
  schema: Callable[[], Any]
  validate: Callable[[Any], None] = _no_checks


JOBS = Registry("job")


def register(name: str, schema: Callable[[], Any],
             validate: Callable[[Any], None] = _no_checks):
  def decorator(run):
    JOBS.register(name)(Job(run, schema, validate))
    return run
  return decorator


def resolve(config) -> Job:
  """The job `config.job` names, after checking the config against its schema."""
  if "job" not in config:
    raise config_lib.ConfigError(f"config has no 'job' key; known jobs: "
                                 f"{', '.join(JOBS.names())}")
  job = JOBS.get(config.job)
  config_lib.check_keys(config, job.schema())
  job.validate(config)
  return job


# Job modules register themselves on import.
from launch import nav  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
from launch import cortexbench  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
from launch import colosseum  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
from launch import robustnav  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
from launch import mae  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
from launch import zoo_demo  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
