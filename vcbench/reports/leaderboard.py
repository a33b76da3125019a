"""The leaderboard: each benchmark's headline numbers per PVR, from result-store rows only.

  CortexBench    Mean success (%): mean over suites of the suite's mean test success; Mean
                 rank: mean over suites of the PVR's rank among the PVRs on the board
                 (`benchmarks.cortexbench_scores`, the paper's two summaries)
  G-VUE          the summary score (Act weighted 1.5) and each category's score (the mean of
                 its task scores), per seed, then mean ± 95% interval (`reports.gvue`)
  RobustNav      the PVR's agent: clean SPL, SPL under corruption (mean over the corruption
                 conditions, each at its highest severity run) and the mean relative SPL drop
                 over them (%; lower is better)
  The Colosseum  clean success, success under perturbation (mean over single factors) and the
                 mean % change over factors (per seed, then mean ± s.e.; `reports.colosseum`)

The overall rank is the mean over benchmarks of the PVR's rank by each benchmark's *ranking
column* (`RANKED_BY`), over the benchmarks it has numbers in. CortexBench's is Mean success:
Mean rank among a handful of PVRs moves in whole steps on small per-suite differences (the
quick board had a random ViT-Ti ahead of the MAE one on Mean rank, 13 points behind it on Mean
success). For the robustness benchmarks it is performance under perturbation, not the
relative drop: a policy that ignores the image (a random encoder's often does) loses nothing
to a corruption and would win on drop alone. With one seed per cell no ordering here is
significant; the page says how many seeds.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vcbench.benchmarks import colosseum as cb
from vcbench.benchmarks import cortexbench_scores as cs
from vcbench.benchmarks import gvue
from vcbench.benchmarks import robustnav as rn
from vcbench.reports import colosseum_compare
from vcbench.reports import colosseum_rows
from vcbench.reports import gvue as gvue_report

BENCHMARKS = ("cortexbench", "gvue", "robustnav", "colosseum")
NAMES = {"cortexbench": "CortexBench", "gvue": "G-VUE", "robustnav": "RobustNav",
         "colosseum": "The Colosseum"}


def _column(key, label, unit="%", digits=1, higher=True, help_text=""):
  return {"key": key, "label": label, "unit": unit, "digits": digits,
          "higher_is_better": higher, "help": help_text}


COLUMNS = {
    "cortexbench": [
        _column("cortexbench.mean_success", "Mean success",
                help_text="mean over suites of the suite's mean test success"),
        _column("cortexbench.mean_rank", "Mean rank", "", 2, False,
                "mean over suites of the rank among the PVRs on this board")],
    "gvue": [_column("gvue.summary", "Summary", "", 1,
                     help_text="G-VUE's summary score (Act weighted 1.5)")] + [
        _column(f"gvue.{c}", c.capitalize(), "", 1, help_text=f"mean of the {c} task scores")
        for c in gvue.CATEGORIES],
    "robustnav": [
        _column("robustnav.clean_spl", "Clean SPL", help_text="SPL of the clean-trained agent"),
        _column("robustnav.corrupted_spl", "Corrupted SPL",
                help_text="mean SPL over the corruption conditions"),
        _column("robustnav.spl_drop", "Rel. SPL drop", higher=False,
                help_text="mean over conditions of (clean SPL - SPL) / clean SPL")],
    "colosseum": [
        _column("colosseum.clean", "Clean success", help_text="success without perturbation"),
        _column("colosseum.perturbed", "Perturbed success",
                help_text="mean success over the single-factor test sets"),
        _column("colosseum.change", "Mean % change",
                help_text="mean over factors of the % change of success vs no perturbation")],
}
RANKED_BY = {"cortexbench": "cortexbench.mean_success", "gvue": "gvue.summary",
             "robustnav": "robustnav.corrupted_spl", "colosseum": "colosseum.perturbed"}

Values = dict[str, dict[str, float]]   # pvr -> column key -> value (NaN: none)


def _of(rows: Iterable[Mapping[str, Any]], *benchmarks: str) -> list[Mapping[str, Any]]:
  return [r for r in rows if r.get("benchmark") in benchmarks]


def cortexbench_values(rows) -> tuple[Values, Values]:
  board = cs.leaderboard(cs.latest_rows(_of(rows, "cortexbench")))
  values = {s.pvr: {"cortexbench.mean_success": s.mean_success,
                    "cortexbench.mean_rank": s.mean_rank} for s in board.standings}
  return values, {}


def _mean_hw(per_seed: Sequence[float]) -> tuple[float, float]:
  return gvue_report.mean_interval(v for v in per_seed if math.isfinite(v))


def gvue_values(rows) -> tuple[Values, Values]:
  """Summary and category scores per seed (over the seeds every task of the PVR has)."""
  values: Values = {}
  errors: Values = {}
  for pvr, tasks in gvue_report.collect(_of(rows, "gvue")).items():
    seeds = sorted(set.intersection(*(set(s) for s in tasks.values())))
    partial = len(tasks) < len(gvue.TASKS.names())
    per_seed = {"gvue.summary": [gvue.summary_score({t: tasks[t][s] for t in tasks},
                                                    partial=partial) for s in seeds]}
    for c in gvue.CATEGORIES:
      mine = [t for t in tasks if gvue.TASKS.get(t).category == c]
      per_seed[f"gvue.{c}"] = [np.mean([gvue.task_score(t, tasks[t][s]) for t in mine])
                               if mine else math.nan for s in seeds]
    for key, seq in per_seed.items():
      mean, hw = _mean_hw(seq)
      values.setdefault(pvr, {})[key] = mean
      if math.isfinite(hw):
        errors.setdefault(pvr, {})[key] = hw
  return values, errors


def _rel_drop(clean: float, spl: float) -> float:
  return 100.0 * (clean - spl) / clean if clean > 0 else math.nan


def robustnav_values(rows) -> tuple[Values, Values]:
  """The clean-trained agents (adaptation 'none'); a PVR with several agents averages them."""
  cells: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
  for r in _of(rows, rn.BENCHMARK):
    if r.get("adaptation") != "none":
      continue
    by_name = cells.setdefault((r["pvr"], r["task"]), {})
    held = by_name.get(r["corruption"])
    if held is None or int(r["severity"]) > int(held["severity"]):
      by_name[r["corruption"]] = r   # Each corruption at its highest severity run.
  per_agent: dict[str, list[tuple[float, float, float, float]]] = {}
  for (pvr, _), by_name in cells.items():
    clean = by_name.get("none")
    conds = [r for name, r in by_name.items() if name != "none"]
    if clean is None or not conds:
      continue
    spl = [float(r["spl"]) for r in conds]
    per_agent.setdefault(pvr, []).append((
        float(clean["spl"]), float(np.mean(spl)),
        float(np.mean([_rel_drop(float(clean["spl"]), s) for s in spl])),
        float(clean.get("spl_ci95") or math.nan)))
  values: Values = {}
  errors: Values = {}
  for pvr, agents in per_agent.items():
    clean, corrupted, drop, ci = np.mean(np.asarray(agents), axis=0)
    values[pvr] = {"robustnav.clean_spl": clean, "robustnav.corrupted_spl": corrupted,
                   "robustnav.spl_drop": drop}
    if len(agents) == 1 and math.isfinite(ci):
      errors[pvr] = {"robustnav.clean_spl": ci}
  return values, errors


def colosseum_values(rows) -> tuple[Values, Values]:
  """Per seed: task-averaged clean success, its mean over factors and the mean % change over
  factors; then mean ± s.e. over seeds."""
  values: Values = {}
  errors: Values = {}
  for pvr, by_seed in colosseum_compare.per_seed_tables(_of(rows, cb.BENCHMARK)).items():
    per_seed: dict[str, list[float]] = {"colosseum.clean": [], "colosseum.perturbed": [],
                                        "colosseum.change": []}
    for per_task in by_seed.values():
      factors = sorted({s for t in per_task.values() for s in t} - {cb.NONE, cb.ALL})
      success = [colosseum_rows.task_mean(per_task, f) for f in factors]
      change = [cb.percent_change(per_task, f) for f in factors]
      per_seed["colosseum.clean"].append(colosseum_rows.task_mean(per_task, cb.NONE))
      per_seed["colosseum.perturbed"].append(colosseum_compare.mean_se(success)[0])
      per_seed["colosseum.change"].append(colosseum_compare.mean_se(change)[0])
    for key, seq in per_seed.items():
      mean, se, _ = colosseum_compare.mean_se(seq)
      values.setdefault(pvr, {})[key] = mean
      if math.isfinite(se):
        errors.setdefault(pvr, {})[key] = se
  return values, errors


HEADLINES = {"cortexbench": cortexbench_values, "gvue": gvue_values,
             "robustnav": robustnav_values, "colosseum": colosseum_values}


def headlines(rows: Iterable[Mapping[str, Any]], benchmarks: Sequence[str] = BENCHMARKS
              ) -> tuple[Values, Values]:
  """(values, errors): pvr -> column key -> number, over the given benchmarks."""
  rows = list(rows)
  values: Values = {}
  errors: Values = {}
  for b in benchmarks:
    v, e = HEADLINES[b](rows)
    for pvr, cols in v.items():
      values.setdefault(pvr, {}).update(cols)
    for pvr, cols in e.items():
      errors.setdefault(pvr, {}).update(cols)
  return values, errors


def overall_ranks(values: Values, pvrs: Sequence[str], benchmarks: Sequence[str] = BENCHMARKS
                  ) -> dict[str, float]:
  """pvr -> mean over benchmarks of its rank by `RANKED_BY` (ties share the mean rank), over the
  benchmarks it has a number in; PVRs with none are left out."""
  ranks: dict[str, list[float]] = {p: [] for p in pvrs}
  for b in benchmarks:
    key = RANKED_BY[b]
    higher = next(c for c in COLUMNS[b] if c["key"] == key)["higher_is_better"]
    scores = {p: values.get(p, {}).get(key, math.nan) for p in pvrs}
    scores = {p: (v if higher else -v) for p, v in scores.items() if math.isfinite(v)}
    for p, r in cs.average_ranks(scores).items():
      ranks[p].append(r)
  return {p: float(np.mean(r)) for p, r in ranks.items() if r}


def _plain(x: Any) -> Any:
  """JSON-safe: NaN and infinities become None (JSON has neither)."""
  return None if x is None or not math.isfinite(float(x)) else round(float(x), 4)


def table(rows: Iterable[Mapping[str, Any]], pvrs: Sequence[str], *,
          benchmarks: Sequence[str] = BENCHMARKS, variant: str = "", generated: str = "",
          code_version: str = "", reports: Mapping[str, str | None] | None = None,
          links: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
          provenance: Mapping[str, Mapping[str, Any]] | None = None,
          notes: Sequence[str] = ()) -> dict[str, Any]:
  """The page's table (`leaderboard_page.write_page`): one row per PVR, ordered by overall rank
  (unranked last), then name."""
  values, errors = headlines(rows, benchmarks)
  ranks = overall_ranks(values, pvrs, benchmarks)
  keys = [c["key"] for b in benchmarks for c in COLUMNS[b]]
  out_rows = []
  for pvr in sorted(pvrs, key=lambda p: (p not in ranks, ranks.get(p, 0.0), p)):
    mine = values.get(pvr, {})
    out_rows.append({
        "pvr": pvr, "overall_rank": _plain(ranks.get(pvr)),
        "values": {k: _plain(mine.get(k)) for k in keys},
        "errors": {k: _plain(v) for k, v in errors.get(pvr, {}).items()
                   if k in keys and _plain(v) is not None},
        "links": dict((links or {}).get(pvr, {})),
        "provenance": dict((provenance or {}).get(pvr, {}))})
  return {"title": "vcbench leaderboard", "variant": variant, "generated": generated,
          "code_version": code_version, "notes": list(notes),
          "benchmarks": [{"key": b, "name": NAMES[b], "report": (reports or {}).get(b),
                          "columns": COLUMNS[b]} for b in benchmarks],
          "rows": out_rows}


def _cell(row: Mapping[str, Any], column: Mapping[str, Any]) -> str:
  v = row["values"].get(column["key"])
  if v is None:
    return "–"
  err = row["errors"].get(column["key"])
  text = f"{v:.{column['digits']}f}"
  return text + (f" ± {err:.{column['digits']}f}" if err is not None else "")


def markdown(t: Mapping[str, Any]) -> str:
  """The table as markdown (leaderboard.md): the same numbers as the page."""
  head = ["PVR", "Overall rank"] + [f"{b['name']}: {c['label']}" for b in t["benchmarks"]
                                    for c in b["columns"]]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for row in t["rows"]:
    rank = "–" if row["overall_rank"] is None else f"{row['overall_rank']:.2f}"
    cells = [row["pvr"], rank] + [_cell(row, c) for b in t["benchmarks"] for c in b["columns"]]
    lines.append("| " + " | ".join(cells) + " |")
  notes = "\n".join(f"- {n}" for n in t["notes"])
  return (f"# {t['title']} ({t['variant']})\n\n" + "\n".join(lines) + "\n\n" + notes + "\n")
