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
# # Leaderboard: PVR × task
#
# Loads one or more result stores into a pandas DataFrame (`ResultStore.to_dataframe`), pivots
# it to PVR × task (mean ± standard error over seeds) and plots the pivot as a matplotlib Figure.
#
# The stores come from the parameters cell below: `VCBENCH_RESULTS`, one path or several joined
# by `:` (default `runs/cortexbench_quick/results.jsonl`, what `launch/quickstart.sh` writes;
# relative to the working directory or the repository root). Paired with `leaderboard.ipynb` by
# jupytext (`jupytext --sync notebooks/*.py` after editing either); the tests run it in a Jupyter
# kernel on a store they write.

# %% tags=["parameters"]
import os

STORES = os.environ.get("VCBENCH_RESULTS", "runs/cortexbench_quick/results.jsonl")
BENCHMARK = "cortexbench"
METRIC = "score"

# %%
import pathlib

import pandas as pd

from vcbench.reports import plots
from vcbench import store as store_lib

try:
  from IPython.display import Image, display
except ImportError:  # Run as plain Python (`python notebooks/leaderboard.py`): print instead.
  Image = display = None


def show(frame_or_figure):
  """Shows a DataFrame as a table and a Figure as an image, in a kernel or a terminal."""
  is_figure = hasattr(frame_or_figure, "savefig")
  if display is None:
    print("(a figure)" if is_figure else frame_or_figure.to_string())
  else:
    display(Image(data=plots.png_bytes(frame_or_figure)) if is_figure else frame_or_figure)


def find_store(name):
  path = pathlib.Path(name)
  if not path.is_absolute() and not path.exists() and (pathlib.Path("..") / path).exists():
    path = pathlib.Path("..") / path  # Opened from notebooks/: the default is repo-relative.
  if not path.is_file():
    raise FileNotFoundError(f"no result store at {str(path)!r}; set VCBENCH_RESULTS to the "
                            "results.jsonl a run wrote (several joined by ':')")
  return path


def load(paths):
  """The clean records of `BENCHMARK` in every store, one DataFrame, a `store` column added.

  A cell found in several stores (a sweep re-run into another workdir) counts once, as the
  reports count a re-evaluated cell once: the record of the store listed last is kept.
  """
  frames = [store_lib.ResultStore(find_store(p)).to_dataframe(
      latest_only=True, benchmark=BENCHMARK, corruption="none").assign(store=str(p))
            for p in paths]
  frame = pd.concat(frames, ignore_index=True)
  unique = frame.drop_duplicates(subset=list(store_lib.CELL_FIELDS), keep="last")
  if len(unique) < len(frame):
    print(f"{len(frame) - len(unique)} records of cells found in several stores left out")
  return unique.reset_index(drop=True)


frame = load([p for p in STORES.split(os.pathsep) if p])
print(f"{len(frame)} {BENCHMARK} records from {frame['store'].nunique()} store(s), "
      f"{frame['pvr'].nunique()} PVRs, {frame['task'].nunique()} tasks")
show(frame[["pvr", "task", "seed", METRIC, "config_hash"]].head())

# %% [markdown]
# ## PVR × task: mean ± standard error over seeds
#
# Rows are sorted by the mean over tasks (best first). "± –": a single seed, so no standard
# error; an empty cell: the PVR has no record for that task.

# %%
def mean_se(stats):
  """"mean ± se" strings from a frame with `mean`, `sem` and `count` columns."""
  se = stats["sem"].map(lambda s: "–" if pd.isna(s) else f"{s:.1f}")
  return stats["mean"].map(lambda m: f"{m:.1f}") + " ± " + se


stats = frame.groupby(["pvr", "task"])[METRIC].agg(["mean", "sem", "count"])
means = stats["mean"].unstack("task")
stderrs = stats["sem"].unstack("task")
order = means.mean(axis=1).sort_values(ascending=False).index
means, stderrs = means.loc[order], stderrs.loc[order]
pivot = mean_se(stats).unstack("task").loc[order].fillna("")
show(pivot)

# %% [markdown]
# ## The pivot as a figure
#
# The report's per-task bars (`plots.task_bars_figure`) drawn from the pivot; error bars are the
# standard errors.

# %%
class Score:
  """What `task_bars_figure` reads of a score: its mean and standard error."""

  def __init__(self, mean, stderr):
    self.mean, self.stderr = float(mean), float(stderr)


scores = {pvr: {task: Score(means.loc[pvr, task], stderrs.loc[pvr, task])
                for task in means.columns if pd.notna(means.loc[pvr, task])}
          for pvr in means.index}
figure = plots.task_bars_figure(scores, title=f"{BENCHMARK}: {METRIC} per task (± s.e.)")
show(figure)
