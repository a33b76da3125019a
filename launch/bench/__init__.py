"""Speed benchmarks, one script per subject; each prints the table its README section quotes.

  python -m launch.bench.encoders      Flax encoders vs their PyTorch references (images/s)
  python -m launch.bench.convs         vcbench's depthwise conv2d vs XLA's native convolution
  python -m launch.bench.conv_grad     the patch-matmul kernel gradient inside a scan
  python -m launch.bench.bc            CortexBench BC training and evaluation rollouts
  python -m launch.bench.colosseum     the Colosseum evaluation path
  python -m launch.bench.corruptions   RobustNav's corruptions vs the reference implementations
  python -m launch.bench.mae           MAE pre-training throughput and data-parallel scaling
  python -m launch.bench.nav           the navigation simulator's frames/s and memory

All time with `timing` (medians of repeated calls after a warm-up): these machines are shared
and noisy, so compare figures measured in one run.
"""
