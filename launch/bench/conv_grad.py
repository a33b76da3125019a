"""Kernel-gradient time of habitat's SimpleCNN layers inside vs outside a `lax.fori_loop`, for
XLA's convolution and for `vcbench.models.trainable_conv` (why the latter exists).

  python -m launch.bench.conv_grad [--batch 2048] [--repeats 3]
"""
import argparse

import vcbench  # noqa: F401  (XLA:CPU defaults before JAX starts)
import jax
import jax.numpy as jnp

from launch import cli
from launch.bench import timing
from vcbench.models import trainable_conv

# habitat SimpleCNN on 32x32 depth: (input channels, input side, features, kernel, stride).
LAYERS = ((1, 32, 32, 8, 4), (32, 8, 64, 4, 2), (64, 4, 32, 3, 1))


def _time(fn, *args, repeats):
  fn = jax.jit(fn)
  return timing.median(lambda: fn(*args), repeats)


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--batch", type=int, default=2048)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  print("| layer | XLA conv dW | XLA conv dW in loop | trainable_conv dW | trainable_conv dW in loop |")
  print("|---|---|---|---|---|")
  for cin, hw, feat, k, s in LAYERS:
    x = jax.random.normal(jax.random.key(0), (args.batch, hw, hw, cin))
    w = jax.random.normal(jax.random.key(1), (k, k, cin, feat)) * 0.01
    xla = lambda x, w: jax.lax.conv_general_dilated(x, w, (s, s), "SAME",
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))
    ours = lambda x, w: trainable_conv.conv2d(x, w, s, "SAME")
    row = []
    for conv in (xla, ours):
      grad = jax.grad(lambda w, x: conv(x, w).sum())
      row.append(_time(grad, w, x, repeats=args.repeats))
      looped = lambda w, x: jax.lax.fori_loop(0, 2, lambda i, a: a + grad(w, x), jnp.zeros_like(w))
      row.append(_time(looped, w, x, repeats=args.repeats) / 2)
    print(f"| {hw}x{hw}x{cin} -> {k}x{k}/{s} x{feat} | " + " | ".join(f"{t:.3f} s" for t in row) + " |")


if __name__ == "__main__":
  with cli.exit_statuses():
    main()
