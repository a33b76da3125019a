"""CortexBench, few-shot BC track (MuJoCo suites; MetaWorld runs here): frozen PVRs -> cached
demo embeddings -> BC (MLP 256x3, flare history of 3 + proprio) -> rollouts -> result store ->
Table-2-style report.

  python -m launch.main --config configs/cortexbench.py:quick   # the README's main job:
        # MetaWorld x5, in1k_mobilenetv2 / vcbench_vit_ti / random_vit_ti / state_oracle;
        # ~11 min on 2 CPU cores
  python -m launch.main --config configs/cortexbench.py         # the paper protocol (below);
        # hours on a CPU, minutes per cell on an accelerator
  python -m launch.main --config configs/cortexbench.py \\
      --config.pvrs='("vc1_vitb",)' --config.checkpoints=vc1_vitb=/path/vc1_vitb.pth

Variants (`:arg`):
  full (default) the CortexBench protocol (`vcbench.jobs.cortexbench.default_config`):
                 25 demos/task, render 256 -> encoder crop 224, 100 epochs, validation every 5
                 epochs on 10 episodes, best epoch scored on 25 test episodes, horizon 500,
                 3 seeds.
  quick          reduced to fit 15 minutes on 2 CPU cores, and says so in its output: 10 demos,
                 render 128 -> encoder input 112, 100 epochs with validation at 50 and 100 on 5
                 episodes, 10 test episodes, horizon 150, 1 seed; simulators in 2 worker
                 processes.
  tiny           seconds-scale smoke run for tests (one task, state oracle).
"""
from vcbench import config as config_lib
from vcbench.jobs import cortexbench

VARIANTS = ("full", "quick", "tiny")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = cortexbench.default_config()
  c.protocol = arg
  if arg == "quick":
    c.workdir = "runs/cortexbench_quick"
    c.seeds = (0,)
    c.num_demos = 10
    c.render_size, c.img_size = 128, 112
    c.eval_every = 50
    c.val_episodes, c.test_episodes = 5, 10
    c.horizon = 150
    c.eval_envs = 5
    c.num_workers = 2   # Render in 2 processes while the main one waits on the callback.
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
