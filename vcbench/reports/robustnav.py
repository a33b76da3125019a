"""The RobustNav report, from result-store rows only (`launch/robustnav_report.py` is its CLI).

  table2.md      Table 2: SR / SPL of every agent under every condition (visual at severity 5)
  table3.md      Table 3: the RGB agent clean vs adapted (PAD AP/RP, augmentation, fine-tune)
  severity.md    the severity sweep: SR (SPL) of every agent at severities 0 (clean) to 5
  severity.png   SPL (and SR) against severity, one line per corruption, a panel per agent
  behaviour.png  Figure 4: failed actions, min distance to goal, stop failure (+/-) per condition
"""
from __future__ import annotations

import math
import os
import pathlib
from typing import Any, Mapping

from matplotlib import figure as figure_lib
import numpy as np

from vcbench.benchmarks import robustnav as rn
from vcbench.reports import plots
from vcbench.reports import tables
from vcbench import store as store_lib

FILES = {"table2": "table2.md", "table3": "table3.md", "severity_table": "severity.md",
         "severity": "severity.png", "behaviour": "behaviour.png"}
METHODS = ("none", "pad_ap", "pad_rp", "augment", "finetune")
METHOD_NAMES = {"none": "clean-trained agent", "pad_ap": "+ PAD action prediction",
                "pad_rp": "+ PAD rotation prediction", "augment": "+ data augmentation",
                "finetune": "+ fine-tune, task reward (upper bound)"}
BEHAVIOUR = (("failed_actions", "failed actions"), ("min_distance", "min. distance to goal (m)"),
             ("stop_failure_pos", "stop failure, positive (%)"),
             ("stop_failure_neg", "stop failure, negative (%)"))
BEHAVIOUR_CONDITIONS = ("none", "defocus_blur", "speckle_noise", "motion_drift",
                        "defocus_blur+motion_drift", "speckle_noise+motion_drift")


def _index(rows: Any) -> dict[tuple, Mapping[str, Any]]:
  """(task, adaptation, corruption, severity) -> row (the latest per cell); `rows` may be a
  DataFrame (see `store.as_rows`)."""
  out = {}
  for r in store_lib.as_rows(rows):
    if r.get("benchmark") == rn.BENCHMARK:
      out[(r["task"], r["adaptation"], r["corruption"], int(r["severity"]))] = r
  return out


def _fmt(row, key: str, digits: int = 1) -> str:
  """The value, with its 95% interval when the row has one (`<key>_ci95`)."""
  v = None if row is None else row.get(key)
  if v is None or (isinstance(v, float) and math.isnan(v)):
    return "–"
  ci = row.get(f"{key}_ci95")
  half = "" if ci is None or (isinstance(ci, float) and math.isnan(ci)) else f" ± {ci:.{digits}f}"
  return f"{v:.{digits}f}{half}"


def _episodes_note(rows) -> str:
  """Which episodes the cells were evaluated on, from the rows (cells written before the split
  was recorded were evaluated on the val apartments)."""
  rows = [r for r in store_lib.as_rows(rows) if r.get("benchmark") == rn.BENCHMARK]
  splits = sorted({str(r.get("extra/split") or "val") for r in rows})
  counts = sorted({int(r["episodes"]) for r in rows if r.get("episodes") is not None})
  many = "/".join(str(n) for n in counts) or "?"
  return (f"SR and SPL in % ± the 95% interval over {many} fixed episodes per cell of the "
          f"{' and '.join(splits)} apartments; '–' = not evaluated.")


def table2_markdown(rows) -> str:
  idx = _index(rows)
  agents = sorted({k[0] for k in idx if k[1] == "none"})
  header = ["#", "condition", "V", "D"] + [f"{a} {m}" for a in agents for m in ("SR", "SPL")]
  body = []
  for i, cond in enumerate(rn.table2(), start=1):
    cells = [str(i), cond.name if cond.name != "none" else "clean",
             "✓" if cond.visual else "", "✓" if cond.dynamics else ""]
    for a in agents:
      row = idx.get((a, "none", cond.name, cond.severity))
      cells += [_fmt(row, "success"), _fmt(row, "spl")]
    body.append(cells)
  note = ("Visual corruptions at severity 5 (camera_crack and lower_fov have one level). "
          + _episodes_note(rows))
  return "# RobustNav Table 2 (vcbench-nav)\n\n" + tables.markdown_table(header, body) + \
      f"\n\n{note}\n"


def table3_markdown(rows) -> str:
  idx = _index(rows)
  agents = sorted({k[0] for k in idx if k[1] != "none"})
  out = ["# RobustNav Table 3 (vcbench-nav): resisting visual corruptions\n"]
  for agent in agents:
    conds = sorted({(k[2], k[3]) for k in idx if k[0] == agent and k[1] != "none"},
                   key=lambda c: (c[0] != "none", c[0]))
    header = ["#", "method"] + [f"{'clean' if c == 'none' else c} {m}" for c, _ in conds
                                 for m in ("SR", "SPL")]
    body = []
    for i, method in enumerate(METHODS, start=1):
      cells = [str(i), METHOD_NAMES[method]]
      for c, s in conds:
        row = idx.get((agent, method, c, s))
        cells += [_fmt(row, "success"), _fmt(row, "spl")]
      body.append(cells)
    out.append(f"## {agent}\n\n" + tables.markdown_table(header, body) + "\n")
  if len(out) == 1:
    out.append("No adaptation records in the store.\n")
  else:
    out.append(_episodes_note(rows) + "\n")
  return "\n".join(out)


def severity_markdown(rows) -> str:
  """The severity sweep: a table per clean-trained agent, a row per graded corruption, SR ± 95%
  (SPL) at severities 0 (clean) to 5."""
  idx = _index(rows)
  agents = sorted({k[0] for k in idx if k[1] == "none"})
  out = ["# RobustNav severity sweep (vcbench-nav)\n"]
  for agent in agents:
    def cell(name, s):
      row = idx.get((agent, "none", "none" if s == 0 else name, s))
      return "–" if row is None else f"{_fmt(row, 'success')} ({_fmt(row, 'spl')})"
    body = [[name] + [cell(name, s) for s in range(6)] for name in rn.SWEEP]
    out.append(f"## {agent}\n\n" + tables.markdown_table(
        ["corruption"] + ["clean"] + [f"severity {s}" for s in range(1, 6)], body) + "\n")
  out.append("SR (SPL); " + _episodes_note(rows) + "\n")
  return "\n".join(out)


def severity_plot(rows, path: str | os.PathLike[str], metric: str = "spl") -> pathlib.Path:
  """Writes `severity_figure(rows, metric)` to the PNG `path`; returns it."""
  return plots.save_figure(severity_figure(rows, metric), path, dpi=110)


def severity_figure(rows, metric: str = "spl") -> figure_lib.Figure:
  """`metric` against severity, one line per corruption, a panel per clean-trained agent."""
  idx = _index(rows)
  agents = sorted({k[0] for k in idx if k[1] == "none"}) or ["(none)"]
  fig = plots.new_figure(figsize=(4.2 * len(agents), 3.4))
  for j, agent in enumerate(agents):
    ax = fig.add_subplot(1, len(agents), j + 1)
    clean = idx.get((agent, "none", "none", 0))
    for name in rn.SWEEP:
      pts = [(s, idx[(agent, "none", name, s)][metric]) for s in range(1, 6)
             if (agent, "none", name, s) in idx]
      if clean is not None:
        pts = [(0, clean[metric])] + pts
      if pts:
        ax.plot(*zip(*pts), marker="o", label=name)
    ax.set_title(agent)
    ax.set_xlabel("severity (0 = clean)")
    ax.set_ylabel(metric.upper())
    ax.set_xticks(range(6))
    ax.grid(alpha=0.3)
  fig.axes[0].legend(fontsize=7)
  return fig


def behaviour_plot(rows, path: str | os.PathLike[str]) -> pathlib.Path:
  """Writes `behaviour_figure(rows)` to the PNG `path`; returns it."""
  return plots.save_figure(behaviour_figure(rows), path, dpi=110)


def behaviour_figure(rows) -> figure_lib.Figure:
  """Figure 4: the behaviour metrics per condition, a row of panels per clean-trained agent."""
  idx = _index(rows)
  agents = sorted({k[0] for k in idx if k[1] == "none"}) or ["(none)"]
  fig = plots.new_figure(figsize=(14, 2.8 * len(agents)))
  colors = {"clean": "#4c72b0", "vis": "#dd8452", "dyn": "#55a868", "vis+dyn": "#c44e52"}
  for j, agent in enumerate(agents):
    for i, (key, label) in enumerate(BEHAVIOUR):
      ax = fig.add_subplot(len(agents), len(BEHAVIOUR), j * len(BEHAVIOUR) + i + 1)
      for x, name in enumerate(BEHAVIOUR_CONDITIONS):
        cond = rn.Condition.parse(name, 5)
        row = idx.get((agent, "none", name, cond.severity))
        v = np.nan if row is None or row.get(key) is None else row[key]
        ax.bar(x, v, color=colors[cond.kind])
      ax.set_xticks(range(len(BEHAVIOUR_CONDITIONS)))
      ax.set_xticklabels(["clean", "D.B.", "S.N.", "M.D.", "D.B.+M.D.", "S.N.+M.D."],
                         rotation=45, fontsize=7)
      ax.set_title(f"{agent}: {label}" if i == 0 else label, fontsize=8)
  return fig


def write_report(rows, out_dir: str | os.PathLike[str]) -> dict[str, pathlib.Path]:
  """Writes the report files for `rows` (store rows, or a DataFrame of them from
  `ResultStore.to_dataframe`); returns their paths."""
  rows = [r for r in store_lib.as_rows(rows) if r.get("benchmark") == rn.BENCHMARK]
  if not rows:
    raise ValueError("no RobustNav records among the rows")
  out = pathlib.Path(out_dir)
  paths = {k: out / name for k, name in FILES.items()}
  plots.write_text(paths["table2"], table2_markdown(rows))
  plots.write_text(paths["table3"], table3_markdown(rows))
  plots.write_text(paths["severity_table"], severity_markdown(rows))
  severity_plot(rows, paths["severity"])
  behaviour_plot(rows, paths["behaviour"])
  return paths
