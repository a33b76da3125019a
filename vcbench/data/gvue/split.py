"""The one in-memory form of a G-VUE split, written by every data source (real-format loaders,
generated scenes, packaged data) and read by the G-VUE job.

A `Split` holds images already resized to the job's square input size (G-VUE resizes every input
to 224 to match the PVRs' pre-training resolution), the texts of each example and the task's
targets, each with the examples on the leading axis. Spatial targets follow the images (depth and
label maps resized with nearest neighbour; boxes normalised to [0, 1] by width and height), so a
decoder never needs the original image size. `scene` names the scene (apartment, video, image
source) each example comes from, so a test can check that train and test share none.

Targets per task (`TARGETS`; `check` enforces them):
  depth_estimation        depth        float32 [N, H, W]  metres, 0 where invalid
  camera_pose             position     float32 [N, 3]     metres
                          quaternion   float32 [N, 4]     (w, x, y, z), unit norm
  reconstruction_3d       occupancy    bool    [N, R, R, R]
  image_text_retrieval    (texts: the captions of each image, one or more)
  phrase_grounding        box          float32 [N, 4]     (x0, y0, x1, y1) in [0, 1]
  semantic_segmentation   labels       int32   [N, H, W]  0 = ignore, classes 1..num_classes
  vqa                     answer       int32   [N]        index into meta["answers"]
  commonsense_reasoning   answer       int32   [N]        index of the right choice (texts[i][1:])
  abstract_reasoning      label        int32   [N]        1 if the query shows the concept
  manipulation            pick, place  float32 [N, 2]     grid cells (`tabletop_demos.Frame`)
                          rotation     int32   [N]        the place rotation's bin
                          task         int32   [N]        index into meta["tasks"]
Images are uint8 [N, H, W, 3]; for abstract_reasoning [N, 13, H, W, 3]: six positives, six
negatives, then the query. Texts: per example a tuple of strings -- (question,) for VQA,
(expression,) for grounding, (question, choice_0, ..., choice_3) for commonsense, the captions
for retrieval, (instruction,) for manipulation, () for tasks without text. A manipulation split
holds demonstration steps (the oracle's, or CLIPort's recorded ones), not test examples: its
test is closed-loop episodes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from vcbench.errors import UserError

BONGARD_SHOTS = 6        # positives and negatives per Bongard problem (then one query).
TARGETS = {
    "depth_estimation": {"depth": (np.floating, 3)},
    "camera_pose": {"position": (np.floating, 2), "quaternion": (np.floating, 2)},
    "reconstruction_3d": {"occupancy": (np.bool_, 4)},
    "image_text_retrieval": {},
    "phrase_grounding": {"box": (np.floating, 2)},
    "semantic_segmentation": {"labels": (np.integer, 3)},
    "vqa": {"answer": (np.integer, 1)},
    "commonsense_reasoning": {"answer": (np.integer, 1)},
    "abstract_reasoning": {"label": (np.integer, 1)},
    "manipulation": {"pick": (np.floating, 2), "place": (np.floating, 2),
                     "rotation": (np.integer, 1), "task": (np.integer, 1)},
}
TEXT_TASKS = ("image_text_retrieval", "phrase_grounding", "vqa", "commonsense_reasoning",
              "manipulation")


class SplitError(UserError, ValueError):
  """A split that breaks the contract (names the source, the field, expected vs got)."""


@dataclasses.dataclass(frozen=True)
class Split:
  task: str
  images: np.ndarray
  targets: Mapping[str, np.ndarray]
  texts: tuple[tuple[str, ...], ...] = ()
  scene: tuple[str, ...] = ()
  meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  source: str = ""          # where it came from (a path or a generator and its seed), for errors.

  def __len__(self) -> int:
    return int(self.images.shape[0])

  def take(self, index) -> "Split":
    """The examples at `index` (an int array or slice), same meta."""
    index = np.arange(len(self))[index]
    pick = lambda seq: tuple(seq[i] for i in index) if seq else ()
    return dataclasses.replace(
        self, images=self.images[index], targets={k: v[index] for k, v in self.targets.items()},
        texts=pick(self.texts), scene=pick(self.scene))


def check(split: Split) -> Split:
  """`split`, or a SplitError naming what is wrong."""
  where = f"{split.task} split from {split.source or '<unnamed source>'}"
  if split.task not in TARGETS:
    raise SplitError(f"{where}: unknown task {split.task!r}; the tasks with splits: "
                     f"{sorted(TARGETS)}.")
  image_rank = 5 if split.task == "abstract_reasoning" else 4
  _expect(where, "images", split.images, np.uint8, image_rank)
  if split.images.shape[-1] != 3:
    raise SplitError(f"{where}: images must end in 3 colour channels, got shape "
                     f"{split.images.shape}.")
  if split.task == "abstract_reasoning" and split.images.shape[1] != 2 * BONGARD_SHOTS + 1:
    raise SplitError(f"{where}: a Bongard problem has {2 * BONGARD_SHOTS + 1} images "
                     f"(6 positives, 6 negatives, the query), got {split.images.shape[1]}.")
  n = len(split)
  for name, (kind, rank) in TARGETS[split.task].items():
    if name not in split.targets:
      raise SplitError(f"{where}: missing target {name!r}; expected {sorted(TARGETS[split.task])}.")
    _expect(where, f"targets[{name!r}]", split.targets[name], kind, rank)
    if split.targets[name].shape[0] != n:
      raise SplitError(f"{where}: targets[{name!r}] has {split.targets[name].shape[0]} rows "
                       f"for {n} images.")
  if split.task in TEXT_TASKS and len(split.texts) != n:
    raise SplitError(f"{where}: {len(split.texts)} text tuples for {n} images.")
  if split.scene and len(split.scene) != n:
    raise SplitError(f"{where}: {len(split.scene)} scene names for {n} images.")
  if split.task == "vqa" and "answers" not in split.meta:
    raise SplitError(f"{where}: meta['answers'] (the answer vocabulary) is missing.")
  if split.task == "manipulation" and "tasks" not in split.meta:
    raise SplitError(f"{where}: meta['tasks'] (the task names `targets['task']` indexes) is "
                     f"missing.")
  if split.task == "semantic_segmentation" and "num_classes" not in split.meta:
    raise SplitError(f"{where}: meta['num_classes'] is missing.")
  return split


def _expect(where: str, name: str, value, kind, rank: int) -> None:
  if not isinstance(value, np.ndarray):
    raise SplitError(f"{where}: {name} must be a NumPy array, got {type(value).__name__}.")
  if not np.issubdtype(value.dtype, kind) or value.ndim != rank:
    raise SplitError(f"{where}: {name} expected {np.dtype(kind).name if kind is not np.floating else 'float'} "
                     f"of rank {rank}, got {value.dtype} with shape {value.shape}.")
