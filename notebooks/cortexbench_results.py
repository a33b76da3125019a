# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # CortexBench results
#
# The leaderboard (the paper's Table 2: per-suite mean ± standard error over seeds, Mean Rank,
# Mean Success), the per-task table, the rank distribution (Figure 5) and per-task scores, all
# read back from a result store, never from a run's memory.
#
# Set `VCBENCH_RESULTS` to the store (default `runs/cortexbench/results.jsonl`, relative to the
# working directory or the repository root) and optionally `VCBENCH_REPORT_DIR` for the figures
# (default: a temporary directory). A PVR that misses some of a suite's evaluated tasks is shown
# with `*` and is not ranked in that suite.
#
# Paired with `cortexbench_results.ipynb` by jupytext (`jupytext --sync notebooks/*.py` after
# editing either); the tests run it in a Jupyter kernel on a store they write.

# %%
import os
import pathlib
import tempfile

from vcbench.benchmarks import cortexbench
from vcbench.benchmarks import cortexbench_scores
from vcbench.reports import plots
from vcbench import store as store_lib
from vcbench.reports import tables

try:
  from IPython.display import Image, Markdown, display
except ImportError:  # Run as plain Python (`python notebooks/cortexbench_results.py`): print.
  Image = Markdown = display = None


def show_markdown(text):
  if display is None:
    print(text)
  else:
    display(Markdown(text))


def show_figure(fig, path):
  """Saves `fig` (a matplotlib Figure) to `path` and shows it."""
  plots.save_figure(fig, path)
  if display is None:
    print("figure:", path)
  else:
    display(Image(data=plots.png_bytes(fig)))


def find_store(name):
  path = pathlib.Path(name)
  if not path.is_absolute() and not path.exists() and (pathlib.Path("..") / path).exists():
    path = pathlib.Path("..") / path  # Opened from notebooks/: the default is repo-relative.
  if not path.is_file():
    raise FileNotFoundError(f"no result store at {str(path)!r}; set VCBENCH_RESULTS to the "
                            "results.jsonl a CortexBench run wrote")
  return path


STORE = find_store(os.environ.get("VCBENCH_RESULTS", "runs/cortexbench/results.jsonl"))
OUT = pathlib.Path(os.environ.get("VCBENCH_REPORT_DIR") or tempfile.mkdtemp(prefix="cortexbench_"))
rows = store_lib.ResultStore(STORE).to_rows(latest_only=True, benchmark=cortexbench.BENCHMARK,
                                            corruption="none")
protocols = sorted({str(r.get("extra/protocol")) for r in rows})
print(f"{STORE}: {len(rows)} CortexBench records, protocols {protocols}")

# %% [markdown]
# ## Leaderboard

# %%
board = cortexbench_scores.leaderboard(rows)
show_markdown(tables.cortexbench_markdown(board))

# %% [markdown]
# ## Per task (mean ± se over seeds)

# %%
show_markdown(tables.cortexbench_task_markdown(rows))

# %% [markdown]
# ## Rank distribution
#
# Per suite as in the paper; with a single suite every PVR has one rank, so the per-task
# distribution is drawn too.

# %%
suite_plot = plots.rank_distribution_figure(board.suite_ranks(),
                                            title="Rank distribution per suite")
task_plot = plots.rank_distribution_figure(cortexbench_scores.task_ranks(rows),
                                           title="Rank distribution per task")
show_figure(suite_plot, OUT / "rank_distribution.png")
show_figure(task_plot, OUT / "rank_distribution_tasks.png")

# %% [markdown]
# ## Score per task

# %%
scores = cortexbench_scores.task_scores(rows)
bars = plots.task_bars_figure({pvr: scores[pvr] for pvr in board.pvrs()},
                              title="Score per task (error bars: standard error over seeds)")
show_figure(bars, OUT / "task_scores.png")
