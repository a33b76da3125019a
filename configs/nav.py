"""vcbench-nav: train a navigation agent (PPO or imitation) in procedural apartments, evaluate
it on held-out apartments (SR, SPL, RobustNav difficulty bins), store the result. The val
split chooses the checkpoint (validated after every chunk), the test split is reported.

  python -m launch.main --config configs/nav.py:pointnav_depth   # README learning result:
        # depth 32x32 + GPS/compass, SimpleCNN + LSTM, PPO; ~60 min on 2 CPU cores
  python -m launch.main --config configs/nav.py:objectnav_bc     # RGB-D 32x32, imitation of the
        # shortest-path expert, 0.6M steps
  python -m launch.main --config configs/nav.py:imagenav         # RGB 32x32 + goal image, PPO,
        # 0.6M steps
  python -m launch.main --config configs/nav.py:pointnav_depth --config.policy.encoder=vc1_vitb \\
      --config.policy.checkpoint=/path/vc1_vitb.pth --config.sensors='("rgb",)'

Objects are category sprites and the policy embeds the goal vector; `--config.objects=boxes
--config.policy.embed_vectors=False` gives the agents of before (and their config hashes).

Variants (`:arg`): pointnav_depth (default: `vcbench.jobs.nav.default_config`), pointnav_rgb,
pointnav_rgbd, objectnav_bc, imagenav, tiny and tiny_rgbd (seconds-scale smoke runs for the
tests). Training runs in checkpointed chunks under <workdir>/<variant>/train and resumes after a
kill; the evaluation cell is skipped when the result store already has it for this config.
"""
from vcbench import config as config_lib
from vcbench.jobs import nav

VARIANTS = ("pointnav_depth", "pointnav_rgb", "pointnav_rgbd", "objectnav_bc", "imagenav", "tiny",
            "tiny_rgbd")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = nav.default_config()
  c.variant = arg
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
