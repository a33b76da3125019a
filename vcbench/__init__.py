"""vcbench: how good is a pre-trained visual representation for acting, and how robust is it."""
import importlib.metadata as _metadata
import os as _os
import sys as _sys
import warnings as _warnings

__version__ = "0.1.0"

_YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type"


def _default_xla_cpu_flags() -> None:
  """Routes XLA:CPU matmuls and convolutions to Eigen instead of YNNPACK.

  On these CPUs jaxlib 0.10's default YNNPACK path runs the encoders' GEMMs
  slower: `python -m launch.bench.encoders` gave ViT-B/16 5.10 img/s and
  ResNet-50 17.7 img/s with it off, 3.55 and 9.25 with it on
  (VCBENCH_KEEP_XLA_FLAGS=1), in two runs on 2026-12-02. An empty fusion-type
  list turns it off. Only set when the user has not chosen (set VCBENCH_KEEP_XLA_FLAGS=1
  to leave XLA_FLAGS alone), only for the jaxlib line that knows the flag (an
  unknown flag aborts XLA), and it only takes effect if imported before JAX's
  first computation. It does not affect GPU/TPU backends.
  """
  flags = _os.environ.get("XLA_FLAGS", "")
  if _os.environ.get("VCBENCH_KEEP_XLA_FLAGS") == "1" or _YNN_FLAG in flags:
    return
  try:
    jaxlib_version = _metadata.version("jaxlib")
  except _metadata.PackageNotFoundError:
    return
  if not jaxlib_version.startswith("0.10."):
    return
  _os.environ["XLA_FLAGS"] = f"{flags} {_YNN_FLAG}=".strip()
  bridge = _sys.modules.get("jax._src.xla_bridge")
  if bridge is not None and getattr(bridge, "_backends", None):
    _warnings.warn("vcbench was imported after JAX started its backend, so its XLA:CPU "
                   "default (Eigen GEMMs, faster here: see launch.bench.encoders) does not apply; import vcbench "
                   "before the first JAX computation", stacklevel=3)


_default_xla_cpu_flags()
