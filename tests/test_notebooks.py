"""The analysis notebooks run top to bottom on a small setting."""
import json
import os
import runpy

import pytest

from vcbench.store import Cell, ResultStore, config_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(f for f in os.listdir(os.path.join(ROOT, "notebooks")) if f.endswith(".py"))
IPYNBS = sorted(f for f in os.listdir(os.path.join(ROOT, "notebooks")) if f.endswith(".ipynb"))
METAWORLD = ("assembly", "bin-picking", "button-press-topdown", "drawer-open", "hammer")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, monkeypatch, tmp_path):
  monkeypatch.setenv("VCBENCH_NOTEBOOK_SMALL", "1")
  monkeypatch.setenv("VCBENCH_NO_PROGRESS", "1")
  monkeypatch.setenv("VCBENCH_CACHE", str(tmp_path))
  runpy.run_path(os.path.join(ROOT, "notebooks", name), run_name="__main__")


def _small_store(path):
  """3 PVRs x the 5 Meta-World tasks x 2 seeds of CortexBench records."""
  store = ResultStore(path)
  h = config_hash({"protocol": "tiny"})
  for i, pvr in enumerate(("in1k_mobilenetv2", "random_vit_s", "state_oracle")):
    for j, task in enumerate(METAWORLD):
      for seed in (0, 1):
        score = 10.0 * i + 5 * j + 2 * seed
        store.append(Cell(benchmark="cortexbench", task=f"metaworld/{task}", pvr=pvr, seed=seed),
                     h, {"score": score, "success_rate": score / 100, "val_score": score,
                         "best_epoch": 2, "episodes": 25, "train_loss": 0.3},
                     extra={"protocol": "tiny"})
  return store


@pytest.mark.parametrize("name", IPYNBS)
def test_ipynb_runs(name, monkeypatch, tmp_path):
  """Executes the code cells in order in one namespace, as a kernel would (no Jupyter needed)."""
  _small_store(tmp_path / "results.jsonl")
  monkeypatch.setenv("VCBENCH_RESULTS", str(tmp_path / "results.jsonl"))
  monkeypatch.setenv("VCBENCH_REPORT_DIR", str(tmp_path / "report"))
  monkeypatch.setenv("VCBENCH_NOTEBOOK_SMALL", "1")
  monkeypatch.setenv("VCBENCH_NO_PROGRESS", "1")
  monkeypatch.setenv("VCBENCH_CACHE", str(tmp_path / "cache"))
  with open(os.path.join(ROOT, "notebooks", name), encoding="utf-8") as f:
    nb = json.load(f)
  assert nb["nbformat"] == 4
  namespace = {"__name__": "__main__"}
  for i, cell in enumerate(nb["cells"]):
    if cell["cell_type"] != "code":
      continue
    assert not cell.get("outputs"), f"{name} cell {i} has stored outputs"
    source = "".join(cell["source"])
    exec(compile(source, f"{name}[cell {i}]", "exec"), namespace)  # pylint: disable=exec-used
