"""G-VUE on frozen PVRs: nine Perceive/Ground/Reason tasks and the two Act tasks.

  python -m launch.main --config configs/gvue.py:quick    # two small PVRs, 11 tasks, ~1.5 h (README)
  python -m launch.main --config configs/gvue.py:quick \
      --config.pvrs='("in1k_mobilenetv2","vcbench_vit_ti","random_vit_ti")' \
      --config.seeds='(0,1,2)'                              # the README's table
  python -m launch.main --config configs/gvue.py:tiny     # an end-to-end check, ~4 min
  python -m launch.main --config configs/gvue.py          # the paper's protocol (a GPU job)

Variants (`:arg`):
  full   G-VUE's settings: 224 px inputs, the label decoder 256 wide with 6 layers, 8 heads and a
         2048 feed-forward, Table 5's epochs and batch sizes, 2000 train / 500 test examples of
         each generated task; manipulation at CLIPort's scale (1000 demos and 100 unseen
         episodes per task); navigation at R2R's (60 train apartments, 3600 paths, 770
         unseen episodes, 224 px views).
  quick  a reduced protocol for a laptop: 128 px, 384 train / 192 test examples, a 2-layer
         128-wide label decoder (feed-forward 512), 24 epochs at batch 32 and lr 1e-3 (the
         paper's 1e-4 leaves these few hundred steps far from converged: depth AbsRel 1.81 vs
         0.26, 3-D mIoU 0 vs 39 for in1k_mobilenetv2 at 30 epochs); manipulation with 100
         demos, 30 epochs, and 50 unseen (and 50 seen) test episodes per task; navigation
         with 40 train apartments (1200 paths), 330 unseen episodes, 64 px views.
  tiny   a smoke run: 64 px, 32 / 16 examples, a 1-layer decoder, 2 epochs, one random PVR;
         manipulation on one task with 2 demos and 1 test episode; navigation in 48-cell
         flats with 16 paths, 32 px views.
Data come from vcbench's generators (vcbench-nav scenes, packaged meshes, MetaWorld, easy-VQA,
the MuJoCo tabletop's oracle, viewpoint graphs of vcbench-nav apartments);
`--config.data.sources.<task>=real` with `--config.real_paths.<task>.<arg>=...` reads the
dataset G-VUE uses (vcbench/data/gvue/formats.py lists each loader's files); navigation reads
R2R with `--config.navigation.source=r2r --config.navigation.r2r.<data_dir|connectivity_dir|
features>=...` (features: the user's per-view vectors, a path with "{pvr}" in it).
"""
from vcbench import config as config_lib
from vcbench.jobs import gvue

VARIANTS = ("full", "quick", "tiny")


def get_config(arg=None):
  arg = config_lib.variant(arg or "full", VARIANTS, __file__)
  c = gvue.default_config()
  c.protocol = arg
  if arg == "quick":
    c.workdir = "runs/gvue_quick"
    c.pvrs = ("in1k_mobilenetv2", "vcbench_vit_ti")
    c.image_size = 128
    c.data.num_train, c.data.num_test = 384, 192
    c.decoder.width, c.decoder.depth, c.decoder.num_heads, c.decoder.mlp_dim = 128, 2, 4, 512
    c.optim.epochs, c.optim.batch_size, c.optim.lr = 24, 32, 1e-3
    m = c.manipulation
    m.demos, m.episodes, m.seen_episodes = 100, 50, 50
    m.optim.epochs = 30
    c.navigation = gvue.navigation_config("quick")
  elif arg == "tiny":
    c.workdir = "runs/gvue_tiny"
    c.pvrs = ("random_vit_ti",)
    c.image_size = 64
    c.data.num_train, c.data.num_test = 32, 16
    c.decoder.width, c.decoder.depth, c.decoder.num_heads, c.decoder.mlp_dim = 32, 1, 2, 64
    c.optim.epochs, c.optim.batch_size = 2, 8
    c.text_max_len = 24
    m = c.manipulation
    m.tasks, m.demos, m.episodes, m.n_rotations, m.crop = ("put_block_in_bowl",), 2, 1, 8, 3
    m.width, m.transport_dim = 16, 4
    m.optim.update(epochs=2, batch_size=4)
    c.navigation = gvue.navigation_config("tiny")
  return c
