"""vcbench-nav: train a navigation agent (PPO or imitation) in procedural apartments, evaluate
it on held-out apartments (SR, SPL, RobustNav difficulty bins), store the result. The val
split chooses the checkpoint (validated after every chunk), the test split is reported.

  python -m launch.main --config configs/nav.py:pointnav_depth   # README learning result:
        # depth 32x32 + GPS/compass, SimpleCNN + LSTM, PPO; ~60 min on 2 CPU cores
  python -m launch.main --config configs/nav.py:objectnav_bc     # RGB-D 32x32, imitation of the
        # shortest-path expert, 0.6M steps
  python -m launch.main --config configs/nav.py:imagenav         # RGB 32x32 + goal image, PPO,
        # 0.6M steps
  python -m launch.main --config configs/nav.py:pointnav_depth --config.ppo.policy.encoder=vc1_vitb \\
      --config.ppo.policy.checkpoint=/path/vc1_vitb.pth --config.sensors='("rgb",)'

Variants (`:arg`): pointnav_depth (default), pointnav_rgb, pointnav_rgbd, objectnav_bc, imagenav, tiny and
tiny_rgbd (seconds-scale smoke runs for the tests). Training runs in checkpointed chunks under
<workdir>/<variant>/train and resumes after a kill; the evaluation cell is skipped when the
result store already has it for this config.
"""
import ml_collections

from vcbench.algos import nav_bc
from vcbench.algos import ppo

VARIANTS = ("pointnav_depth", "pointnav_rgb", "pointnav_rgbd", "objectnav_bc", "imagenav", "tiny",
            "tiny_rgbd")


def _algo(config):
  """An algorithm's config without the parts the job sets (policy, seed)."""
  d = config.to_dict()
  del d["policy"], d["seed"]
  return ml_collections.ConfigDict(d)


def get_config(arg=None):
  arg = arg or "pointnav_depth"
  if arg not in VARIANTS:
    raise ValueError(f"configs/nav.py: unknown variant {arg!r}; variants: {VARIANTS}")
  c = ml_collections.ConfigDict()
  c.job = "nav"
  c.variant = arg
  c.workdir = "runs/nav"
  c.task = "pointnav"
  c.sensors = ("depth",)
  c.height = c.width = 32
  c.hfov = 79.0
  c.grid_size = 32            # apartments of up to 8 m x 8 m (RoboTHOR-sized).
  c.train_scenes = 400
  c.train_episodes = 8000
  c.val_scenes = 15           # RobustNav evaluates on RoboTHOR's 15 val scenes (and so many
                              # test scenes here).
  c.val_episodes = 150        # after every chunk, to choose the checkpoint; balanced bins.
  c.test_episodes = 300       # the reported numbers; balanced over the difficulty bins.
  c.eval_batch = 150
  c.eval_greedy = False
  c.algo = "ppo"              # 'ppo' or 'bc'
  c.chunk_updates = 100       # updates per checkpoint and validation.
  c.seed = 0
  c.policy = ppo.default_config().policy   # shared by both algorithms
  c.policy.hidden = 256
  c.policy.rnn_layers = 1
  c.ppo = _algo(ppo.default_config())
  c.ppo.num_envs = 64
  c.ppo.rollout_len = 64
  c.ppo.num_updates = 900     # 3.7M env steps
  c.bc = _algo(nav_bc.default_config())
  if arg == "pointnav_rgb":
    c.sensors = ("rgb",)
  elif arg == "pointnav_rgbd":  # RobustNav's two PointNav agents are RGB and RGB-D
    c.sensors = ("rgb", "depth")
  elif arg == "objectnav_bc":
    c.task, c.algo, c.sensors = "objectnav", "bc", ("rgb", "depth")
    c.bc.num_envs, c.bc.rollout_len, c.bc.num_updates = 32, 64, 300   # 0.6M expert steps
    # Without these the cloned policy goes blind (nav_policy.NavPolicy.visual_norm) or
    # copies the expert's last action.
    c.policy.visual_norm, c.policy.prev_action = True, False
  elif arg == "imagenav":
    c.task, c.sensors = "imagenav", ("rgb",)
    c.train_episodes = 4000   # each carries its goal image
    c.ppo.num_updates = 150   # 0.6M env steps
  elif arg in ("tiny", "tiny_rgbd"):
    c.sensors = ("rgb", "depth") if arg == "tiny_rgbd" else c.sensors
    c.train_scenes, c.train_episodes, c.val_scenes, c.val_episodes = 4, 64, 2, 6
    c.test_episodes = 6
    c.height = c.width = 16
    c.eval_batch = 6
    c.chunk_updates = 2
    for algo in (c.ppo, c.bc):
      algo.num_envs, algo.rollout_len, algo.num_updates, algo.log_every = 4, 8, 4, 1
    c.ppo.num_minibatches = 2
    c.policy.hidden = 32
  return c
