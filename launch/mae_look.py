"""Look at a trained MAE: a PNG of reconstructions and attention maps (VC-1 paper, Figure 8).

  python -m launch.mae_look --workdir=runs/mae_vcbench_vit_ti \\
      --config=configs/mae.py:vcbench_vit_ti --frames=PATH.npy[,PATH2.npy] --n=6 \\
      --out=mae_look.png --seed=0
  python -m launch.mae_look --encoder_only=vc1_vitb:vc1_vitb.pth --frames=PATH.npy --n=6 \\
      --out=vc1_attention.png

Restores the MAE's parameters from the latest checkpoint in <workdir>/ckpt (the config gives
the architecture; --workdir defaults to the config's), picks --n frames spread over the given
frame shards (.npy from `vcbench.data.frames`, or image folders), centre-resizes them with the
encoder's zoo preprocessing at the config's img_size, masks them with noise drawn from --seed
at the config's mask ratio, and writes one row per frame: original | masked | reconstruction |
reconstruction with the visible patches pasted back | last-block CLS attention. With
--encoder_only=ZOO_NAME[:CHECKPOINT] it draws only originals and attention maps, for any zoo
ViT at its own input size. Prints the PNG's path.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
from absl import logging
from launch import cli
from ml_collections import config_flags

from vcbench.viz import mae_look


def define_flags() -> None:
  """The command line's flags; defined only when run as a program, so that importing this
  module (tests, notebooks) never clashes with another launch module's flags."""
  config_flags.DEFINE_config_file("config", None, "the MAE config file (configs/mae.py:VARIANT)"
                                  "; gives the architecture", lock_config=True)
  flags.DEFINE_string("workdir", "", "the MAE run's workdir (default: the config's)")
  flags.DEFINE_list("frames", [], "comma-separated frame shards (.npy) or image folders")
  flags.DEFINE_integer("n", 6, "frames shown, spread over the shards")
  flags.DEFINE_string("out", "mae_look.png", "the PNG to write")
  flags.DEFINE_integer("seed", 0, "seed of the mask noise")
  flags.DEFINE_string("encoder_only", "", "ZOO_NAME[:CHECKPOINT]: only originals and "
                      "attention maps of this zoo ViT (no MAE, no --config)")


def _mae_config(config):
  """The MAE part of a configs/mae.py config (or an MAE config itself)."""
  return config.mae if "mae" in config else config


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  f = flags.FLAGS
  try:
    if f.encoder_only:
      path = mae_look.run_encoder_only(f.encoder_only, f.frames, f.n, f.out)
    elif f.config is None:
      raise ValueError("mae_look: give --config=configs/mae.py:VARIANT (or --encoder_only)")
    else:
      workdir = f.workdir or f.config.get("workdir", "")
      if not workdir:
        raise ValueError("mae_look: give --workdir (the config names none)")
      path = mae_look.run(_mae_config(f.config), workdir, f.frames, f.n, f.out, f.seed)
  except (ValueError, FileNotFoundError) as e:  # A bad flag value: say which, no traceback.
    raise app.UsageError(str(e)) from e
  print(path)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
