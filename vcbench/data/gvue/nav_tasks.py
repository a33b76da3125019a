"""G-VUE tasks generated from vcbench's own navigation simulator (vcbench-nav apartments).

`make_split(task, split, num, seed, size)` renders a `Split` (split.py's contract) of `num`
examples at `size` x `size` pixels for one of `TASKS`, a function of its arguments alone. It
gives the G-VUE job data for seven of its tasks without downloading anything, with labels that
are exact by construction: every target and text is read from the renderer's own depth,
semantic and instance maps and from the apartment's tables (`nav_views.py` reads the facts,
`nav_text.py` holds the templates; the docstring of each task's `_<task>_split` function below
is the one place that says what its templates are and what its labels mean).

Apartments. Every task except camera_pose draws its views from ceil(num / VIEWS_PER_APARTMENT)
apartments of the nav generator's own split seed range (train: seeds 0.., test: 200000..), so
train and test share no apartment; `Split.scene` names each example's apartment
("vcbench-nav/apartment-<seed>"). `seed` draws the camera poses and the text choices, not the
apartments (as the seed of `nav.make` draws episodes, not scenes). camera_pose is the
exception, see `_camera_pose_split`.

Views. Poses stand at navigable positions, mostly aimed at an object (`nav_views.py` defines
"informative", "visible", "glimpsed" and the view's room); images are rendered at `size`
directly (79 degree field of view, level camera), so no target is ever resized.

Balance. The text tasks render a pool of POOL_FACTOR x num usable views and fill the examples
from it (`nav_pool.py`): each example's key (grounding template, commonsense question, VQA
question and answer) is chosen in turn, or least used, among the keys that some unused pool
view still offers.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import zlib
import numpy as np

from vcbench.data.gvue import nav_pool as pl
from vcbench.data.gvue import nav_text as tx
from vcbench.data.gvue import nav_views as nv
from vcbench.data.gvue.split import Split, check
from vcbench.envs.nav import scene as sc
from vcbench.errors import UserError

TASKS = ("depth_estimation", "semantic_segmentation", "camera_pose", "phrase_grounding",
         "image_text_retrieval", "vqa", "commonsense_reasoning")
SPLITS = ("train", "test")
VIEWS_PER_APARTMENT = 16
POOL_FACTOR = 4
POSE_APARTMENTS = 2
TRAJECTORY_FRAMES = 32
MIN_SIZE = 16
MIN_CAPTIONS = 2    # fresh captions a retrieval view needs (others' captions are left out).
CLASS_NAMES = ("wall", "floor", "ceiling", *(tx.CATEGORY[c] for c in range(1, 7)))


class NavTaskError(UserError, ValueError):
  """A bad argument to `make_split` (names the argument, expected vs got)."""


@dataclasses.dataclass(frozen=True)
class _Job:
  task: str
  split: str
  num: int
  seed: int
  size: int

  @property
  def source(self) -> str:
    return (f"vcbench-nav generator (task={self.task}, split={self.split}, num={self.num}, "
            f"seed={self.seed}, size={self.size})")

  def rng(self, stream: str) -> np.random.Generator:
    key = [self.seed, zlib.crc32(self.task.encode()), SPLITS.index(self.split),
           zlib.crc32(stream.encode())]
    return np.random.default_rng(np.random.SeedSequence(key))


def make_split(task: str, split: str, num: int, seed: int, size: int) -> Split:
  """`num` examples of G-VUE `task` from vcbench-nav apartments, checked against split.py."""
  job = _validated(task, split, num, seed, size)
  return check(_ASSEMBLE[task](job, examples(task, split, num, seed, size)))


def examples(task: str, split: str, num: int, seed: int, size: int) -> list[pl.Example]:
  """The `Example`s behind `make_split` (their views and poses, for audits and tests)."""
  job = _validated(task, split, num, seed, size)
  if task == "camera_pose":
    return _trajectory_examples(job)
  return _EXAMPLES[task](job, nv.make_world(split, _apartments(num), size))


def _validated(task, split, num, seed, size) -> _Job:
  if task not in TASKS:
    raise NavTaskError(f"vcbench-nav G-VUE: unknown task {task!r}; it generates {TASKS}.")
  if split not in SPLITS:
    raise NavTaskError(f"vcbench-nav G-VUE: split must be one of {SPLITS}, got {split!r}.")
  for name, value, low in (("num", num, 1), ("seed", seed, 0), ("size", size, MIN_SIZE)):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
      raise NavTaskError(f"vcbench-nav G-VUE: {name} must be an int >= {low}, got {value!r}.")
  if size > 1024:
    raise NavTaskError(f"vcbench-nav G-VUE: size must be at most 1024 pixels, got {size}.")
  return _Job(task, split, int(num), int(seed), int(size))


def _apartments(num: int) -> int:
  return max(1, math.ceil(num / VIEWS_PER_APARTMENT))


def _text_pool(job, world, offers, draw) -> list[pl.Example]:
  pool = pl.usable_views(job.rng("views"), world, POOL_FACTOR * job.num, offers, job.source)
  return pl.assign(job.rng("assign"), pool, job.num, draw, job.source)


def _clear(view: nv.View) -> bool:
  return not view.glimpsed


# ---------------------------------------------------------------------------------------------
# Examples per task.

def _any_view(job, world) -> list[pl.Example]:
  views = pl.usable_views(job.rng("views"), world, job.num, lambda v: {None: None}, job.source)
  return [pl.Example(view=v) for v, _ in views]


def _grounding_examples(job, world) -> list[pl.Example]:
  rng = job.rng("text")

  def offers(view):
    if not _clear(view):
      return {}
    found = tx.expressions(view)
    return {name: pairs[rng.integers(len(pairs))] for name, pairs in found.items() if pairs}
  return _text_pool(job, world, offers, pl.in_turn(tx.GROUNDING_TEMPLATES))


def _retrieval_examples(job, world) -> list[pl.Example]:
  """Views in order, each with its captions that no earlier view of the split has."""
  taken: set[str] = set()

  def offers(view):
    if not (_clear(view) and view.things):
      return {}
    fresh = tuple(c for c in tx.captions(view) if c not in taken)
    if len(fresh) < MIN_CAPTIONS:
      return {}
    taken.update(fresh)
    return {"view": fresh}
  pool = pl.usable_views(job.rng("views"), world, job.num, offers, job.source)
  return [pl.Example(view=v, key="view", payload=o["view"]) for v, o in pool]


def _vqa_examples(job, world) -> list[pl.Example]:
  offers = lambda v: tx.questions(v) if _clear(v) else {}
  return _text_pool(job, world, offers, pl.balanced_questions())


def _commonsense_examples(job, world) -> list[pl.Example]:
  rng = job.rng("text")

  def offers(view):
    if not _clear(view):
      return {}
    made = {k: tx.commonsense(rng, view, k) for k in range(len(tx.AFFORDANCES))}
    return {k: v for k, v in made.items() if v is not None}
  return _text_pool(job, world, offers, pl.in_turn(tuple(range(len(tx.AFFORDANCES)))))


_EXAMPLES = {
    "depth_estimation": _any_view, "semantic_segmentation": _any_view,
    "phrase_grounding": _grounding_examples, "image_text_retrieval": _retrieval_examples,
    "vqa": _vqa_examples, "commonsense_reasoning": _commonsense_examples,
}


def _trajectory_examples(job) -> list[pl.Example]:
  """Informative frames of walks in the POSE_APARTMENTS apartments, walk w in apartment
  w % POSE_APARTMENTS, until `num`; the key is the walk's number."""
  world = nv.make_world("train", POSE_APARTMENTS, job.size)
  rng = job.rng("walks")
  per_batch = max(1, nv.CHUNK // TRAJECTORY_FRAMES)
  out, walk = [], 0
  while len(out) < job.num:
    if walk * TRAJECTORY_FRAMES > pl.MAX_DRAWS_PER_VIEW * job.num + 1000:
      raise RuntimeError(f"{job.source}: only {len(out)} informative frames in {walk} walks.")
    apt, pos, heading, ids = [], [], [], []
    for _ in range(per_batch):
      p, h = nv.walk(rng, world, walk % POSE_APARTMENTS, TRAJECTORY_FRAMES)
      apt += [walk % POSE_APARTMENTS] * TRAJECTORY_FRAMES
      pos.append(p)
      heading.append(h)
      ids += [walk] * TRAJECTORY_FRAMES
      walk += 1
    views = nv.render_views(world, apt, np.concatenate(pos), np.concatenate(heading))
    out += [pl.Example(view=v, key=k) for v, k in zip(views, ids) if v.informative]
  return out[:job.num]


# ---------------------------------------------------------------------------------------------
# Splits per task: the label definitions.

def _base(job: _Job, exs: list[pl.Example], targets: dict, texts=(), **meta) -> Split:
  return Split(task=job.task, images=np.stack([e.view.rgb for e in exs]), targets=targets,
               texts=tuple(texts), scene=tuple(e.view.scene for e in exs),
               meta={"generator": "vcbench-nav", "split": job.split, "seed": job.seed,
                     "apartments": tuple(sorted({e.view.scene for e in exs})), **meta},
               source=job.source)


def _depth_split(job, exs) -> Split:
  """depth_estimation: an RGB view and its metric depth.

  Views: the first `num` informative views, whatever they show.
  depth: float32 [N, H, W], the renderer's z-depth in metres (distance along the optical axis,
    as habitat's depth sensor) at the image's own pixels; 0 (invalid) where it reached the
    camera's max_depth clip (10 m), whose true depth is unknown. This matches G-VUE's valid
    range (1e-3, 10) m: the camera never stands within 0.18 m of a surface.
  """
  clip = nv.MAX_DEPTH
  depth = np.stack([np.where(e.view.depth < clip, e.view.depth, 0.0) for e in exs])
  return _base(job, exs, {"depth": depth.astype(np.float32)}, max_depth=clip)


def _segmentation_split(job, exs) -> Split:
  """semantic_segmentation: an RGB view and its per-pixel class.

  Views: the first `num` informative views, whatever they show.
  labels: int32 [N, H, W], the renderer's semantic map + 1: 1 wall, 2 floor, 3 ceiling,
    4..9 chair, bed, plant, toilet, TV, sofa (meta: num_classes 9, class_names). 0 (ignore)
    never occurs: the renderer labels every pixel, and its one approximation (an object hidden
    behind a nearer, lower one in the same column is not drawn) is the same in the image.
  """
  labels = np.stack([e.view.semantic + 1 for e in exs]).astype(np.int32)
  return _base(job, exs, {"labels": labels}, num_classes=len(CLASS_NAMES),
               class_names=CLASS_NAMES)


def _camera_pose_split(job, exs) -> Split:
  """camera_pose: an RGB view and the camera's pose in its apartment's world frame.

  Relocalisation is learnt per scene (G-VUE trains and tests PoseNet per Cambridge Landmarks /
  7-Scenes scene), so BOTH splits come from the same POSE_APARTMENTS apartments (the first of
  the nav train seed range): train and test are different walks through them (`nav_views.walk`,
  TRAJECTORY_FRAMES frames each, from the split's own random stream), not different
  apartments. `scene` names the apartment, as everywhere.
  World frame (right-handed, metres): origin at the grid's corner on the floor, x along the
    grid's columns, y along its rows (the scene format's floor-plan axes), z = x cross y, which
    points DOWN (the renderer's headings turn from +x towards +y, clockwise seen from above).
  position: float32 [N, 3] (x, y, z) = (x, y, -0.88): the camera is 0.88 m above the floor at
    every frame (a level camera at the LoCoBot height), so z is constant.
  quaternion: float32 [N, 4] (w, x, y, z), the rotation by the heading h about +z, which takes
    +x to the viewing direction: (cos h/2, 0, 0, sin h/2), with h in (-pi, pi] so that w >= 0.
  """
  pos = np.stack([e.view.position for e in exs]).astype(np.float32)
  h = np.array([(e.view.heading + math.pi) % (2 * math.pi) - math.pi for e in exs])
  h = np.where(h <= -math.pi, h + 2 * math.pi, h)
  position = np.concatenate([pos, np.full((len(exs), 1), -sc.CAMERA_HEIGHT, np.float32)], 1)
  quaternion = np.stack([np.cos(h / 2), 0 * h, 0 * h, np.sin(h / 2)], 1).astype(np.float32)
  return _base(job, exs, {"position": position, "quaternion": quaternion},
               frame="right-handed: x = grid columns, y = grid rows, z down; metres",
               walks=len({e.key for e in exs}))


def _grounding_split(job, exs) -> Split:
  """phrase_grounding: an RGB view, a referring expression, the box of the one object it names.

  Templates (`nav_text.expressions`), each used only where it names exactly one of the view's
  visible objects (views with a glimpsed object are skipped), drawn in turn:
    category   "the {category}"                      the only one of its category in view
    attribute  "the {attribute} {category}"          the only one of its category and texture
               (attributes: light/dark wooden chair, pink/yellow bed, broad-leaved/dark-leaved/
               grassy plant, white toilet, black/silver TV, blue/red sofa)
    side       "the {category} on the left|right"    outermost of its category on that side,
               on that half of the image, >= 10% of the width clear of the others
    nearest    "the {category} nearest to the camera" >= 0.3 m nearer than the others of its
               category (two or more in view)
    room       "the {category} in the {room type}"   the only one of its category in a room
               of that type
  box: float32 [N, 4], the bounding box of the object's pixels in the instance map,
    (x0, y0, x1, y1) normalised by width and height, pixel edges (x1 = (last column + 1) / W).
  """
  box = np.array([e.payload[0].box for e in exs], np.float32)
  texts = [(e.payload[1],) for e in exs]
  used = collections.Counter(e.key for e in exs)
  return _base(job, exs, {"box": box}, texts, templates=dict(used))


def _retrieval_split(job, exs) -> Split:
  """image_text_retrieval: an RGB view and two to four captions of it.

  Views with at least one visible object and none glimpsed. Captions (`nav_text.captions`):
    inventory   "{A room type} with {objects}."   ("A kitchen with two dark wooden chairs and a
                grassy plant."; "a home" where no room type holds 70% of the visible floor)
    paraphrase  "{Objects} in {a room type}."
    layout      "{An object} on the left and {an object} on the right." (leftmost and
                rightmost), or "{An object} on the left|right of the view|in the middle of ..."
    nearest     "The nearest object is {an object}, about {d} metres away." (d to 0.5 m)
  where an object is "{attribute} {category}". Every caption occurs once in a split: a view
  keeps only the captions no earlier view has, and is skipped when fewer than two are left, so
  each caption names one image (as Flickr30k's nearly always do) and R@K has no ties by
  construction.
  """
  return _base(job, exs, {}, [e.payload for e in exs])


def _vqa_split(job, exs) -> Split:
  """vqa: an RGB view, a question, the index of its answer in meta['answers'].

  Views with no glimpsed object. Questions (`nav_text.questions`), types in turn:
    count     "How many {category plural} are there?"   the number of visible instances of
              the category (by the instance map); answers per category: chairs 0-3, plants
              0-2, the rest 0-1 (views with another count are not asked)
    exist     "Is there a {category}?"                  yes / no
    relation  "What is to the left|right of the {category}?"  the one category of all
              visible objects beyond that (only) object, none within 10% of the width of it
    room      "What room is this?"                      the view's room type
  Each example's question, then its answer, is the least used so far among those the view
  pool still offers, so a question-only model's best guess is right about 1 / (its answers):
  meta['blind_baseline'][type] holds, measured on this split, 'majority' (accuracy of the
  type's most common answer) and 'per_question' (of each question's most common answer, the
  best any question-only model can do here).
  """
  answer = np.array([tx.ANSWERS.index(e.key[2]) for e in exs], np.int32)
  texts = [(e.payload,) for e in exs]
  return _base(job, exs, {"answer": answer}, texts, answers=tx.ANSWERS,
               blind_baseline=pl.blind_baselines([e.key for e in exs]))


def _commonsense_split(job, exs) -> Split:
  """commonsense_reasoning: an RGB view, a question and four choices, one right (VCR format).

  This tests the VCR FORMAT and visual grounding, not human commonsense: the questions are
  five fixed affordances, and what makes a choice right is that it names the one visible
  object that affords it.
    "Where could someone sit down?"                          chair, sofa (never offered: bed,
                                                              toilet)
    "Where would someone sleep at night?"                    bed (never offered: sofa)
    "What would someone switch on to watch the news?"        TV
    "What needs watering now and then?"                      plant
    "What would someone use after drinking a lot of water?"  toilet
  Choices are referents "the {attribute} {category} on the left|right" / "... in the middle"
  (the third of the image its pixels' mean column falls in). The view shows exactly one object
  of an answering category; the right choice names it. Wrong choices: up to two visible
  objects of other categories, then referents of kinds (category and texture) not in view at
  all, one of an answering category first, so the text alone cannot single out the right one.
  texts[i] = (question, choice_0, .., choice_3); answer: int32 [N], the right choice's index,
  balanced over the four positions.
  """
  rng = job.rng("positions")
  positions = rng.permutation(np.arange(len(exs)) % tx.NUM_CHOICES)
  texts = []
  for e, right in zip(exs, positions):
    question, truth, *wrong = e.payload
    choices = list(wrong)
    choices.insert(int(right), truth)
    texts.append((question, *choices))
  return _base(job, exs, {"answer": positions.astype(np.int32)}, texts,
               questions=tuple(a[0] for a in tx.AFFORDANCES))


_ASSEMBLE = {
    "depth_estimation": _depth_split, "semantic_segmentation": _segmentation_split,
    "camera_pose": _camera_pose_split, "phrase_grounding": _grounding_split,
    "image_text_retrieval": _retrieval_split, "vqa": _vqa_split,
    "commonsense_reasoning": _commonsense_split,
}
