"""Zoo demo: linear probes of frozen PVRs on procedurally drawn shapes.

The real pretrained ImageNet MobileNetV2 (its weights install offline) against the same
architecture with random weights and a random ViT, on 6 shape classes; results go to the result
store, so a re-run only computes what is missing.

  python -m launch.main --config configs/zoo_demo.py            # ~2 min, 2 CPU cores
  python -m launch.main --config configs/zoo_demo.py:quick      # <1 min
  python -m launch.main --config configs/zoo_demo.py \
      --config.encoders='("random_vit_ti",)' --config.num_train=200

Variants (`:arg`): default, quick.
"""
from vcbench import config as config_lib
from vcbench.jobs import zoo_demo

VARIANTS = ("default", "quick")


def get_config(arg=None):
  arg = config_lib.variant(arg, VARIANTS, __file__)
  c = zoo_demo.default_config()
  if arg == "quick":
    c.encoders = ("in1k_mobilenetv2", "random_mobilenetv2")
    c.num_train, c.num_test = 200, 100
  return c
