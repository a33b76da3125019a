"""CortexBench, few-shot BC track (MuJoCo suites: MetaWorld, DMC, Adroit, TriFinger): frozen PVRs
-> cached demo embeddings -> BC (MLP 256x3, flare history of 3 + proprio) -> rollouts -> result
store -> Table-2-style report with bootstrap confidence intervals.

  python -m launch.main --config configs/cortexbench.py:quick   # the README's main job:
        # 4 suites (6 tasks), in1k_mobilenetv2 / vcbench_vit_ti / random_vit_ti / state_oracle;
        # 12 min 46 s alone on 2 CPU cores (README)
  python -m launch.main --config configs/cortexbench.py --config.suite=dmc   # the protocol;
        # hours per cell on a CPU (launch/bench/suite_speed.py), minutes on an accelerator
  python -m launch.main --config configs/cortexbench.py:tiny --config.suite=adroit  # smoke
  python -m launch.main --config configs/cortexbench.py \\
      --config.pvrs='("vc1_vitb",)' --config.checkpoints=vc1_vitb=/path/vc1_vitb.pth

Variants (`:arg`):
  full (default) the CortexBench protocol (`vcbench.jobs.cortexbench.default_config`) on
                 `--config.suite` (MetaWorld unless told; several comma-separated): render 256
                 -> encoder crop 224, 100 epochs, validation every 5 epochs on 10 episodes,
                 best epoch scored on the suite's test episodes, the suite's demos and horizon
                 (MetaWorld 25 demos / 25 test episodes / 500 steps, DMC 100 / 10 / 500,
                 Adroit 100 / 25 / 100-200, TriFinger 100 / 25 / 5-10), 3 seeds.
  quick          the four suites reduced to fit 15 minutes on 2 CPU cores, and says so in its
                 output: each suite's quick tasks (MetaWorld button-press-topdown and
                 drawer-open, DMC reacher-easy and walker-stand, Adroit relocate, TriFinger
                 reach-cube), 10 demos, render 128 -> encoder input 112, 100 epochs with
                 validation at 50 and 100 on 5 episodes, 20 test episodes, horizon 150 on
                 MetaWorld and 100 decisions on DMC (the others keep theirs), 1 seed;
                 simulators in 2 worker processes.
  metaworld_quick the former main job: MetaWorld's five tasks, the quick numbers with 10 test
                 episodes and horizon 150 (the MAE sections of the README use it).
  tiny           seconds-scale smoke run for tests (one task, state oracle).
"""
from vcbench import config as config_lib
from vcbench.jobs import cortexbench

VARIANTS = ("full", "quick", "metaworld_quick", "tiny")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = cortexbench.default_config()
  c.protocol = arg
  if arg in ("quick", "metaworld_quick"):
    c.seeds = (0,)
    c.num_demos = 10
    c.render_size, c.img_size = 128, 112
    c.eval_every = 50
    c.num_workers = 2   # Render in 2 processes while the main one waits on the callback.
  if arg == "quick":
    c.workdir = "runs/cortexbench_quick"
    c.suite = "metaworld,dmc,adroit,trifinger"
    c.task_subset = "quick"   # Each suite's quick tasks (benchmarks/cortexbench.py).
    c.val_episodes, c.test_episodes = 5, 20
    c.eval_envs = 10
    # Episodes cut where the suites run long (Adroit and TriFinger keep their own 200 and 10).
    c.per_suite.metaworld.horizon = 150
    c.per_suite.dmc.horizon = 100
  elif arg == "metaworld_quick":
    c.workdir = "runs/cortexbench_metaworld_quick"
    c.val_episodes, c.test_episodes = 5, 10
    c.horizon = 150
    c.eval_envs = 5
  elif arg == "tiny":
    c.workdir = "runs/cortexbench_tiny"
    c.task_subset = "tiny"    # The suite's first quick task (MetaWorld: button-press-topdown).
    c.pvrs = ("state_oracle",)
    c.seeds = (0,)
    c.num_demos = 3
    c.render_size, c.img_size = 64, 32
    c.epochs, c.eval_every = 4, 2
    c.val_episodes, c.test_episodes = 2, 2
    c.horizon = 30
    c.eval_envs = 2
  return c
