"""How the G-VUE generators of `nav_tasks.py` pick their views: a pool of usable views, each
with the keys it offers (a grounding template, a commonsense question, a VQA question and
answer), and an assignment that fills the examples in order, each with a key drawn among those
some unused pool view still offers and the first such view, so that the keys come out as
balanced as the apartments allow; a view serves one example at most.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable

import numpy as np

from vcbench.data.gvue import nav_text as tx
from vcbench.data.gvue import nav_views as nv

MAX_DRAWS_PER_VIEW = 50     # informative views rendered per usable one before giving up.


@dataclasses.dataclass(frozen=True)
class Example:
  """One generated example: its view, and the key and payload that made its text."""
  view: nv.View
  key: Any = None
  payload: Any = None


def usable_views(rng: np.random.Generator, world: nv.World, count: int,
                 offers: Callable[[nv.View], dict], source: str) -> list[tuple[nv.View, dict]]:
  """The first `count` informative views that offer at least one key, with their offers."""
  pool, drawn = [], 0
  for view in nv.view_stream(rng, world):
    drawn += 1
    offered = offers(view)
    if offered:
      pool.append((view, offered))
      if len(pool) == count:
        return pool
    if drawn > MAX_DRAWS_PER_VIEW * count + 1000:
      break
  raise RuntimeError(f"{source}: only {len(pool)} of {count} views usable after {drawn} "
                     "informative views; the apartments rarely show what this task needs.")


def assign(rng: np.random.Generator, pool: list[tuple[nv.View, dict]], num: int,
           draw: Callable[[np.random.Generator, int, list], Any], source: str) -> list[Example]:
  """Examples from `pool`: key i = draw(rng, i, keys still offered), then its first view."""
  by_key = collections.defaultdict(collections.deque)
  for j, (_, offered) in enumerate(pool):
    for key in offered:
      by_key[key].append(j)
  used = np.zeros(len(pool), bool)
  out = []
  for i in range(num):
    for queue in by_key.values():
      while queue and used[queue[0]]:
        queue.popleft()
    available = sorted((k for k, q in by_key.items() if q), key=repr)
    if not available:
      raise RuntimeError(f"{source}: the view pool ran out after {i} examples.")
    key = draw(rng, i, available)
    j = by_key[key].popleft()
    used[j] = True
    out.append(Example(view=pool[j][0], key=key, payload=pool[j][1][key]))
  return out


def in_turn(names: tuple) -> Callable:
  """A `draw` that cycles through `names`, falling back to any key still offered."""
  def draw(rng, i, available):
    wanted = names[i % len(names)]
    return wanted if wanted in available else available[rng.integers(len(available))]
  return draw


def balanced_questions() -> Callable:
  """A VQA `draw`: types in turn; then, of the offered keys of that type, the least used
  question and then its least used answer (ties at random), so that every question's answers
  come out nearly uniform wherever the pool offers them."""
  used = collections.Counter()

  def least_used(rng, options):
    fewest = min(used[o] for o in options)
    options = [o for o in options if used[o] == fewest]
    return options[rng.integers(len(options))]

  def draw(rng, i, available):
    kind = tx.QUESTION_TYPES[i % len(tx.QUESTION_TYPES)]
    keys = [k for k in available if k[0] == kind] or available
    question = least_used(rng, sorted({k[1] for k in keys}))
    key = least_used(rng, [k for k in keys if k[1] == question])
    used[question] += 1
    used[key] += 1
    return key
  return draw


def blind_baselines(keys: list[tuple]) -> dict[str, dict[str, float]]:
  """Per question type: accuracy of its majority answer, and of each question's majority."""
  out = {}
  for kind in sorted({k[0] for k in keys}):
    mine = [k for k in keys if k[0] == kind]
    majority = max(collections.Counter(k[2] for k in mine).values())
    per_question = sum(max(collections.Counter(k[2] for k in mine if k[1] == q).values())
                       for q in {k[1] for k in mine})
    out[kind] = {"majority": majority / len(mine), "per_question": per_question / len(mine),
                 "count": len(mine)}
  return out
