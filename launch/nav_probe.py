"""Is a trained navigation policy looking? Probes the checkpoint a `nav` job chose.

  python -m launch.nav_probe --config configs/nav.py:objectnav_bc --config.workdir=runs/nav
      [--config.key=value ...: the same overrides the job ran with] [--steps 60] [--envs 32]

Prints, for the job's selected (best-on-val) params and for a fresh initialisation, the
`vcbench.benchmarks.nav_probe` figures: mean |x| of the visual features over the first 16 val
episodes' first views, the softmax's std across those views (~0: the policy does not look), and
its agreement with the shortest-path expert along --envs teacher-forced train episodes of
--steps steps. This is how the README's ObjectNav diagnosis was measured.
"""
from __future__ import annotations

import pathlib

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
import jax
from launch import cli
from ml_collections import config_flags

from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import nav_probe
from vcbench.jobs import nav as nav_job

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/nav.py:variant")
_STEPS = flags.DEFINE_integer("steps", 60, "teacher-forced steps per episode")
_ENVS = flags.DEFINE_integer("envs", 32, "train episodes for the expert agreement")


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None or config.policy.encoder != "cnn":
    raise app.UsageError("--config=configs/nav.py:<variant> with the SimpleCNN encoder is required")
  trainer = nav_bench.make_trainer(config)
  best = nav_job.selection(config, pathlib.Path(config.workdir) / config.variant / "best")
  if best.best is None:
    raise SystemExit(f"no validated checkpoint under {best.directory}: run the job first")
  init = trainer.init(jax.random.key(config.seed)).params
  trained = best.best_state(jax.eval_shape(lambda: init))
  val = nav_bench.make_env(config, "val", config.val_episodes)
  train = nav_bench.make_env(config, "train")   # auto-reset: finished episodes restart
  for name, params in (("init", init), (f"update {best.best['update']}", trained)):
    magnitude, spread = nav_probe.visual_stats(trainer, params, val)
    agree = nav_probe.expert_agreement(trainer, params, train, _ENVS.value, _STEPS.value)
    print(f"{name:>11}: visual mean |x| {magnitude:.3g}, softmax std across views "
          f"{spread:.2g}, expert agreement (teacher forced) {agree:.3f}", flush=True)


if __name__ == "__main__":
  cli.run(main)
