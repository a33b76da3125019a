"""`import vcbench` picks Eigen GEMMs on jaxlib 0.10 CPUs, and never overrides the user."""
import os
import subprocess
import sys

import pytest

FLAG = "--xla_cpu_experimental_ynn_fusion_type"


def _flags_after_import(**env):
  base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "VCBENCH_KEEP_XLA_FLAGS")}
  out = subprocess.run([sys.executable, "-c",
                        "import os, vcbench; print(os.environ.get('XLA_FLAGS', '<unset>'))"],
                       env={**base, **env}, capture_output=True, text=True, check=True)
  return out.stdout.strip()


def test_sets_the_flag_when_absent():
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  if not importlib.metadata.version("jaxlib").startswith("0.10."):
    pytest.skip("the flag is only set for the jaxlib line that knows it")
  assert _flags_after_import() == f"{FLAG}="
  assert _flags_after_import(XLA_FLAGS="--xla_dump_to=/tmp/x") == f"--xla_dump_to=/tmp/x {FLAG}="


def test_leaves_user_choices_alone():
  assert _flags_after_import(XLA_FLAGS=f"{FLAG}=dot") == f"{FLAG}=dot"
  assert _flags_after_import(VCBENCH_KEEP_XLA_FLAGS="1") == "<unset>"


def test_encoder_computation_runs_with_the_flag():
  code = ("import vcbench, jax, jax.numpy as jnp; "
          "print(float(jax.jit(lambda a: (a @ a).sum())(jnp.ones((8, 8)))))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "512.0"


def test_warns_when_imported_after_jax_started():
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  if not importlib.metadata.version("jaxlib").startswith("0.10."):
    pytest.skip("the flag is only set for the jaxlib line that knows it")
  base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "VCBENCH_KEEP_XLA_FLAGS")}
  code = "import jax.numpy as jnp; jnp.ones(2).block_until_ready(); import vcbench"
  out = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True,
                       check=True)
  assert "imported after JAX started its backend" in out.stderr
