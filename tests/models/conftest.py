"""Shared fixture for the model-zoo tests: a private conversion cache per test."""
import os
import sys

import pytest

# Lets the test modules here `import vcb_models_testlib` under any import mode.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _vcbench_cache(tmp_path, monkeypatch):
  """Every test converts into its own cache, never into ~/.cache/vcbench."""
  cache = tmp_path / "vcbench_cache"
  monkeypatch.setenv("VCBENCH_CACHE", str(cache))
  return cache
