"""vcbench's depthwise convolution against XLA's native one.

  python -m launch.bench.convs [--batch=32] [--repeats=5]

Milliseconds per call of `layers.conv2d` against XLA's native convolution on MobileNetV2's
depthwise layer shapes (timed round-robin, medians of --repeats), the figures behind the
rewrite in vcbench/models/layers.py.
"""
from __future__ import annotations

import statistics

from absl import flags
import numpy as np

import vcbench  # noqa: F401  # pylint: disable=unused-import  # Sets XLA:CPU defaults before JAX starts.
from launch import cli

from launch.bench import timing

_BATCH = flags.DEFINE_integer("batch", 32, "images per call")
_REPEATS = flags.DEFINE_integer("repeats", 5, "timed calls per measurement (median)")


# (name, input height, in channels, out channels, kernel, stride, groups).
CONV_SHAPES = (
    ("mnv2 dw 3x3/2 112² 96", 112, 96, 96, 3, 2, 96),
    ("mnv2 dw 3x3 56² 144", 56, 144, 144, 3, 1, 144),
    ("mnv2 dw 3x3 14² 576", 14, 576, 576, 3, 1, 576),
)


def convs() -> str:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from vcbench.models import layers  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  lines = [f"| layer (batch {_BATCH.value}, median of {_REPEATS.value}) | native ms | "
           "vcbench conv2d ms | speed-up |", "| --- | ---: | ---: | ---: |"]
  for name, h, cin, cout, k, stride, groups in CONV_SHAPES:
    x = jnp.asarray(rng.standard_normal((_BATCH.value, h, h, cin), np.float32))
    w = jnp.asarray(rng.standard_normal((k, k, cin // groups, cout), np.float32))
    pad = k // 2
    native = jax.jit(lambda x, w, s=stride, p=pad, g=groups: layers._conv(x, w, s, p, g))  # pylint: disable=protected-access
    ours = jax.jit(lambda x, w, s=stride, p=pad, g=groups: layers.conv2d(x, w, s, p, g))
    times = timing.interleaved({"native": lambda: native(x, w), "ours": lambda: ours(x, w)},
                               _REPEATS.value)
    ms = {label: 1e3 * statistics.median(t) for label, t in times.items()}
    lines.append(f"| {name} | {ms['native']:.1f} | {ms['ours']:.1f} | "
                 f"{ms['native'] / ms['ours']:.1f}x |")
  text = "\n".join(lines)
  print(text)
  return text




main = timing.main_of(convs)


if __name__ == "__main__":
  cli.run(main)
