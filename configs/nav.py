"""vcbench-nav: train a navigation agent (PPO or imitation) in procedural apartments, evaluate
it on held-out apartments (SR, SPL, RobustNav difficulty bins), store the result. The val
split chooses the checkpoint (validated after every chunk), the test split is reported.

  python -m launch.main --config configs/nav.py:pointnav_rgbd    # RobustNav's RGB-D agent:
        # 64x64 + GPS/compass, SimpleCNN + LSTM, DAgger in two stages (the first is the
        # variant pointnav_rgbd_il); 1.64M + 1.23M steps, 51 + 48 min on 2 shared CPU cores
  python -m launch.main --config configs/nav.py:pointnav_rgb     # its RGB agent, the same way
  python -m launch.main --config configs/nav.py:pointnav_depth   # depth 32x32, PPO; ~60 min
  python -m launch.main --config configs/nav.py:objectnav_il     # RGB-D 64x64 + odometry, DAgger
        # on the exploring teacher (it searches until it has seen the goal) with recognition
        # heads, 1.64M steps, 93 min on 2 shared cores (test SR 19.7)
  python -m launch.main --config configs/nav.py:objectnav        # its second stage (80% of the
        # executed actions its own, lr 5e-4), 1.64M more steps
  python -m launch.main --config configs/nav.py:imagenav_il      # RGB + goal image, the same
  python -m launch.main --config configs/nav.py:objectnav_bc     # RGB-D 32x32, imitation of the
        # shortest-path expert, 0.6M steps
  python -m launch.main --config configs/nav.py:imagenav         # RGB 32x32 + goal image, PPO,
        # 0.6M steps
  python -m launch.main --config configs/nav.py:pointnav_depth --config.policy.encoder=vc1_vitb \\
      --config.policy.checkpoint=/path/vc1_vitb.pth --config.sensors='("rgb",)'
  python -m launch.main --config configs/nav.py:pointnav_rgb_quick \\
      --config.policy.encoder=in1k_mobilenetv2    # RGB 64x64 + GPS/compass, one DAgger stage of
        # 131k env steps with the frozen PVR at 64 px: RobustNav's per-PVR agent on a CPU
        # (configs/robustnav.py:pvr_quick). 10.9 min on 2 CPU cores shared with another job
        # (~4 s an update alone: ~6 min), val SR 60.0 at update 48, test SR 51.0 / SPL 46.7 on
        # its 100 episodes; the SimpleCNN (no encoder) 10.6 min shared, 49.0 / 44.4

Objects are category sprites and the policy embeds the goal vector; `--config.objects=boxes
--config.policy.embed_vectors=False` gives the agents of before (and their config hashes).

Variants (`:arg`): pointnav_depth (default: `vcbench.jobs.nav.default_config`), pointnav_rgb,
pointnav_rgbd (the shipped agents, `vcbench/benchmarks/nav_agents/`), pointnav_rgb_ppo32 and
pointnav_rgbd_ppo32 (the earlier RobustNav agents: PPO from scratch on 32x32 frames),
pointnav_rgb_quick (above), objectnav_il, objectnav (its second stage), imagenav_il,
objectnav_bc, imagenav, tiny, tiny_rgbd and tiny_rgb (seconds-scale smoke runs for the tests;
tiny_rgb's zoo PVR, if `policy.encoder` names one, sees 32 px). Training runs in checkpointed
chunks under <workdir>/<variant>/train and resumes after a kill; the evaluation cell is skipped
when the result store already has it for this config.
"""
from vcbench import config as config_lib
from vcbench.envs.nav import env as nav_env
from vcbench.jobs import nav

VARIANTS = ("pointnav_depth", "pointnav_rgb", "pointnav_rgbd", "pointnav_rgb_il",
            "pointnav_rgbd_il", "pointnav_rgb_ppo32", "pointnav_rgbd_ppo32", "pointnav_rgb_quick",
            "objectnav_bc", "objectnav_il", "objectnav", "imagenav_il", "imagenav", "tiny",
            "tiny_rgbd", "tiny_rgb")


def _imitation_64(c):
  """64x64 frames; DAgger on the shortest-path expert (half the executed actions are the
  policy's own, 5% random) with a critic fitted to the returns, so that PPO can take over."""
  c.height = c.width = 64
  c.algo = "bc"
  c.bc.num_envs, c.bc.rollout_len, c.bc.update_epochs, c.bc.num_minibatches = 64, 64, 2, 2
  c.bc.num_updates = 400            # 1.6M env steps
  c.bc.expert_noise, c.bc.learner_mix, c.bc.critic.coef = 0.05, 0.5, 0.5
  c.chunk_updates = 50
  # END is right within 0.2 m of the goal and wrong at 0.25: Fourier features of the goal
  # vector and more weight on the steps near the goal sharpen that threshold (the agents of
  # before, without them, called ~60% of their failures' ENDs at 0.21-0.27 m).
  c.policy.vector_fourier = 6
  c.bc.near_goal_weight = 4.0
  _imitation_policy(c)


def _imitation_policy(c):
  # Without these the cloned policy goes blind (nav_policy.NavPolicy.visual_norm) or
  # copies the expert's last action.
  c.policy.visual_norm, c.policy.prev_action = True, False


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = nav.default_config()
  c.variant = arg
  if arg.startswith("pointnav_rgb"):   # RobustNav's two PointNav agents are RGB and RGB-D
    c.sensors = ("rgb", "depth") if arg.startswith("pointnav_rgbd") else ("rgb",)
    if not arg.endswith("_ppo32"):
      _imitation_64(c)
    if arg == "pointnav_rgb_quick":
      # Minutes on a CPU with a frozen PVR (RobustNav's per-PVR agent): 131k env steps, more
      # epochs over each rollout (a frozen PVR's tokens are recorded, so they cost no encoder
      # pass), the PVR at the frame's own 64 px (at 224 it encodes ~15x fewer frames/s) and a
      # 4x smaller compressed token map (its conv was half of an update's time).
      c.bc.num_envs, c.bc.num_updates, c.bc.update_epochs = 32, 64, 4
      c.chunk_updates, c.val_episodes, c.test_episodes, c.eval_batch = 16, 30, 100, 50
      c.policy.img_size, c.policy.compression_size = 64, 512
    if arg in ("pointnav_rgb", "pointnav_rgbd"):
      # More of the executed actions the policy's own (its mistakes, e.g. an END called just
      # out of range, get the expert's correction), at a lower lr, from the first stage.
      c.init_from = f"configs/nav.py:{arg}_il"
      c.bc.learner_mix, c.bc.lr, c.bc.num_updates = 0.8, 5e-4, 300
  elif arg in ("objectnav_il", "imagenav_il", "objectnav"):
    # DAgger on the exploring teacher: it searches until it has seen the goal, as a policy
    # without a map must.
    c.task = arg.removesuffix("_il")
    c.sensors = ("rgb", "depth") if c.task == "objectnav" else ("rgb",)
    c.train_episodes = 4000 if c.task == "imagenav" else c.train_episodes   # goal images
    _imitation_64(c)
    c.bc.teacher, c.bc.near_goal_weight = "explorer", 0.0
    c.odometry = True   # where it has searched
    if c.task == "objectnav":   # learn to recognise the goal: is it in view? which categories are?
      c.policy.aux_goal_visible, c.bc.aux_coef = True, 0.5
      c.policy.aux_categories = nav_env.NUM_CATEGORIES
    if arg == "objectnav":   # a second stage, as PointNav's: more of its own mistakes corrected
      c.init_from = "configs/nav.py:objectnav_il"
      c.bc.learner_mix, c.bc.lr = 0.8, 5e-4
  elif arg == "objectnav_bc":
    c.task, c.algo, c.sensors = "objectnav", "bc", ("rgb", "depth")
    c.bc.num_envs, c.bc.rollout_len, c.bc.num_updates = 32, 64, 300   # 0.6M expert steps
    _imitation_policy(c)
  elif arg == "imagenav":
    c.task, c.sensors = "imagenav", ("rgb",)
    c.train_episodes = 4000   # each carries its goal image
    c.ppo.num_updates = 150   # 0.6M env steps
  elif arg in ("tiny", "tiny_rgbd", "tiny_rgb"):
    c.sensors = {"tiny_rgbd": ("rgb", "depth"), "tiny_rgb": ("rgb",)}.get(arg, c.sensors)
    c.train_scenes, c.train_episodes, c.val_scenes, c.val_episodes = 4, 64, 2, 6
    c.test_episodes = 6
    c.height = c.width = 16
    c.eval_batch = 6
    c.chunk_updates = 2
    for algo in (c.ppo, c.bc):
      algo.num_envs, algo.rollout_len, algo.num_updates, algo.log_every = 4, 8, 4, 1
    c.ppo.num_minibatches = 2
    c.policy.hidden = 32
    if arg == "tiny_rgb":   # A zoo PVR (policy.encoder) sees 32 px: a 2x2 token grid for a ViT/16.
      c.policy.img_size, c.policy.compression_size = 32, 128
  return c
