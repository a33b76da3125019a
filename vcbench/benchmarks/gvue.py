"""G-VUE (Zhu et al., 2022): eleven tasks, their metrics and the summary score.

G-VUE judges one frozen PVR on Perceive (depth, camera pose, 3-D reconstruction), Ground
(image-text retrieval, phrase grounding, semantic segmentation), Reason (VQA, commonsense,
abstract reasoning) and Act (navigation, manipulation), each with a small decoder trained on the
frozen features. `TASKS` declares each task: its category, the metrics its table reports (and
which are errors, lower is better), the decoder and the training settings of the paper's Table 5.

Summary score (the paper's Section "Summary score"): an error E becomes a percentage
P(E) = 100 exp(-1.386 E) (P(0) = 100, P(0.5) = 50); a fraction (depth's d<1.25) is scaled to
percent; a task's score is the mean of its scored metrics; the overall score is the weighted
mean of the task scores with the two Act tasks at weight 1.5. Errors enter in the units the
table prints them: metres for depth RMSE and camera position, degrees for orientation.
`tests/benchmarks/test_gvue.py` recomputes the paper's Table 3 summary row for all seven
representations from the table's own per-task numbers.

Metric values are keyed `name` or `name@split` (e.g. `position_error@cambridge`,
`accuracy@test-dev`): a task whose table reports several splits or datasets averages them all,
except where the paper scores one split only (`scored_splits`: VQA's test-dev, abstract
reasoning's test, navigation's unseen) or leaves a metric out (navigation's success rate: only
unseen SPL is scored). vcbench's own runs key their metrics by the bare name (one held-out test
split each); bare names always count.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from vcbench.errors import UserError
from vcbench.registry import Registry

CATEGORIES = ("perceive", "ground", "reason", "act")
ERROR_SCALE = 1.386         # ln(4): P(0.5) = 50 (exactly 50.01 with the paper's rounding).
ACT_WEIGHT = 1.5


class ScoreError(UserError, ValueError):
  """Metric values that cannot be scored (unknown task or metric, missing tasks)."""


@dataclasses.dataclass(frozen=True)
class Metric:
  name: str
  label: str                # As the paper's Table 3 prints it.
  error: bool = False       # Lower is better; mapped through P(E).
  fraction: bool = False    # A value in [0, 1] (depth's d<1.25), scaled to percent.


@dataclasses.dataclass(frozen=True)
class Task:
  """One G-VUE task: Table 3's metrics and Table 5's decoder and settings."""
  name: str
  category: str
  metrics: tuple[Metric, ...]
  decoder: str              # dense | label | 3d | retrieval | act
  out_dim: int
  batch_size: int
  epochs: int
  scored_splits: tuple[str, ...] = ()   # () = every split counts.
  unscored: tuple[str, ...] = ()        # Metrics reported but left out of the task score.

  @property
  def weight(self) -> float:
    return ACT_WEIGHT if self.category == "act" else 1.0

  def parse(self, key: str) -> tuple[Metric, str | None]:
    """`name` or `name@split` -> (the metric, the split or None). Names may hold '@' too
    (`acc@0.5`), so the split is what follows a declared name."""
    for m in self.metrics:
      if key == m.name:
        return m, None
      if key.startswith(m.name + "@"):
        return m, key[len(m.name) + 1:]
    raise ScoreError(f"G-VUE {self.name}: unknown metric {key!r}; its metrics are "
                     f"{[m.name for m in self.metrics]} (optionally '@<split>').")


TASKS = Registry("G-VUE task")


def _task(*args, **kw) -> None:
  t = Task(*args, **kw)
  assert t.category in CATEGORIES, t
  TASKS.register(t.name)(t)


_ACC = Metric("accuracy", "Acc.")
_task("depth_estimation", "perceive",
      (Metric("d<1.25", "d<1.25", fraction=True), Metric("abs_rel", "AbsRel", error=True),
       Metric("rmse", "RMSE", error=True)), "dense", 1, 128, 50)
_task("camera_pose", "perceive",
      (Metric("position_error", "Trans.", error=True),
       Metric("orientation_error", "Orient.", error=True)), "label", 7, 32, 100)
_task("reconstruction_3d", "perceive", (Metric("miou", "mIoU"),), "3d", 512, 32, 100)
_task("image_text_retrieval", "ground",
      (Metric("r@1", "R@1"), Metric("r@5", "R@5"), Metric("r@10", "R@10")), "retrieval", 1024,
      256, 50)
_task("phrase_grounding", "ground", (Metric("acc@0.5", "Acc@0.5"),), "label", 4, 128, 50)
_task("semantic_segmentation", "ground", (Metric("miou", "mIoU"),), "dense", 151, 128, 50)
_task("vqa", "reason", (_ACC,), "label", 1843, 128, 30, scored_splits=("test-dev",))
_task("commonsense_reasoning", "reason", (_ACC,), "label", 4, 128, 20)
_task("abstract_reasoning", "reason", (_ACC,), "label", 2, 32, 30, scored_splits=("test",))
_task("navigation", "act", (Metric("success", "Succ."), Metric("spl", "SPL")), "act", 0, 0, 0,
      scored_splits=("unseen",), unscored=("success",))
_task("manipulation", "act", (Metric("score", "Score"), Metric("success", "Succ.")), "act", 0, 0,
      0, scored_splits=("unseen",), unscored=("success",))


def percent(metric: Metric, value: float) -> float:
  """A metric value on the summary's 0-100 scale."""
  if metric.error:
    return 100.0 * math.exp(-ERROR_SCALE * float(value))
  return 100.0 * float(value) if metric.fraction else float(value)


def declared(task: str, values: Mapping[str, float]) -> dict[str, float]:
  """The entries of `values` that are `task`'s declared metrics (a run may report more, e.g.
  depth's sq_rel or text-to-image recall, which the table and scores leave out)."""
  t = TASKS.get(task)
  out = {}
  for key, value in values.items():
    try:
      t.parse(key)
    except ScoreError:
      continue
    out[key] = value
  return out


def scored_metrics(task: str, values: Mapping[str, float]) -> dict[str, float]:
  """The entries of `values` that enter `task`'s score, on the 0-100 scale."""
  t = TASKS.get(task)
  out = {}
  for key, value in values.items():
    m, split = t.parse(key)
    if m.name in t.unscored or (split is not None and t.scored_splits
                                and split not in t.scored_splits):
      continue
    out[key] = percent(m, value)
  return out


def task_score(task: str, values: Mapping[str, float]) -> float:
  """A task's score: the mean of its scored metrics mapped to percentages."""
  scored = scored_metrics(task, values)
  if not scored:
    raise ScoreError(f"G-VUE {task}: no scored metric among {sorted(values)}.")
  return sum(scored.values()) / len(scored)


def summary_score(results: Mapping[str, Mapping[str, float]], *, partial: bool = False) -> float:
  """The paper's overall score from `{task: {metric: value}}`: the weighted mean of the task
  scores (Act at 1.5). All eleven tasks are required unless `partial`, which scores the tasks
  given (a different number from the paper's; say so where it is shown)."""
  missing = [t for t in TASKS.names() if t not in results]
  if missing and not partial:
    raise ScoreError(f"G-VUE summary score: missing tasks {missing} (pass partial=True to "
                     f"score the {len(results)} given).")
  if not results:
    raise ScoreError("G-VUE summary score: no task results.")
  weights = {t: TASKS.get(t).weight for t in results}
  total = sum(weights[t] * task_score(t, v) for t, v in results.items())
  return total / sum(weights.values())
