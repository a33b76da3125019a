"""Converts an official PyTorch checkpoint into a vcbench .npz (no torch needed after).

  python -m launch.convert --model=vc1_vitb --checkpoint=vc1_vitb.pth --out=vc1_vitb.npz

Prints the audit: tensors used, tensors dropped (grouped by reason), and the
output dims on a test batch. Any missing, unexpected or mis-shaped tensor is an
error that lists them all.
"""
import collections

from absl import app
from absl import logging
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np
from launch import cli

from vcbench.models import convert
from vcbench.models import zoo

_MODEL = flags.DEFINE_string("model", None, "zoo entry, e.g. vc1_vitb", required=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", None, "source checkpoint file", required=True)
_OUT = flags.DEFINE_string("out", None, "output .npz", required=True)
_IMG_SIZE = flags.DEFINE_integer("img_size", None, "input size (default: the entry's)")


def main(argv):
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  del argv
  e = zoo.entry(_MODEL.value)
  if not e.pretrained:
    raise app.UsageError(f"{_MODEL.value} is a random encoder; there is nothing to convert")
  size = _IMG_SIZE.value or e.preprocess.size
  module = e.build(img_size=size, dtype=jnp.float32)
  expected = jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((1, size, size, 3)))
  flat = convert.read_checkpoint(_CHECKPOINT.value)
  variables, dropped = convert.convert_state(flat, e.layout, expected, source=_CHECKPOINT.value)
  convert.save_variables(_OUT.value, variables)
  reasons = collections.Counter(dropped.values())
  print(f"{_CHECKPOINT.value}: {len(flat) - len(dropped)} tensors converted, "
        f"{len(dropped)} dropped:")
  for reason, n in reasons.most_common():
    print(f"  {n:5d} x {reason}")
  encoder = zoo.load(_MODEL.value, _OUT.value, img_size=size)
  out = encoder(np.zeros((1, size, size, 3), np.uint8))
  print(f"wrote {_OUT.value}: cls {out['cls'].shape}, tokens {out['tokens'].shape}, "
        f"pyramid {[p.shape for p in out['pyramid']]}")


if __name__ == "__main__":
  cli.run(main)
