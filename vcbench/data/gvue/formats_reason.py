"""Real-format loaders of two of G-VUE's Reason tasks: VQA (GQA balanced questions) and abstract
reasoning (Bongard-HOI problems). Commonsense reasoning (VCR) is in `formats_vcr.py`. Each
returns a checked `Split`.

Choices, and why:
  * GQA's answer vocabulary is G-VUE's: every answer of the balanced train, val and testdev
    questions, in order of first appearance (1843 answers). It is built from those three files
    unless a vocabulary file is given, so train and test index answers the same way.
  * Questions are kept as written; G-VUE lower-cases and strips punctuation for its RoBERTa.
  * A Bongard-HOI problem lists 7 positive and 7 negative images, the last of each being a
    query. It becomes two examples that share the 12 context images: the positive query
    (label 1) and the negative one (label 0), as G-VUE scores both. Images are whole, as G-VUE
    reads them (Bongard-HOI's own models crop to the interaction's box first).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from vcbench.data.gvue import split as split_lib
from vcbench.data.gvue.formats_io import (FormatError, PathLike, check_request, expect_list,
                                          expect_split, field, head, image_reader, make_split,
                                          read_json)

GQA_SPLITS = ("train", "val", "testdev")   # the balanced sets with answers; G-VUE tests on testdev.
BONGARD_TASKS = ("seen_obj_seen_act", "seen_obj_unseen_act", "unseen_obj_seen_act",
                 "unseen_obj_unseen_act")
BONGARD_SIDE = split_lib.BONGARD_SHOTS + 1  # the shots, then the query.


def gqa_answers(question_sets: Iterable[Mapping]) -> list[str]:
  """Every answer of the question sets ({qid: {"answer": ...}}), in order of first appearance."""
  seen: dict[str, None] = {}
  for questions in question_sets:
    for question in questions.values():
      if isinstance(question, Mapping) and isinstance(question.get("answer"), str):
        seen.setdefault(question["answer"], None)
  return list(seen)


def build_gqa_answers(root: PathLike) -> list[str]:
  """G-VUE's GQA answer vocabulary from root/{train,val,testdev}_balanced_questions.json."""
  return gqa_answers(_read_questions(_questions_path(root, s)) for s in GQA_SPLITS)


def load_vqa(root: PathLike, split: str, size: int, limit: int | None = None, *,
             questions_file: PathLike | None = None, image_dir: PathLike | None = None,
             answers_file: PathLike | None = None) -> split_lib.Split:
  """GQA balanced questions ({qid: {imageId, question, answer}}) with images
  `image_dir`/<imageId>.jpg (default root/images). `answers_file`: the vocabulary, a JSON list
  of answers or {answer: index}; without it, built as G-VUE builds it (`build_gqa_answers`),
  which parses the 1.3 GB train file: save the list once and pass it to load faster.
  """
  check_request(size, limit)
  root = Path(root)
  split = expect_split(split, GQA_SPLITS, str(root), test="testdev")
  path = Path(questions_file) if questions_file is not None else _questions_path(root, split)
  questions = _read_questions(path)
  if answers_file is not None:
    answers, vocabulary = _read_answers(Path(answers_file)), str(answers_file)
  else:
    answers = gqa_answers(questions if s == split else _read_questions(_questions_path(root, s))
                          for s in GQA_SPLITS)
    vocabulary = f"built from the train, val and testdev questions in {root}"
  index = {answer: i for i, answer in enumerate(answers)}
  image_dir = Path(image_dir) if image_dir is not None else root / "images"
  read = image_reader(size)
  images, targets, texts, scenes = [], [], [], []
  for qid, question in head(list(questions.items()), limit):
    where = f"{path}: question {qid!r}"
    image_id = field(question, "imageId", where, str)
    answer = field(question, "answer", where, str)
    if answer not in index:
      raise FormatError(f"{where}: answer {answer!r} is not in the answer vocabulary "
                        f"({vocabulary}).")
    texts.append((field(question, "question", where, str),))
    images.append(read(image_dir / f"{image_id}.jpg", where))
    targets.append(index[answer])
    scenes.append(image_id)
  return make_split("vqa", path, images, {"answer": targets}, {"answer": np.int32}, texts=texts,
                    scene=scenes, meta={"answers": tuple(answers), "dataset": "GQA balanced"})


def _questions_path(root: PathLike, split: str) -> Path:
  return Path(root) / f"{split}_balanced_questions.json"


def _read_questions(path: Path) -> dict:
  questions = read_json(path, "GQA questions")
  if not isinstance(questions, dict):
    raise FormatError(f"{path}: expected a JSON object {{question id: question}}, got a "
                      f"{type(questions).__name__}.")
  return questions


def _read_answers(path: Path) -> list[str]:
  """A vocabulary file as answers in index order: a JSON list, or {answer: index} with the
  indices 0..K-1 once each."""
  vocabulary = read_json(path, "GQA answer vocabulary")
  if isinstance(vocabulary, list):
    bad = [a for a in vocabulary if not isinstance(a, str)]
    if bad or len(set(vocabulary)) != len(vocabulary):
      raise FormatError(f"{path}: a list vocabulary holds each answer string once"
                        f"{f'; found {bad[0]!r}' if bad else ' (found a repeat)'}.")
    return vocabulary
  if not isinstance(vocabulary, dict):
    raise FormatError(f"{path}: expected {{answer: index}} or a list of answers, got a "
                      f"{type(vocabulary).__name__}.")
  answers: list = [None] * len(vocabulary)
  for answer, i in vocabulary.items():
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(answers) or answers[i]:
      raise FormatError(f"{path}: answer {answer!r} has index {i!r}; indices must be 0.."
                        f"{len(answers) - 1}, each once.")
    answers[i] = answer
  return answers


def load_abstract_reasoning(root: PathLike, split: str, size: int, limit: int | None = None, *,
                            image_dir: PathLike | None = None,
                            tasks: Sequence[str] = BONGARD_TASKS) -> split_lib.Split:
  """Bongard-HOI problems from root/bongard_hoi_train.json, or for val and test
  root/bongard_hoi_<split>_<task>.json for each of `tasks` (the four seen/unseen object/action
  splits); each problem is [positives, negatives, task name], the sides lists of
  {"im_path": path under `image_dir`, default root/images}.
  """
  check_request(size, limit)
  root = Path(root)
  split = expect_split(split, ("train", "val", "test"), str(root))
  unknown = [t for t in tasks if t not in BONGARD_TASKS]
  if unknown or not tasks:
    raise FormatError(f"abstract_reasoning: tasks {list(tasks)} must be among {BONGARD_TASKS}.")
  files = ([root / "bongard_hoi_train.json"] if split == "train" else
           [root / f"bongard_hoi_{split}_{task}.json" for task in tasks])
  image_dir = Path(image_dir) if image_dir is not None else root / "images"
  read = image_reader(size)
  images, labels, scenes = [], [], []
  for path in files:
    for i, problem in enumerate(expect_list(read_json(path, "Bongard-HOI problems"), str(path))):
      if limit is not None and len(images) >= limit:
        break
      where = f"{path}: [{i}]"
      positives, negatives = (_bongard_side(problem, side, where) for side in (0, 1))
      shots = [read(image_dir / p, where) for p in positives[:-1] + negatives[:-1]]
      for query, label in ((positives[-1], 1), (negatives[-1], 0)):
        if limit is None or len(images) < limit:
          images.append(np.stack(shots + [read(image_dir / query, where)]))
          labels.append(label)
          scenes.append(f"{path.stem}:{i}")   # both queries of a problem stay together.
  return make_split("abstract_reasoning", files[0], images, {"label": labels},
                    {"label": np.int32}, scene=scenes,
                    meta={"dataset": "Bongard-HOI", "files": [str(f) for f in files]})


def _bongard_side(problem, side: int, where: str) -> list[str]:
  """The image paths of one side (0 positives, 1 negatives) of a problem, query last."""
  expect_list(problem, where)
  if len(problem) < 2:
    raise FormatError(f"{where} has {len(problem)} entries, expected [positives, negatives, "
                      "task name].")
  entries = expect_list(problem[side], f"{where}[{side}]", BONGARD_SIDE)
  return [field(entry, "im_path", f"{where}[{side}][{j}]", str).removeprefix("./")
          for j, entry in enumerate(entries)]
