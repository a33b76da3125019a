"""The analysis notebooks run top to bottom on a small setting."""
import os
import runpy

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(f for f in os.listdir(os.path.join(ROOT, "notebooks")) if f.endswith(".py"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, monkeypatch, tmp_path):
  if name == "zoo_tour.py":
    pytest.importorskip("torch")  # Converts the shipped MobileNetV2 checkpoint.
  monkeypatch.setenv("VCBENCH_NOTEBOOK_SMALL", "1")
  monkeypatch.setenv("VCBENCH_NO_PROGRESS", "1")
  monkeypatch.setenv("VCBENCH_CACHE", str(tmp_path))
  runpy.run_path(os.path.join(ROOT, "notebooks", name), run_name="__main__")
