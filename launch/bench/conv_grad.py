"""Gradient times of habitat's SimpleCNN layers inside vs outside a `lax.fori_loop`, for XLA's
convolution and for `vcbench.models.trainable_conv` (why the latter exists): the kernel
gradient dW and the input gradient dX, per call.

  python -m launch.bench.conv_grad [--batch 2048] [--size 32] [--repeats 3]
"""
import argparse

import vcbench  # noqa: F401  (XLA:CPU defaults before JAX starts)
import jax
import jax.numpy as jnp

from launch import cli
from launch.bench import timing
from vcbench.models import trainable_conv



def layers(size: int, channels: int):
  """habitat SimpleCNN on size x size frames: (input channels, input side, features, kernel,
  stride) of its three convolutions (SAME padding)."""
  after_first = -(-size // 4)
  return ((channels, size, 32, 8, 4), (32, after_first, 64, 4, 2),
          (64, -(-after_first // 2), 32, 3, 1))


def _time(fn, *args, repeats):
  fn = jax.jit(fn)
  return timing.median(lambda: fn(*args), repeats)


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--batch", type=int, default=2048)
  parser.add_argument("--size", type=int, default=32, help="frame side (depth: 1 channel)")
  parser.add_argument("--channels", type=int, default=1, help="1: depth, 4: RGB-D")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  print("| layer | gradient | XLA conv | XLA conv in loop | trainable_conv | trainable_conv in loop |")
  print("|---|---|---|---|---|---|")
  for cin, hw, feat, k, s in layers(args.size, args.channels):
    x = jax.random.normal(jax.random.key(0), (args.batch, hw, hw, cin))
    w = jax.random.normal(jax.random.key(1), (k, k, cin, feat)) * 0.01
    xla = lambda x, w: jax.lax.conv_general_dilated(x, w, (s, s), "SAME",
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))
    ours = lambda x, w: trainable_conv.conv2d(x, w, s, "SAME")
    for name, argnum in (("dW", 1), ("dX", 0)):
      row = []
      for conv in (xla, ours):
        # The probe weights make every output matter (a plain sum lets XLA fold the gradient).
        grad = jax.grad(lambda x, w, conv=conv: jnp.sum(conv(x, w) * jnp.cos(conv(x, w))),
                        argnum)
        row.append(_time(grad, x, w, repeats=args.repeats))
        looped = lambda x, w, grad=grad: jax.lax.fori_loop(
            0, 2, lambda i, a: a + grad(x, w), jnp.zeros_like((x, w)[argnum]))
        row.append(_time(looped, x, w, repeats=args.repeats) / 2)
      print(f"| {hw}x{hw}x{cin} -> {k}x{k}/{s} x{feat} | {name} | "
            + " | ".join(f"{t:.3f} s" for t in row) + " |")


if __name__ == "__main__":
  with cli.exit_statuses():
    main()
