"""One command, the given PVRs, four benchmarks, one leaderboard page.

  python -m launch.main --config configs/leaderboard.py:quick \\
      --config.pvrs='("in1k_mobilenetv2","vcbench_vit_ti","random_vit_ti")'
        # every benchmark's quick protocol into runs/leaderboard_quick; the README's
        # "Leaderboard" section has the measured time of each part
  python -m launch.main --config configs/leaderboard.py:quick \\
      --config.benchmarks='("cortexbench","colosseum")'          # a part of it
  python -m launch.main --config configs/leaderboard.py:tiny      # minutes: the tests' run
  python -m launch.main --config configs/leaderboard.py           # the protocols (accelerators)
  python -m launch.serve --dir runs/leaderboard_quick/leaderboard   # or open its index.html

An outside PVR: a checkpoint of a zoo architecture,
  --config.pvrs='("vc1_vitb",)' --config.checkpoints=vc1_vitb=/path/vc1_vitb.pth
or a Flax module of one's own, registered by a plugin file (`zoo.register`; its weights, if
any, a vcbench .npz of its variables, `models.convert.save_variables`):
  --config.plugins='("my_pvr.py",)' --config.pvrs='("my_pvr",)' \\
      --config.checkpoints=my_pvr=/path/my_pvr.npz
Each row of the page shows the code version, the config hashes and the checkpoint's sha256.

Variants (`:arg`), each running the same-named variant of every benchmark's config file
(RobustNav: one PointNav agent per PVR, trained with the PVR as its frozen encoder):
  full (default) CortexBench's four suites, G-VUE's eleven tasks, RobustNav's Table 2
                 conditions on an RGB PointNav agent per PVR (configs/robustnav.py:pvr), The
                 Colosseum's ten tasks x 17 test sets: days on a CPU, hours on an accelerator.
  quick          each benchmark's quick variant (configs/cortexbench.py:quick,
                 configs/gvue.py:quick, configs/robustnav.py:pvr_quick,
                 configs/colosseum.py:quick; their docstrings say what they reduce).
  tiny           each benchmark's tiny variant: an end-to-end check for the tests.
Any benchmark setting can be changed in its section, e.g. `--config.gvue.optim.epochs=10`;
`pvrs`, `checkpoints` and `workdir` are this config's.
"""
from vcbench import config as config_lib
from vcbench.jobs import leaderboard

VARIANTS = ("full", "quick", "tiny")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = leaderboard.default_config(arg)
  c.workdir = "runs/leaderboard" if arg == "full" else f"runs/leaderboard_{arg}"
  if arg == "tiny":
    c.pvrs = ("random_vit_ti",)
  return c
