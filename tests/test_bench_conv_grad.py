"""The convolution-gradient benchmark times the SimpleCNN's real layers, both gradients."""
import jax.numpy as jnp

import launching
from launch.bench import conv_grad
from vcbench.models import trainable_conv


def test_layers_are_the_simple_cnn_s_at_every_frame_size():
  for size, channels in ((32, 1), (64, 4), (17, 3)):
    x = jnp.zeros((1, size, size, channels))
    for cin, side, features, kernel, stride in conv_grad.layers(size, channels):
      assert x.shape == (1, side, side, cin)
      x = trainable_conv.conv2d(x, jnp.zeros((kernel, kernel, cin, features)), stride, "SAME")


def test_a_tiny_run_prints_both_gradients_of_each_layer(tmp_path):
  out = launching.run("launch.bench.conv_grad", "--batch", 2, "--size", 16, "--repeats", 1,
                      tmp_path=tmp_path, timeout=300)
  assert out.returncode == 0, out.stderr
  rows = [line for line in out.stdout.splitlines() if line.startswith("| 16x16x1")
          or line.startswith("| 4x4x32") or line.startswith("| 2x2x64")]
  assert [r.split(" | ")[1] for r in rows] == ["dW", "dX"] * 3
