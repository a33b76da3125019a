"""Real-format loaders of G-VUE's Ground tasks: image-text retrieval (Flickr30k captions),
phrase grounding (RefCOCO) and semantic segmentation (ADE20K SceneParsing). Each returns a
checked `Split`.

Choices, and why:
  * Captions and expressions are kept as written (Karpathy's `raw`, RefCOCO's `sent`); G-VUE
    lower-cases and strips punctuation for its RoBERTa, a text encoder's own tokenizer does that.
  * Flickr30k reads Karpathy's dataset_flickr30k.json (one file, a `split` per image) and also
    the per-split lists ALBEF derives from it (what G-VUE reads: [{image, caption}], one entry
    per caption in train, a caption list per image in val/test), grouped into one example per
    image either way.
  * RefCOCO boxes come from the COCO annotation each ref points to ([x, y, w, h] pixels) and are
    normalised by the image file's own size. G-VUE keeps the first expression of each ref;
    `all_sentences=True` makes one example per expression, the usual RefCOCO protocol.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from vcbench.data.gvue import split as split_lib
from vcbench.data.gvue.formats_io import (FormatError, MissingFile, PathLike, check_request,
                                          expect_list, expect_split, field, head, image_reader,
                                          make_split, open_image, read_json, read_lines,
                                          require_file, resize_nearest, resize_rgb)

ADE_SPLITS = {"train": "training", "val": "validation"}
ADE_CLASSES = 150                 # SceneParsing's classes 1..150; 0 is "other", ignored.
ADE_LABEL_MODES = ("L", "P")      # one byte per pixel, the class index itself.
REFCOCO_TEST = "val"              # the first of G-VUE's RefCOCO test splits (val, testA, testB).


def load_image_text_retrieval(root: PathLike, split: str, size: int, limit: int | None = None, *,
                              annotations: PathLike | None = None,
                              image_dir: PathLike | None = None) -> split_lib.Split:
  """Flickr30k images, each with all its captions.

  `annotations` defaults to root/dataset_flickr30k.json (Karpathy's; images under `image_dir`,
  default root/flickr30k-images). An ALBEF per-split list (flickr30k_<split>.json) is read as
  the split itself, its image paths relative to `root`.
  """
  check_request(size, limit)
  root = Path(root)
  path = Path(annotations) if annotations is not None else root / "dataset_flickr30k.json"
  data = read_json(path, "Flickr30k captions")
  if isinstance(data, list):
    captioned, base = _albef_captions(data, path), root
  else:
    split = expect_split(split, ("train", "val", "test"), str(path))
    captioned = _karpathy_captions(data, path, split)
    base = Path(image_dir) if image_dir is not None else root / "flickr30k-images"
  read = image_reader(size)
  images, texts, scenes = [], [], []
  for name, captions, where in head(captioned, limit):
    images.append(read(base / name, where))
    texts.append(tuple(captions))
    scenes.append(Path(name).stem)
  return make_split("image_text_retrieval", path, images, {}, {}, texts=texts, scene=scenes,
                    meta={"dataset": "Flickr30k"})


def _karpathy_captions(data, path: Path, split: str) -> list[tuple[str, list[str], str]]:
  """(file name, captions, where) of each image in `split`."""
  records = field(data, "images", str(path), list)
  out, present = [], set()
  for i, record in enumerate(records):
    where = f"{path}: images[{i}]"
    record_split = field(record, "split", where, str)
    present.add(record_split)
    if record_split != split:
      continue
    sentences = field(record, "sentences", where, list)
    captions = [field(s, "raw", f"{where}['sentences'][{j}]", str).strip()
                for j, s in enumerate(sentences)]
    if not captions:
      raise FormatError(f"{where}: 'sentences' is empty.")
    out.append((field(record, "filename", where, str), captions, where))
  if not out:
    raise FormatError(f"{path}: no image has split {split!r}; splits present: {sorted(present)}.")
  return out


def _albef_captions(data: list, path: Path) -> list[tuple[str, list[str], str]]:
  """(image path, captions, where) per image, in first-appearance order."""
  grouped: dict[str, tuple[list[str], str]] = {}
  for i, record in enumerate(data):
    where = f"{path}: [{i}]"
    name = field(record, "image", where, str)
    caption = field(record, "caption", where, (str, list))
    captions = [caption] if isinstance(caption, str) else caption
    if not captions or not all(isinstance(c, str) for c in captions):
      raise FormatError(f"{where}['caption'] must be a caption or a non-empty list of them.")
    grouped.setdefault(name, ([], where))[0].extend(c.strip() for c in captions)
  return [(name, captions, where) for name, (captions, where) in grouped.items()]


def load_phrase_grounding(root: PathLike, split: str, size: int, limit: int | None = None, *,
                          refs_file: PathLike | None = None, instances_file: PathLike | None = None,
                          image_dir: PathLike | None = None,
                          all_sentences: bool = False) -> split_lib.Split:
  """RefCOCO from refer's release: root/refs(unc).p (a pickled list of refs: split, ann_id,
  sentences[].sent), root/instances.json (COCO: images[].file_name, annotations[].bbox) and the
  COCO train2014 images in `image_dir` (default root/images). The refs file is a pickle, which
  runs code when loaded: read only the release's own file.
  """
  check_request(size, limit)
  root = Path(root)
  refs_path = Path(refs_file) if refs_file is not None else root / "refs(unc).p"
  instances_path = Path(instances_file) if instances_file is not None else root / "instances.json"
  image_dir = Path(image_dir) if image_dir is not None else root / "images"
  refs = expect_list(_read_pickle(refs_path, "RefCOCO refs"), str(refs_path))
  native = REFCOCO_TEST if split == "test" else split
  present = {field(ref, "split", f"{refs_path}: refs[{i}]", str) for i, ref in enumerate(refs)}
  if native not in present:
    raise FormatError(f"{refs_path}: no ref has split {native!r}; splits present: "
                      f"{sorted(present)}.")
  annotations, coco_images = _coco_index(instances_path)
  read = image_reader(size)
  images, boxes, texts, scenes = [], [], [], []
  for i, ref in enumerate(refs):
    if limit is not None and len(images) >= limit:
      break
    where = f"{refs_path}: refs[{i}]"
    if ref["split"] != native:
      continue
    sentences = [field(s, "sent", f"{where}['sentences'][{j}]", str)
                 for j, s in enumerate(field(ref, "sentences", where, list))]
    if not sentences:
      raise FormatError(f"{where}: 'sentences' is empty.")
    image_id, xywh = _ref_box(ref, where, annotations, instances_path)
    image_record = coco_images.get(image_id)
    if image_record is None:
      raise FormatError(f"{where}: image_id {image_id} is not in {instances_path} 'images'.")
    path = image_dir / field(image_record, "file_name", f"{instances_path}: image {image_id}", str)
    image = read(path, where)
    box = _normalised_xyxy(xywh, read.original_size(path))
    for sentence in head(sentences if all_sentences else sentences[:1],
                         None if limit is None else limit - len(images)):
      images.append(image)
      boxes.append(box)
      texts.append((sentence,))
      scenes.append(str(image_id))
  return make_split("phrase_grounding", refs_path, images, {"box": boxes}, {"box": np.float32},
                    texts=texts, scene=scenes, meta={"dataset": "RefCOCO", "split": native})


def _read_pickle(path: PathLike, what: str):
  path = require_file(path, what)
  try:
    with open(path, "rb") as f:
      return pickle.load(f)
  except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError,
          TypeError, ValueError) as e:
    raise FormatError(f"{path}: not a readable pickle ({type(e).__name__}: {e}).") from e


def _coco_index(path: Path) -> tuple[dict, dict]:
  """({annotation id: (record, where)}, {image id: record}) of a COCO instances file."""
  coco = read_json(path, "COCO instances of the RefCOCO images")
  annotations = {}
  for i, ann in enumerate(field(coco, "annotations", str(path), list)):
    where = f"{path}: annotations[{i}]"
    annotations[field(ann, "id", where, int)] = (ann, where)
  coco_images = {}
  for i, image in enumerate(field(coco, "images", str(path), list)):
    coco_images[field(image, "id", f"{path}: images[{i}]", int)] = image
  return annotations, coco_images


def _ref_box(ref, where: str, annotations: dict, instances_path: Path):
  """(image id, [x, y, w, h]) of the COCO annotation a ref points to."""
  ann_id = field(ref, "ann_id", where, int)
  if ann_id not in annotations:
    raise FormatError(f"{where}: ann_id {ann_id} is not in {instances_path} 'annotations'.")
  ann, ann_where = annotations[ann_id]
  bbox = expect_list(field(ann, "bbox", ann_where, list), f"{ann_where}['bbox']", 4)
  if not all(isinstance(v, (int, float)) for v in bbox) or bbox[2] <= 0 or bbox[3] <= 0:
    raise FormatError(f"{ann_where}['bbox'] must be [x, y, width, height] with a positive "
                      f"width and height, got {bbox}.")
  return field(ann, "image_id", ann_where, int), bbox


def _normalised_xyxy(xywh, image_size: tuple[int, int]) -> np.ndarray:
  x, y, w, h = (float(v) for v in xywh)
  width, height = image_size
  return np.clip(np.array([x / width, y / height, (x + w) / width, (y + h) / height]), 0.0, 1.0)


def load_semantic_segmentation(root: PathLike, split: str, size: int, limit: int | None = None, *,
                               index_file: PathLike | None = None) -> split_lib.Split:
  """ADE20K SceneParsing (ADEChallengeData2016 at `root`): images/{training,validation}/*.jpg
  and annotations/.../*.png holding class indices (0 = other, ignored; 1..150). `index_file`
  (e.g. CSAIL's ADE20K_object150_val.txt, G-VUE's list) names images relative to root/images;
  without one, the split's images in file-name order, the same list.
  """
  check_request(size, limit)
  root = Path(root)
  split = expect_split(split, tuple(ADE_SPLITS), str(root), test="val")
  images, labels, scenes = [], [], []
  for name, where in head(_ade_names(root, split, index_file), limit):
    image = open_image(root / "images" / name, where)
    label_path = root / "annotations" / Path(name).with_suffix(".png")
    label = _ade_labels(open_image(label_path, where), label_path)
    if label.shape != image.size[::-1]:
      raise FormatError(f"{label_path}: annotation is {label.shape[0]}x{label.shape[1]}, its "
                        f"image {name} is {image.size[1]}x{image.size[0]}.")
    images.append(resize_rgb(image, size))
    labels.append(resize_nearest(label, size))
    scenes.append(Path(name).stem)
  return make_split("semantic_segmentation", root, images, {"labels": labels},
                    {"labels": np.int32}, scene=scenes,
                    meta={"num_classes": ADE_CLASSES, "dataset": "ADE20K SceneParsing"})


def _ade_names(root: Path, split: str, index_file: PathLike | None) -> list[tuple[str, str]]:
  """(image path relative to root/images, where it was listed)."""
  if index_file is not None:
    return [(line.strip(), f"{index_file}: line {n}")
            for n, line in enumerate(read_lines(index_file, "ADE20K index"), 1) if line.strip()]
  folder = root / "images" / ADE_SPLITS[split]
  if not folder.is_dir():
    raise MissingFile(f"{folder}: ADE20K {split} image folder not found.")
  return [(f"{ADE_SPLITS[split]}/{p.name}", str(folder)) for p in sorted(folder.glob("*.jpg"))]


def _ade_labels(image, path: Path) -> np.ndarray:
  if image.mode not in ADE_LABEL_MODES:
    raise FormatError(f"{path}: annotation must be a one-channel PNG of class indices, got PIL "
                      f"mode {image.mode!r}.")
  labels = np.asarray(image).astype(np.int32)
  if labels.max(initial=0) > ADE_CLASSES:
    raise FormatError(f"{path}: class index {labels.max()} is beyond ADE20K's {ADE_CLASSES} "
                      "classes (0 = other, 1..150).")
  return labels
