"""The notebooks: every percent-format `.py` is in sync with its `.ipynb` (jupytext pairs them),
and every notebook runs top to bottom in a real Jupyter kernel (nbclient + ipykernel), on a small
setting and on stores the tests write.

The kernel is started on `sys.executable`, the interpreter running the tests, and not on whatever
the "python3" kernel spec names: jupyter_client looks for that spec in the user's, the
environment's and the system's data directories first, and a user-level spec may point at another
Python, so the notebooks would not run against this checkout and its dependencies. Pinning the
interpreter needs no `ipykernel install` step in CI.
"""
import os
import re
import sys

import pytest

from vcbench.reports import tables
from vcbench.store import Cell, ResultStore, config_hash

jupytext = pytest.importorskip("jupytext", reason="notebook tests need jupytext (test extra)")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need nbclient (test extra)")
nbformat = pytest.importorskip("nbformat", reason="notebook tests need nbformat (test extra)")
pytest.importorskip("ipykernel", reason="notebook tests need ipykernel (test extra)")

from jupyter_client import kernelspec  # pylint: disable=wrong-import-position
from jupyter_client import manager  # pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK_DIR = os.path.join(ROOT, "notebooks")
PAIRS = sorted(f[:-3] for f in os.listdir(NOTEBOOK_DIR) if f.endswith(".py"))
METAWORLD = ("assembly", "bin-picking", "button-press-topdown", "drawer-open", "hammer")
PVRS = ("in1k_mobilenetv2", "random_vit_s", "state_oracle")


class _ThisInterpreterKernel(manager.AsyncKernelManager):
  """An ipykernel on the interpreter running the tests, whatever kernel spec is installed."""

  @property
  def kernel_spec(self):
    return kernelspec.KernelSpec(
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        display_name="Python 3 (the tests' interpreter)", language="python")


def _cells(notebook):
  """What pairing keeps: each cell's type and source."""
  return [(c.cell_type, c.source.strip()) for c in notebook.cells]


def _path(name, ext):
  return os.path.join(NOTEBOOK_DIR, name + ext)


def test_every_ipynb_is_paired_with_a_py():
  ipynbs = sorted(f[:-6] for f in os.listdir(NOTEBOOK_DIR) if f.endswith(".ipynb"))
  assert ipynbs == PAIRS
  assert "leaderboard" in PAIRS


@pytest.mark.parametrize("name", PAIRS)
def test_pair_in_sync(name):
  """The `.py` and the `.ipynb` hold the same cells; the `.ipynb` stores no outputs."""
  text = jupytext.read(_path(name, ".py"))
  ipynb = jupytext.read(_path(name, ".ipynb"))
  assert text.metadata["jupytext"]["formats"] == "ipynb,py:percent"
  assert _cells(text) == _cells(ipynb), (
      f"notebooks/{name}.py and .ipynb differ: run `jupytext --sync notebooks/{name}.py`")
  for i, cell in enumerate(ipynb.cells):
    if cell.cell_type == "code":
      assert not cell.outputs and cell.execution_count is None, f"{name} cell {i} has outputs"


def test_out_of_sync_pair_is_detected():
  text = jupytext.read(_path("leaderboard", ".py"))
  edited = jupytext.reads(jupytext.writes(text, fmt="py:percent") + "\n# %%\nprint(1)\n",
                          fmt="py:percent")
  assert _cells(edited) != _cells(jupytext.read(_path("leaderboard", ".ipynb")))


def _run_in_kernel(name, cwd):
  """Executes notebooks/<name>.ipynb in a fresh kernel (raising on any cell's error)."""
  notebook = nbformat.read(_path(name, ".ipynb"), as_version=4)
  client = nbclient.NotebookClient(notebook, kernel_manager_class=_ThisInterpreterKernel,
                                   timeout=600, resources={"metadata": {"path": str(cwd)}})
  client.execute()
  return notebook


def _outputs(notebook, mime):
  """Every output of `mime` ("text/html", "image/png", ...; "stream" for printed text)."""
  found = []
  for cell in notebook.cells:
    for out in cell.get("outputs", ()):
      if mime == "stream" and out.output_type == "stream":
        found.append(out.text)
      elif mime in out.get("data", {}):
        found.append(out.data[mime])
  return found


@pytest.fixture
def kernel_env(monkeypatch, tmp_path):
  """The environment the kernel inherits: this checkout importable, a small setting."""
  path = os.environ.get("PYTHONPATH")
  monkeypatch.setenv("PYTHONPATH", ROOT + (os.pathsep + path if path else ""))
  monkeypatch.setenv("VCBENCH_NOTEBOOK_SMALL", "1")
  monkeypatch.setenv("VCBENCH_NO_PROGRESS", "1")
  monkeypatch.setenv("VCBENCH_CACHE", str(tmp_path / "cache"))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  return monkeypatch


def _small_store(path, pvrs=PVRS):
  """`pvrs` x the 5 Meta-World tasks x 2 seeds of CortexBench records; PVR i, task j and seed s
  score 10 i + 5 j + 2 s, so every cell is (10 i + 5 j + 1) ± 1.0 over seeds."""
  store = ResultStore(path)
  h = config_hash({"protocol": "tiny"})
  for pvr in pvrs:
    i = PVRS.index(pvr)
    for j, task in enumerate(METAWORLD):
      for seed in (0, 1):
        score = 10.0 * i + 5 * j + 2 * seed
        store.append(Cell(benchmark="cortexbench", task=f"metaworld/{task}", pvr=pvr, seed=seed),
                     h, {"score": score, "success_rate": score / 100, "val_score": score,
                         "best_epoch": 2, "episodes": 25, "train_loss": 0.3},
                     extra={"protocol": "tiny"})
  return store


def test_zoo_tour_runs_in_kernel(kernel_env, tmp_path):
  notebook = _run_in_kernel("zoo_tour", tmp_path)
  assert any("zoo entries" in text for text in _outputs(notebook, "stream"))


def test_cortexbench_results_runs_in_kernel(kernel_env, tmp_path):
  _small_store(tmp_path / "results.jsonl")
  kernel_env.setenv("VCBENCH_RESULTS", str(tmp_path / "results.jsonl"))
  kernel_env.setenv("VCBENCH_REPORT_DIR", str(tmp_path / "report"))
  notebook = _run_in_kernel("cortexbench_results", tmp_path)
  assert len(_outputs(notebook, "image/png")) == 3
  assert any("| state_oracle |" in text for text in _outputs(notebook, "text/markdown"))
  for name in ("rank_distribution.png", "rank_distribution_tasks.png", "task_scores.png"):
    assert (tmp_path / "report" / name).stat().st_size > 1000, name


def test_leaderboard_runs_in_kernel_on_two_stores(kernel_env, tmp_path):
  """The pivot holds the per-task report's numbers, best PVR first, and a figure is shown; a
  store listed twice counts once."""
  pytest.importorskip("pandas", reason="the leaderboard notebook needs pandas")
  first, second = _small_store(tmp_path / "a.jsonl", PVRS[:2]), _small_store(tmp_path / "b.jsonl",
                                                                               PVRS[2:])
  kernel_env.setenv("VCBENCH_RESULTS",
                    os.pathsep.join(str(s.path) for s in (first, second, second)))
  notebook = _run_in_kernel("leaderboard", tmp_path)
  printed = "".join(_outputs(notebook, "stream"))
  assert "10 records of cells found in several stores left out" in printed
  assert "30 cortexbench records from 2 store(s), 3 PVRs, 5 tasks" in printed
  pivot = _outputs(notebook, "text/html")[-1]
  assert pivot.index("state_oracle") < pivot.index("random_vit_s") < pivot.index(
      "in1k_mobilenetv2")
  rows = first.to_rows() + second.to_rows()
  report_cells = re.findall(r"\d+\.\d ± \d+\.\d", tables.cortexbench_task_markdown(rows))
  assert len(report_cells) == len(PVRS) * len(METAWORLD)
  assert all(f">{cell}<" in pivot for cell in report_cells)
  assert "41.0 ± 1.0" in report_cells  # state_oracle on hammer.
  assert len(_outputs(notebook, "image/png")) == 1
