"""Zoo demo: linear probes of frozen PVRs on procedurally drawn shapes.

The main job until the CortexBench track lands. The real pretrained ImageNet
MobileNetV2 (its weights install offline) against the same architecture with
random weights and a random ViT, on 6 shape classes; results go to the result
store, so a re-run only computes what is missing.

  python -m launch.main --config configs/zoo_demo.py            # ~2 min, 2 CPU cores
  python -m launch.main --config configs/zoo_demo.py:quick      # <1 min
  python -m launch.main --config configs/zoo_demo.py \
      --config.encoders='("random_vit_ti",)' --config.num_train=200

Variants (`:arg`): default, quick.
"""
import ml_collections


def get_config(arg=None):
  arg = arg or "default"
  c = ml_collections.ConfigDict()
  c.job = "zoo_demo"
  c.workdir = "runs/zoo_demo"
  c.encoders = ("in1k_mobilenetv2", "random_mobilenetv2", "random_vit_s")
  c.num_train = 600
  c.num_test = 300
  c.image_size = 96       # Drawn size; each encoder's preprocessing resizes to its input.
  c.batch_size = 32
  c.seed = 0
  if arg == "quick":
    c.encoders = ("in1k_mobilenetv2", "random_mobilenetv2")
    c.num_train, c.num_test = 200, 100
  elif arg != "default":
    raise ValueError(f"unknown variant {arg!r} of configs/zoo_demo.py; choose default or quick")
  return c
