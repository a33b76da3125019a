"""SAC experts on state for CortexBench's DeepMind Control tasks (the demonstrators of the dmc
suite; their policies ship in vcbench/envs/mujoco/experts/).

  python -m launch.main --config configs/dmc_expert.py:walker-walk \\
      --config.export_to=vcbench/envs/mujoco/experts/walker-walk.npz
  python -m launch.main --config configs/dmc_expert.py:cheetah-run --config.backend=mjx  # GPU/TPU
  python -m launch.main --config configs/dmc_expert.py:tiny      # a smoke run for the tests

Variants (`:arg`): a task (walker-stand, walker-walk, cheetah-run, finger-spin; reacher's expert
is scripted) with the training length that reached the README's returns, or `tiny`. Each
variant trains on 2 envs (action repeat 2, 500 decisions per episode), one gradient step per
env step after 5000 uniform-action transitions; the README lists each run's measured return
over 100 held-out seeds and its wall time on 2 CPU cores.
"""
from vcbench import config as config_lib
from vcbench.jobs import dmc_expert

# Training episodes (per env: x2 envs) of each task's run.
EPISODES = {"walker-stand": 300, "walker-walk": 500, "cheetah-run": 750, "finger-spin": 300}
VARIANTS = tuple(EPISODES) + ("tiny",)


def get_config(arg=None):
  arg = config_lib.variant(arg or "walker-walk", VARIANTS, __file__)
  c = dmc_expert.default_config()
  if arg == "tiny":
    c.task = "walker-stand"
    c.workdir = "runs/dmc_expert/tiny"
    c.action_repeat = 4
    c.sac.horizon = 250
    c.sac.episodes = 2
    c.sac.warmup = 200
    c.sac.hidden = (32, 32)
    c.sac.batch_size = 32
    c.sac.buffer_size = 2000
    c.chunk = 1
    c.eval_episodes = c.eval_envs = 4
    return c
  c.task = arg
  c.workdir = f"runs/dmc_expert/{arg}"
  c.sac.episodes = EPISODES[arg]
  return c
