"""Bootstrap confidence intervals for the CortexBench table, and which orderings they support.

A table from one seed and ten test episodes per task can flip its ranking on another machine
(XLA's numbers differ across CPUs, and one episode moves a ten-episode task by ten points). So
the report does not just print means: it resamples what the table averages and says which
orderings of Mean Success survive.

One bootstrap draw resamples, for every (suite, task), the seeds with replacement and, within
each seed, the test episodes with replacement, then recomputes every PVR's suite scores and
Mean Success exactly as `cortexbench_scores.leaderboard` does. The draw is *paired*: all PVRs
get the same seed and episode indices, because they are tested on the same episode seeds (the
same initial states), which is what makes a difference between two PVRs sharper than the two
intervals suggest. An ordering "A > B" is stated only when the 95% percentile interval of
Mean Success(A) - Mean Success(B) lies above zero.

Needs each row's `episode_scores` (written by `bc_protocol.summary`); a store written before
they existed gives no intervals (the table says so) rather than intervals from seeds alone.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
from typing import Any, Iterable, Mapping

import numpy as np

from vcbench.benchmarks import cortexbench_scores
from vcbench.benchmarks.cortexbench import parse_task_key

LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
  low: float
  high: float

  def __str__(self) -> str:
    return f"[{self.low:.1f}, {self.high:.1f}]"


@dataclasses.dataclass(frozen=True)
class Ordering:
  """Mean Success of `better` minus that of `worse`: its mean and 95% interval."""
  better: str
  worse: str
  difference: float
  interval: Interval

  @property
  def significant(self) -> bool:
    return self.interval.low > 0


@dataclasses.dataclass(frozen=True)
class Intervals:
  """95% intervals of the ranked PVRs' suite scores and Mean Success, and every pairwise
  ordering of Mean Success (the PVR with the higher mean first). Empty when some ranked cell
  lacks episode scores (`missing` names the first one)."""
  suites: dict[str, dict[str, Interval]]
  mean_success: dict[str, Interval]
  orderings: tuple[Ordering, ...]
  draws: int
  missing: str = ""
  min_seeds: int = 0   # The fewest seeds behind any resampled task score.


def _episode_scores(rows: Iterable[Mapping[str, Any]]):
  """(pvr, suite, task) -> {seed: per-episode scores}; cells without them map to None."""
  out: dict[tuple[str, str, str], dict[int, np.ndarray | None]] = collections.defaultdict(dict)
  for r in cortexbench_scores.latest_rows(rows):
    suite_name, task = parse_task_key(r["task"])
    scores = r.get("episode_scores")
    listed = isinstance(scores, (list, tuple, np.ndarray)) and len(scores) > 0  # NaN if absent.
    value = np.asarray(scores, np.float64) if listed else None
    out[(cortexbench_scores.entry_name(r), suite_name, task)][int(r["seed"])] = value
  return out


def _percentile(draws: np.ndarray) -> Interval:
  tail = 100 * (1 - LEVEL) / 2
  low, high = np.percentile(draws, [tail, 100 - tail])
  return Interval(float(low), float(high))


def _shared_seeds(per_pvr: Mapping[str, Mapping[int, np.ndarray]]) -> list[int]:
  seeds = sorted(set.intersection(*(set(s) for s in per_pvr.values())))
  if not seeds:
    raise ValueError(f"no seed is shared by the PVRs {sorted(per_pvr)} on one task: their "
                     "scores cannot be compared pairwise")
  return seeds


def _task_draws(per_pvr: Mapping[str, Mapping[int, np.ndarray]], seeds: list[int], rng,
                draws: int):
  """Bootstrap draws of one task's score (mean over `seeds` of episode means) per PVR, with the
  seed and episode indices shared by all PVRs (a seed's episode count may differ between PVRs
  only if their test_episodes differed; then that seed's indices are drawn per count)."""
  picked = rng.integers(0, len(seeds), size=(draws, len(seeds)))
  seed_means = {p: np.zeros((draws, len(seeds))) for p in per_pvr}
  for j, seed in enumerate(seeds):
    counts = {len(per_pvr[p][seed]) for p in per_pvr}
    index = {n: rng.integers(0, n, size=(draws, n)) for n in sorted(counts)}
    for p in per_pvr:
      scores = per_pvr[p][seed]
      seed_means[p][:, j] = scores[index[len(scores)]].mean(axis=1)
  return {p: np.take_along_axis(m, picked, axis=1).mean(axis=1) for p, m in seed_means.items()}


def bootstrap(rows: Iterable[Mapping[str, Any]], draws: int = 2000, seed: int = 0,
              board: cortexbench_scores.Leaderboard | None = None) -> Intervals:
  """The intervals of the leaderboard that `rows` make (`board`, if the caller has built it;
  see the module docstring)."""
  rows = list(rows)
  board = cortexbench_scores.leaderboard(rows) if board is None else board
  episodes = _episode_scores(rows)
  suite_draws: dict[str, dict[str, np.ndarray]] = collections.defaultdict(dict)
  rng = np.random.default_rng(seed)
  seed_counts = []
  for name in board.suites:
    ranked = [s.pvr for s in board.standings if name in s.ranks]
    if not ranked:
      continue
    task_draws = []
    for task in board.tasks[name]:
      per_pvr = {p: episodes[(p, name, task)] for p in ranked}
      for p, seeds in per_pvr.items():
        for s, scores in seeds.items():
          if scores is None:
            return Intervals({}, {}, (), draws, missing=f"{p} {name}/{task} seed {s}")
      seeds = _shared_seeds(per_pvr)
      task_draws.append(_task_draws(per_pvr, seeds, rng, draws))
      seed_counts.append(len(seeds))
    for p in ranked:
      suite_draws[p][name] = np.mean([t[p] for t in task_draws], axis=0)
  success = {p: np.mean(list(d.values()), axis=0) for p, d in suite_draws.items()}
  means = {s.pvr: s.mean_success for s in board.standings if s.pvr in success}
  orderings = []
  for a, b in itertools.combinations(sorted(success, key=lambda p: -means[p]), 2):
    if set(suite_draws[a]) != set(suite_draws[b]):
      continue   # Ranked in different suites: their Mean Successes are not comparable.
    orderings.append(Ordering(a, b, means[a] - means[b], _percentile(success[a] - success[b])))
  return Intervals(
      suites={p: {n: _percentile(d) for n, d in per.items()} for p, per in suite_draws.items()},
      mean_success={p: _percentile(d) for p, d in success.items()},
      orderings=tuple(orderings), draws=draws, min_seeds=min(seed_counts, default=0))


def describe(intervals: Intervals) -> list[str]:
  """Sentences for a report: which orderings hold at 95%, which do not."""
  if intervals.missing:
    return [f"No confidence intervals: {intervals.missing} has no per-episode scores "
            "(a store written before they were recorded)."]
  held = [o for o in intervals.orderings if o.significant]
  unresolved = [o for o in intervals.orderings if not o.significant]
  pct = int(round(100 * LEVEL))
  lines = [f"{pct}% intervals: paired bootstrap over seeds and test episodes "
           f"({intervals.draws} draws)."]
  if intervals.min_seeds < 2:
    lines.append("With one seed they cover the test episodes only, not the BC training run "
                 "(another seed, or another machine's floating point, trains another policy): "
                 "run several seeds before claiming an ordering beyond this run.")

  def fmt(o: Ordering) -> str:
    return f"{o.better} > {o.worse} (+{o.difference:.1f} {o.interval})"

  lines.append("Orderings of Mean Success that hold: "
               + ("; ".join(fmt(o) for o in held) if held else "none") + ".")
  if unresolved:
    lines.append("Not resolved (interval of the difference contains 0): "
                 + "; ".join(fmt(o) for o in unresolved) + ".")
  return lines

