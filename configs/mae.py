"""MAE pre-training of a zoo ViT on frames of vcbench's simulators (and any image folders).

  python -m launch.main --config configs/mae.py:vcbench_vit_ti   # the vcbench PVR's recipe:
        # ViT-Ti/16 at 112 px on MetaWorld (50 tasks) + vcbench-nav frames; measured on 2 CPU
        # cores (shared): frames 340 s, training 37 min; writes <workdir>/encoder.npz
  python -m launch.main --config configs/mae.py --config.mae.encoder=random_vit_b \\
        --config.mae.img_size=224 --config.mae.batch_size=4096     # MAE's ViT-B protocol
  python -m launch.main --config configs/mae.py:tiny              # smoke run, ~35 s

Variants (`:arg`):
  full (default)  `vcbench.jobs.mae.default_config`: facebookresearch/mae's pre-training
                  defaults (decoder 8 x 512, mask 0.75, norm-pix loss, AdamW 0.9/0.95 wd 0.05,
                  base lr 1.5e-4 x batch/256, warm-up then cosine) on a ViT-B/16 at 224 px; the
                  frame mixture as vcbench_vit_ti.
  vcbench_vit_ti  the recipe of the shipped `vcbench_vit_ti` zoo entry (sized for a CPU hour:
                  decoder 4 x 256, batch 64, 1500 steps, base lr 1e-3; see the README).
  tiny            a few steps on a handful of frames, for the tests.
Copy <workdir>/encoder.npz to vcbench/models/weights/vcbench_vit_ti.npz (or set
config.export_to) to make it the zoo entry's weights.
"""
from vcbench import config as config_lib
from vcbench.jobs import mae

VARIANTS = ("full", "vcbench_vit_ti", "tiny")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = mae.default_config()
  c.variant = arg
  c.workdir = f"runs/mae_{arg}"
  d, m = c.data, c.mae
  if arg == "vcbench_vit_ti":
    m.encoder = "vcbench_vit_ti"
    m.img_size = 112
    m.decoder_width, m.decoder_depth, m.decoder_heads = 256, 4, 8
    m.batch_size = 64
    m.base_lr = 1e-3          # MAE's rule with its 1.5e-4 gives 3.75e-5 at batch 64: too slow
    m.warmup_steps = 100      # for a 1500-step run.
    m.total_steps = 1500
    m.chunk = 10
    m.checkpoint_every = 200
    m.log_every = 100
  elif arg == "tiny":
    d.dir = ""                # <workdir>/frames, so --config.workdir moves them too.
    d.size = 48
    d.metaworld_tasks = "button-press-topdown"
    d.metaworld_episodes = 1
    d.metaworld_stride = 4
    d.nav_frames = 16
    m.encoder = "random_vit_ti"
    m.img_size = 32
    m.decoder_width, m.decoder_depth, m.decoder_heads = 32, 1, 2
    m.batch_size = 8
    m.base_lr = 1e-2
    m.warmup_steps = 2
    m.total_steps = 20
    m.chunk = 5
    m.checkpoint_every = 10
    m.log_every = 5
  return c
