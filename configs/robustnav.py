"""RobustNav on vcbench-nav: clean-trained PointNav agents evaluated under visual, dynamics and
vis+dyn corruptions (Table 2, plus the severity sweep), and the ways to resist them on the RGB
agent (Table 3): PAD adaptation (action / rotation prediction) and task-reward fine-tuning
within the calibration budget, and training with data augmentation.

  python -m launch.main --config configs/robustnav.py            # the full protocol: Table 2,
        # the severity sweep and Table 3 (9 adaptations of 166k steps + one augmented
        # training of 410k); not timed end to end with the 64x64 agents. The severity sweep
        # with clean and severity 5 (52 cells, `--config.adapt.methods='()'` and `only` the
        # graded corruptions) took ~2.5 h wall, 15 min of it paused, on 2 CPU cores shared
        # with tests (spatter cells 3-15 min, the others 35-145 s). Table 3 alone
        # (its 4 reference cells + 9 adaptations, `--config.sweep=False --config.only=...`) took
        # 2 h on 2 CPU cores shared with a training and tests; the augmented training 30 min
  python -m launch.main --config configs/robustnav.py:table2     # Table 2 only: 38 cells of
        # 500 episodes, 80 min on 2 CPU cores shared with two trainings (spatter 5-9 min each)
  python -m launch.main --config configs/robustnav.py:tiny       # seconds-scale smoke run
  python -m launch.robustnav_report --store runs/robustnav/results.jsonl --out runs/robustnav/report

The agents are the shipped ones (`vcbench/benchmarks/nav_agents/`, evaluated without
training), or with `--config.agents_from=train` configs/nav.py variants trained under
`nav_workdir` (their best-on-val checkpoint is used); cells use 500 episodes of the 15 test
apartments (`--config.split=val` for the val ones); `--config.extra='("camera_crack:3",)'`
adds conditions of any registered corruption. Every evaluated cell is one result-store record;
a re-run skips the cells already stored and reuses adapted params saved under <workdir>/adapt.

A PVR's agent: `--config.pvr=<zoo name>` (`--config.pvr_checkpoint=<file>` for weights of one's
own; `agents_from=train` only) trains each agent with the PVR as its frozen encoder, under
<nav_workdir>/<pvr>; its cells carry the PVR's name. The variants pvr (Table 2 on
pointnav_rgb_il), pvr_quick (the visual corruptions but spatter on pointnav_rgb_quick) and
pvr_tiny (tiny_rgb) are the leaderboard's (no Table 3: PAD adapts a SimpleCNN):
  python -m launch.main --config configs/robustnav.py:pvr_quick --config.pvr=in1k_mobilenetv2
        # the agent (configs/nav.py:pointnav_rgb_quick, 10.9 min shared) + 7 cells of 100 test
        # episodes, 45-55 s each on 2 CPU cores shared with another job
  python -m launch.main --config configs/robustnav.py:pvr_tiny --config.pvr=random_vit_ti
        # ~75 s (shared cores), for the tests
"""
from vcbench import config as config_lib
from vcbench.jobs import robustnav

VARIANTS = ("full", "table2", "tiny", "pvr", "pvr_quick", "pvr_tiny")
# The visual corruptions of Table 2 but spatter (3-15 min a cell on a CPU): the quick PVR run.
QUICK_VISUAL = ("none", "low_lighting", "motion_blur", "camera_crack", "defocus_blur",
                "speckle_noise", "lower_fov")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = robustnav.default_config()
  c.variant = arg
  a = c.adapt
  if arg == "table2":
    c.sweep, a.methods = False, ()
  elif arg.startswith("pvr"):
    # A PVR's row of the leaderboard: an agent trained with `--config.pvr` as its frozen
    # encoder, under Table 2's conditions, no adaptation.
    c.agents_from, c.sweep, a.methods = "train", False, ()
    # One stage: pointnav_rgb's second stage starts from a SimpleCNN agent's params.
    c.agents = ("pointnav_rgb_il",)
    if arg == "pvr_quick":
      c.agents, c.only = ("pointnav_rgb_quick",), QUICK_VISUAL
      c.episodes, c.eval_batch = 100, 100
    elif arg == "pvr_tiny":
      # tiny_rgb: the PVR encodes the RGB frame (`tiny` sees depth only), at 32 px.
      c.agents, c.split, c.val_scenes, c.episodes, c.eval_batch = ("tiny_rgb",), "val", 2, 6, 6
      c.only = ("none", "defocus_blur", "motion_drift")
  elif arg == "tiny":
    c.agents, a.agent, c.agents_from, c.split = ("tiny_rgbd",), "tiny_rgbd", "train", "val"
    c.val_scenes, c.episodes, c.eval_batch, c.sweep = 2, 6, 6, False
    c.only = ("none", "spatter", "defocus_blur+motion_drift")
    a.corruptions = ("defocus_blur",)
    a.methods = ("pad_rp", "finetune", "augment")   # pad_ap differs only in its head
    a.budget, a.augment_steps = 256, 64
    a.pad.num_envs, a.pad.rollout_len, a.pad.fit_steps = 4, 16, 128
  return c
