"""RobustNav on vcbench-nav: clean-trained PointNav agents evaluated under visual, dynamics and
vis+dyn corruptions (Table 2, plus the severity sweep), and the ways to resist them on the RGB
agent (Table 3): PAD adaptation (action / rotation prediction) and task-reward fine-tuning
within the calibration budget, and training with data augmentation.

  python -m launch.main --config configs/robustnav.py            # the full protocol (~1.5 h
        # on 2 CPU cores once the agents exist; trains them first with configs/nav.py if not)
  python -m launch.main --config configs/robustnav.py:table2     # Table 2 only
  python -m launch.main --config configs/robustnav.py:tiny       # seconds-scale smoke run
  python -m launch.robustnav_report --store runs/robustnav/results.jsonl --out runs/robustnav/report

The agents are configs/nav.py variants trained under `nav_workdir` (their best-on-val
checkpoint is used). Every evaluated cell is one result-store record; a re-run skips the cells
already stored and reuses adapted params saved under <workdir>/adapt.
"""
import ml_collections

from vcbench.algos import pad

VARIANTS = ("full", "table2", "tiny")


def get_config(arg=None):
  arg = arg or "full"
  if arg not in VARIANTS:
    raise ValueError(f"configs/robustnav.py: unknown variant {arg!r}; variants: {VARIANTS}")
  c = ml_collections.ConfigDict()
  c.job = "robustnav"
  c.variant = arg
  c.workdir = "runs/robustnav"
  c.nav_workdir = "runs/nav"
  c.agents = ("pointnav_rgb", "pointnav_rgbd")   # configs/nav.py variants
  c.nav_updates = 0             # 0: the nav variant's own num_updates (it must match the run)
  c.val_scenes = 15             # RobustNav: RoboTHOR's 15 val scenes
  c.episodes = 150              # per condition, balanced over the difficulty bins (RobustNav
                                # uses 1100; CPU budget)
  c.eval_batch = 150
  c.seed = 0
  c.sweep = True                # also severities 1-4 of the graded visual corruptions
  c.only = ()                   # condition names to keep (e.g. 'spatter+motion_drift'); (): all
  c.adapt = a = ml_collections.ConfigDict()
  a.agent = "pointnav_rgb"      # Table 3 is about the RGB agent
  a.methods = ("pad_ap", "pad_rp", "finetune", "augment")
  # At severity 5; adaptation runs in each. Spatter, the most damaging, costs ~8 min per 166k
  # adaptation steps on this CPU (its liquid layer is drawn at 224 px whatever the frame size).
  a.corruptions = ("defocus_blur", "lower_fov")
  a.budget = 166_000            # calibration budget, env steps (RobustNav)
  a.augment_steps = 409_600     # PPO steps with augmented frames, from the clean agent
  a.finetune_lr = 2.5e-4
  a.pad = pad.default_config()
  if arg == "table2":
    c.sweep, a.methods = False, ()
  elif arg == "tiny":
    c.agents, a.agent = ("tiny_rgbd",), "tiny_rgbd"
    c.val_scenes, c.episodes, c.eval_batch, c.sweep = 2, 6, 6, False
    c.only = ("none", "spatter", "defocus_blur+motion_drift")
    a.corruptions = ("defocus_blur",)
    a.methods = ("pad_rp", "finetune", "augment")   # pad_ap differs only in its head
    a.budget, a.augment_steps = 256, 64
    a.pad.num_envs, a.pad.rollout_len, a.pad.fit_steps = 4, 16, 128
  return c
