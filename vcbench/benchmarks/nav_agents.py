"""Trained vcbench-nav agents that ship with the repository, so that anyone can evaluate (and
corrupt) them without training.

    agent = nav_agents.load("pointnav_rgbd_il")   # its nav config, params and export record
    python -m launch.nav_eval --agent pointnav_rgbd_il --episodes 1000   # re-measures it

An agent is `nav_agents/<name>.npz`: the policy's params (one array per leaf, keys joined with
'/', float32) and `meta`, a JSON object: the nav job config that trained it (`config`), its
config hash, the selected update and its val SR, the env steps and wall time of training, and
the test numbers measured when it was exported (`test`). The nav job writes one with
`--config.export_to=<path>` once its run is done.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import jax
import ml_collections
import numpy as np

from vcbench import files
from vcbench.algos import nav_bc
from vcbench.algos import ppo
from vcbench.algos import recurrent
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.models import convert

DIR = pathlib.Path(__file__).parent / "nav_agents"


@dataclasses.dataclass
class ShippedAgent:
  config: ml_collections.ConfigDict   # the nav job config that trained it
  params: Any
  meta: dict                          # the export record (see the module docstring)
  trainer: Any                        # a `recurrent.Trainer` of its policy (acting, shapes)


def names() -> list[str]:
  return sorted(p.stem for p in DIR.glob("*.npz"))


def path_of(name: str) -> pathlib.Path:
  """A shipped agent's file (`name` without a '/' or '.npz'), or `name` itself as a path."""
  return pathlib.Path(name) if name.endswith(".npz") or "/" in name else DIR / f"{name}.npz"


def export(path, config, params, meta: dict) -> None:
  """Writes the agent file atomically: `params` (a nested dict of arrays) and `meta` + config."""
  flat = {k: np.asarray(v, np.float32) for k, v in convert.flatten_variables(params).items()}
  record = {**meta, "config": config.to_dict()}

  def write(f):
    np.savez(f, meta=np.array(json.dumps(record, sort_keys=True, default=_json)), **flat)
  files.atomic_write(path, write)


def _json(v):
  return list(v) if isinstance(v, tuple) else str(v)


def load(name: str) -> ShippedAgent:
  """The agent `name` (see `names()`) or an agent file; its params checked against the policy
  its config builds (a mismatch names every differing leaf)."""
  path = path_of(name)
  if not path.exists():
    raise FileNotFoundError(f"no nav agent {name!r}: {path} is missing (shipped: {names()})")
  with np.load(path) as z:
    meta = json.loads(str(z["meta"]))
    flat = {k: z[k] for k in z.files if k != "meta"}
  config = runner.with_added_later(ml_collections.ConfigDict(_tuples(meta.pop("config"))),
                                   _TODAYS_FIELDS)
  # The policy does not depend on the env's apartments: a one-episode env builds it quickly.
  trainer = nav_bench.make_trainer(
      config, env=nav_bench.make_env(config, "val", episodes=1, scenes=1), log_fn=False)
  params = convert.unflatten_variables(flat)
  _check_shapes(path, params, jax.eval_shape(lambda: trainer.init(jax.random.key(0)).params))
  return ShippedAgent(config=config, params=params, meta=meta, trainer=trainer)


# The nav job config fields an agent file written before they existed may lack (filled with
# the value that reproduces it, `runner.ADDED_LATER`).
_TODAYS_FIELDS = ml_collections.ConfigDict({
    "policy": recurrent.policy_config(), "bc": nav_bc.default_config(),
    "ppo": ppo.default_config(), "odometry": False})


def _tuples(d):
  """JSON's lists back to the tuples configs hold."""
  if isinstance(d, dict):
    return {k: _tuples(v) for k, v in d.items()}
  return tuple(_tuples(v) for v in d) if isinstance(d, list) else d


def _check_shapes(path, params, abstract) -> None:
  want = {k: v.shape for k, v in convert.flatten_variables(abstract).items()}
  got = {k: v.shape for k, v in convert.flatten_variables(params).items()}
  diff = [f"{k}: file {got.get(k)}, policy {want.get(k)}" for k in sorted(want.keys() | got.keys())
          if got.get(k) != want.get(k)]
  if diff:
    raise ValueError(f"{path}: params do not fit the policy its config builds: "
                     + "; ".join(diff))
