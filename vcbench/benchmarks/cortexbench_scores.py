"""CortexBench's two summaries computed from the result store: Mean Success and Mean Rank.

* Mean Success: the average of a PVR's suite scores;
* Mean Rank: in every suite rank the PVRs by score (1 = best), then average a PVR's ranks.

Both are only meaningful when every PVR is scored on the same tasks: a PVR that misses the hardest
task of a suite would otherwise look better than one that ran it. So a suite's task set is the union
of the tasks any PVR has in the store; a PVR missing one of them is *incomplete* there: its score is
reported (flagged) but it is not ranked in that suite and the suite does not enter its Mean Success.

Aggregation reads only flat rows from `ResultStore.to_rows` (never a run's memory), so a table can
always be rebuilt from disk. A row's `score` is on a 0-100 scale in every suite (success % or
return/10), higher is better.
"""
from __future__ import annotations

import collections
import dataclasses
import datetime
import math
import warnings
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vcbench.benchmarks.cortexbench import BENCHMARK, SCORE, SUITES, parse_task_key, task_key

@dataclasses.dataclass(frozen=True)
class SuiteScore:
  """A PVR's score in one suite (or on one task, then n_tasks == n_tasks_total == 1).

  Attributes:
    mean: mean over tasks of each task's mean over seeds.
    stderr: std (ddof=1) / sqrt(n_seeds) of the per-seed task averages; NaN if n_seeds < 2.
    n_seeds: seeds that have every task this PVR has in the suite (the seeds behind `stderr`).
    n_tasks: tasks this PVR has in the suite.
    n_tasks_total: tasks any PVR has in the suite.
    complete: n_tasks == n_tasks_total; only complete scores are ranked and averaged.
  """

  mean: float
  stderr: float
  n_seeds: int
  n_tasks: int
  n_tasks_total: int
  complete: bool


@dataclasses.dataclass(frozen=True)
class Standing:
  """One PVR's row of the leaderboard.

  Attributes:
    pvr: the PVR, with " (<adaptation>)" appended unless it was evaluated frozen.
    suites: its score in every suite it has rows in.
    ranks: its rank in every suite where it is complete (1 = best; ties share the mean rank).
    mean_rank: mean of `ranks`; NaN if it is ranked nowhere.
    mean_success: mean of its complete suite scores; NaN if there are none.
    n_ranked: number of suites it is ranked in.
  """

  pvr: str
  suites: dict[str, SuiteScore]
  ranks: dict[str, float]
  mean_rank: float
  mean_success: float
  n_ranked: int


@dataclasses.dataclass(frozen=True)
class Leaderboard:
  """The CortexBench table: suites with rows (in `SUITES` order) and one `Standing` per PVR.

  `standings` is sorted by mean rank (unranked last), then mean success (higher first), then name.
  `tasks[suite]` is the suite's evaluated task set, in the suite's task order.
  """

  suites: tuple[str, ...]
  tasks: dict[str, tuple[str, ...]]
  standings: tuple[Standing, ...]

  def standing(self, pvr: str) -> Standing:
    for s in self.standings:
      if s.pvr == pvr:
        return s
    raise KeyError(f"no PVR {pvr!r} on the leaderboard; it has {self.pvrs()}")

  def pvrs(self) -> list[str]:
    return [s.pvr for s in self.standings]

  def suite_ranks(self) -> dict[str, list[float]]:
    """For the rank-distribution plot: each PVR's ranks over the suites it is ranked in."""
    return {s.pvr: [s.ranks[name] for name in self.suites if name in s.ranks]
            for s in self.standings}


# (pvr, suite, task) -> {seed: score}
_Scores = dict[tuple[str, str, str], dict[int, float]]


def entry_name(row: Mapping[str, Any]) -> str:
  """Frozen and adapted evaluations of one PVR are different leaderboard entries."""
  adaptation = row.get("adaptation", "frozen")
  return row["pvr"] if adaptation == "frozen" else f"{row['pvr']} ({adaptation})"


def _time_key(row: Mapping[str, Any]) -> datetime.datetime:
  """Sort key for "later record wins"; rows without a parseable time count as oldest."""
  try:
    t = datetime.datetime.fromisoformat(str(row.get("time")))
  except ValueError:
    return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
  return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def latest_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
  """The clean CortexBench rows, one per (entry, task, seed): the latest by time.

  Two config hashes for one cell mean the cell was re-run with a different config; the table
  must show one of them, so it keeps the later and warns, since mixing configs is usually a
  mistake (e.g. a quick and a full protocol run in one store).
  """
  mine = [r for r in rows
          if r.get("benchmark") == BENCHMARK and r.get("corruption", "none") == "none"]
  by_cell: dict[tuple[str, str, int], list[Mapping[str, Any]]] = collections.defaultdict(list)
  for r in mine:
    by_cell[(entry_name(r), r["task"], int(r["seed"]))].append(r)
  out = []
  for (pvr, task, seed), group in by_cell.items():
    group = sorted(group, key=_time_key)  # Stable: among equal times the later row wins.
    hashes = sorted({str(r.get("config_hash")) for r in group})
    if len(hashes) > 1:
      warnings.warn(f"cortexbench cell pvr={pvr!r} task={task!r} seed={seed} has records with "
                    f"config hashes {hashes}; using the latest ({group[-1].get('config_hash')}, "
                    f"{group[-1].get('time')})", RuntimeWarning, stacklevel=4)
    out.append(group[-1])
  return out


def _collect(rows: Iterable[Mapping[str, Any]]) -> _Scores:
  """Seed scores per (entry, suite, task), after validating suites and scores."""
  scores: _Scores = collections.defaultdict(dict)
  for r in latest_rows(rows):
    suite_name, task = parse_task_key(r["task"])
    if suite_name not in SUITES:
      raise ValueError(f"cortexbench row with task {r['task']!r} names unknown suite "
                       f"{suite_name!r}; valid suites: {sorted(SUITES)}")
    if task not in SUITES[suite_name].tasks:
      warnings.warn(f"{r['task']!r} is not a CortexBench task ({list(SUITES[suite_name].tasks)});"
                    " it is scored with its suite", RuntimeWarning, stacklevel=3)
    value = r.get(SCORE)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
      warnings.warn(f"cortexbench row pvr={r['pvr']!r} task={r['task']!r} seed={r['seed']} has "
                    f"no finite {SCORE!r} ({value!r}); ignored", RuntimeWarning, stacklevel=3)
      continue
    scores[(entry_name(r), suite_name, task)][int(r["seed"])] = float(value)
  return dict(scores)


def _task_order(suite_name: str, tasks: Iterable[str]) -> tuple[str, ...]:
  """The suite's own task order, then any non-CortexBench tasks alphabetically."""
  known = SUITES[suite_name].tasks
  tasks = set(tasks)
  return tuple(t for t in known if t in tasks) + tuple(sorted(tasks - set(known)))


def _stderr(values: Sequence[float]) -> float:
  if len(values) < 2:
    return math.nan
  return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def _score(per_task: Mapping[str, Mapping[int, float]], n_total: int) -> SuiteScore:
  """Mean over tasks of seed means; stderr over the seeds that have every one of these tasks."""
  task_means = [float(np.mean(list(seeds.values()))) for seeds in per_task.values()]
  full_seeds = sorted(set.intersection(*(set(seeds) for seeds in per_task.values())))
  per_seed = [float(np.mean([seeds[s] for seeds in per_task.values()])) for s in full_seeds]
  return SuiteScore(mean=float(np.mean(task_means)), stderr=_stderr(per_seed),
                    n_seeds=len(full_seeds), n_tasks=len(per_task), n_tasks_total=n_total,
                    complete=len(per_task) == n_total)


def average_ranks(scores: Mapping[str, float], rel_tol: float = 1e-9) -> dict[str, float]:
  """Rank 1 = highest score; tied scores (equal up to float noise) share their average rank."""
  order = sorted(scores, key=lambda k: -scores[k])
  ranks, i = {}, 0
  while i < len(order):
    j = i + 1
    while j < len(order) and math.isclose(scores[order[j]], scores[order[i]],
                                          rel_tol=rel_tol, abs_tol=rel_tol):
      j += 1
    for k in order[i:j]:
      ranks[k] = (i + 1 + j) / 2  # The mean of ranks i+1 .. j.
    i = j
  return ranks


def _suite_tasks(scores: _Scores) -> dict[str, tuple[str, ...]]:
  """Evaluated task set of each suite with rows, suites in `SUITES` order."""
  found = collections.defaultdict(set)
  for _, suite_name, task in scores:
    found[suite_name].add(task)
  return {name: _task_order(name, found[name]) for name in SUITES if name in found}


def leaderboard(rows: Iterable[Mapping[str, Any]]) -> Leaderboard:
  """Builds the CortexBench leaderboard from store rows (see the module docstring)."""
  scores = _collect(rows)
  tasks = _suite_tasks(scores)
  pvrs = sorted({pvr for pvr, _, _ in scores})
  suite_scores: dict[str, dict[str, SuiteScore]] = {p: {} for p in pvrs}
  for name, suite_tasks in tasks.items():
    for pvr in pvrs:
      per_task = {t: scores[(pvr, name, t)] for t in suite_tasks if (pvr, name, t) in scores}
      if per_task:
        suite_scores[pvr][name] = _score(per_task, len(suite_tasks))
  ranks: dict[str, dict[str, float]] = {p: {} for p in pvrs}
  for name in tasks:
    complete = {p: s[name].mean for p, s in suite_scores.items() if name in s and s[name].complete}
    for pvr, rank in average_ranks(complete).items():
      ranks[pvr][name] = rank
  standings = []
  for pvr in pvrs:
    ranked = list(ranks[pvr])
    standings.append(Standing(
        pvr=pvr, suites=suite_scores[pvr], ranks=ranks[pvr],
        mean_rank=float(np.mean(list(ranks[pvr].values()))) if ranked else math.nan,
        mean_success=(float(np.mean([suite_scores[pvr][n].mean for n in ranked]))
                      if ranked else math.nan),
        n_ranked=len(ranked)))
  standings.sort(key=lambda s: (math.isnan(s.mean_rank), s.mean_rank if s.n_ranked else 0.0,
                                -s.mean_success if s.n_ranked else 0.0, s.pvr))
  return Leaderboard(suites=tuple(tasks), tasks=tasks, standings=tuple(standings))


def task_scores(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, SuiteScore]]:
  """Per PVR and task key ("suite/task"): mean and stderr over seeds, for per-task tables."""
  scores = _collect(rows)
  position = {(name, t): i for i, (name, t) in enumerate(
      (name, t) for name, ts in _suite_tasks(scores).items() for t in ts)}
  out: dict[str, dict[str, SuiteScore]] = collections.defaultdict(dict)
  for (pvr, name, task), seeds in sorted(scores.items(), key=lambda kv: position[kv[0][1:]]):
    out[pvr][task_key(name, task)] = _score({task: seeds}, 1)
  return dict(sorted(out.items()))


def task_ranks(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[float]]:
  """Each PVR's rank on every task it has, among the PVRs that have that task.

  The per-task analogue of the paper's Figure 5, informative when only one suite has results.
  """
  by_task: dict[str, dict[str, float]] = collections.defaultdict(dict)
  for pvr, per_task in task_scores(rows).items():
    for key, score in per_task.items():
      by_task[key][pvr] = score.mean
  out: dict[str, list[float]] = collections.defaultdict(list)
  for key in by_task:
    for pvr, rank in average_ranks(by_task[key]).items():
      out[pvr].append(rank)
  return dict(sorted(out.items()))
