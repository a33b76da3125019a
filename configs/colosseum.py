"""The Colosseum on MetaWorld: BC on 100 clean demos per task with a frozen PVR, evaluated on
25 episodes of every test set (no perturbation, each of 15 factors, all together).

  python -m launch.main --config configs/colosseum.py          # 10 tasks x 17 test sets,
        # in1k_mobilenetv2 at 112 px, 1 seed (~2 h on 2 CPU cores; README: The Colosseum)
  python -m launch.main --config configs/colosseum.py:compare  # 5 PVRs x 3 seeds (~20 h on 2
        # CPU cores; spread it: python -m launch.sweep --config configs/colosseum.py:compare)
  python -m launch.main --config configs/colosseum.py:quick    # one task, 3 PVRs' worth of a
        # leaderboard (configs/leaderboard.py:quick runs it; README: Leaderboard)
  python -m launch.main --config configs/colosseum.py:tiny     # seconds-scale smoke run
  python -m launch.colosseum_report --store runs/colosseum/results.jsonl --out runs/colosseum/report
  python -m launch.colosseum_gallery --out runs/colosseum/gallery.png

First the job measures MetaWorld's scripted expert on every (task, test set) (25 episodes, no
pixels); a factor under which it succeeds below 90% of its clean success is excluded for that
task, with the figure (stored as `colosseum_expert` rows; `expert_rule`). Then per task:
demos -> PVR embeddings (cached) -> BC with CortexBench's recipe (configs/cortexbench.py keys)
selected on clean validation episodes -> every test set. Cells already stored under the same
config hash are skipped.

Variants (`:arg`):
  full (default) the protocol above (`vcbench.jobs.colosseum.default_config`).
  compare        the benchmark's comparison: in1k_mobilenetv2, vcbench_vit_ti, their random
                 twins and the state oracle (a reference that sees no pixels), seeds 0-2.
  quick          drawer-open only, 25 demos, BC validated at epochs 50 and 100 on 5 episodes,
                 10 episodes per test set (all 17) and 10 expert episodes: % changes within
                 ~±30 points, a first look, not the protocol.
  tiny           one task, 3 demos, 2 episodes per test set, tiny images.
"""
from vcbench import config as config_lib
from vcbench.benchmarks import colosseum as col
from vcbench.jobs import colosseum

VARIANTS = ("full", "compare", "quick", "tiny")
COMPARED = ("state_oracle", "in1k_mobilenetv2", "random_mobilenetv2", "vcbench_vit_ti",
            "random_vit_ti")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = colosseum.default_config()
  c.protocol = arg
  if arg == "compare":
    c.workdir = "runs/colosseum_compare"
    c.pvrs, c.seeds = COMPARED, (0, 1, 2)
  if arg == "quick":
    c.workdir = "runs/colosseum_quick"
    c.tasks = ("drawer-open",)
    c.num_demos = 25
    c.eval_every = 50
    c.val_episodes, c.test_episodes, c.expert_episodes = 5, 10, 10
  if arg == "tiny":
    c.workdir = "runs/colosseum_tiny"
    c.tasks = ("button-press-topdown",)
    c.test_sets = (col.NONE, col.ALL, "MO_Color", "RO_Size", "MO_Size", "Object_Position")
    c.pvrs = ("random_vit_ti", "state_oracle")
    c.num_demos = 3
    c.render_size, c.img_size = 32, 32
    c.epochs, c.eval_every = 4, 2
    c.val_episodes, c.test_episodes = 2, 2
    c.horizon = 90           # The expert presses the button in 65-85 steps.
    c.eval_envs = 2
    c.num_workers = 0
    c.expert_episodes = 2
  return c
