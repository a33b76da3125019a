"""Each G-VUE task's decoder, loss and evaluation on cached PVR features.

A head turns a task's cached features (`features` below) and its `Split` into training arrays
(every array indexed by training example), builds the task's decoder (`models.gvue_decoders`),
scores a minibatch with the task's loss (`gvue_losses`) and evaluates a trained decoder on the
test split with the task's metrics (`gvue_metrics`), keyed as `gvue.TASKS` declares them.

Features, computed once per (split, PVR) by the job (`data.gvue.features`):
  map        [N, h, w, C]  the last block's unresized grid (ViT: patch tokens; CNN: C5) -- what
                           G-VUE's label, 3-D and retrieval decoders read
  p0..p3     [N, h_i, w_i, C_i]  the four-level pyramid (strides 4-32) the dense decoder reads
  text, text_mask  [N, T, D], [N, T]  the frozen text encoder's tokens of each example's text
Abstract reasoning's map is [N, 13, 1, C]: each image's mean-pooled grid, one token per image in
problem order (six positives, six negatives, the query), so the label decoder's sine positions
tell the roles apart. Image-text retrieval trains on (caption, its image) pairs, so its arrays
are indexed by caption.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vcbench.algos import decoder as decoder_lib
from vcbench.benchmarks import gvue_losses as losses
from vcbench.benchmarks import gvue_metrics as metrics
from vcbench.models import gvue_decoders as decoders

PYRAMID = ("p0", "p1", "p2", "p3")


@dataclasses.dataclass(frozen=True)
class DecoderSize:
  """The label decoder's transformer (G-VUE: 256 wide, 6 layers, 8 heads, feed-forward 2048)
  and the dense decoder's width; reduced protocols shrink them and say so."""
  width: int = 256
  depth: int = 6
  num_heads: int = 8
  mlp_dim: int = 2048
  dropout: float = 0.1


@dataclasses.dataclass(frozen=True)
class Head:
  """One task's decoder family. `model(size, split)` builds the decoder; `train_data(feats,
  split)` gives the training arrays; `loss(model, variables, batch, key)` trains it;
  `predict(model, variables, feats, split)` gives the test predictions (what the gallery shows)
  and `score(predictions, feats, split)` their metrics."""
  inputs: tuple[str, ...]
  model: Callable[[DecoderSize, Any], nn.Module]
  train_data: Callable[[Mapping[str, np.ndarray], Any], dict]
  init_batch: Callable[[dict], dict]
  loss: Callable
  predict: Callable
  score: Callable

  def evaluate(self, model, variables, feats, split) -> tuple[dict, np.ndarray]:
    """(metrics, predictions) on the test split."""
    predictions = np.asarray(self.predict(model, variables, feats, split))
    return self.score(predictions, feats, split), predictions


def out_dim(task: str, split) -> int:
  """The decoder's outputs for this data (G-VUE's Table 5 numbers come from its datasets)."""
  if task == "vqa":
    return len(split.meta["answers"])
  if task == "semantic_segmentation":
    return int(split.meta["num_classes"]) + 1          # Label 0 (ignored) keeps its output.
  return {"depth_estimation": 1, "camera_pose": 7, "phrase_grounding": 4,
          "commonsense_reasoning": 4, "abstract_reasoning": 2}.get(task, 0)


# --- label decoder tasks -------------------------------------------------------------------

def _label_model(task):
  def make(size: DecoderSize, split):
    return decoders.LabelDecoder(out_dim(task, split), width=size.width, depth=size.depth,
                                 num_heads=size.num_heads, mlp_dim=size.mlp_dim,
                                 dropout=size.dropout)
  return make


def _label_inputs(batch: Mapping[str, Any]) -> dict:
  kw = {"features": batch["map"]}
  if "text" in batch:
    kw.update(text=batch["text"], text_mask=batch["text_mask"])
  return kw


def _label_logits(model, variables, batch, key=None):
  train = key is not None
  logits, _ = model.apply(variables, **_label_inputs(batch), train=train,
                          rngs={"dropout": key} if train else None)
  return logits


def _label_data(target: str | None):
  def data(feats, split):
    out = {k: feats[k] for k in ("map", "text", "text_mask") if k in feats}
    if target:
      out["target"] = np.asarray(split.targets[target])
    return out
  return data


def _first(data: dict) -> dict:
  """The label decoder's inputs for two examples (what `init` traces)."""
  return _label_inputs({k: v[:2] for k, v in data.items()})


def _classify_loss(model, variables, batch, key):
  return losses.classification_loss(_label_logits(model, variables, batch, key),
                                     batch["target"]), {}


def _predict_class(model, variables, feats, split):
  logits = decoder_lib.predict(lambda v, b: _label_logits(model, v, b), variables,
                               _label_data(None)(feats, split))
  return np.argmax(np.asarray(logits), -1)


def _accuracy(target: str):
  return lambda pred, feats, split: metrics.accuracy(pred, split.targets[target])


def _classification(task: str, target: str, with_text: bool) -> Head:
  return Head(("map", "text") if with_text else ("map",), _label_model(task),
              _label_data(target), _first, _classify_loss, _predict_class, _accuracy(target))


def _pose_data(feats, split):
  return {"map": feats["map"], "position": split.targets["position"],
          "quaternion": split.targets["quaternion"]}


def _pose_loss(model, variables, batch, key):
  pred = _label_logits(model, variables, batch, key)
  return losses.pose_loss(pred, batch["position"], batch["quaternion"]), {}


def _pose_predict(model, variables, feats, split):
  return decoder_lib.predict(lambda v, b: _label_logits(model, v, b), variables,
                             {"map": feats["map"]})


def _pose_score(pred, feats, split):
  return metrics.pose_metrics(pred, split.targets["position"], split.targets["quaternion"],
                              scene=np.asarray(split.scene) if split.scene else None)


def _box_loss(model, variables, batch, key):
  boxes = losses.boxes_from_logits(_label_logits(model, variables, batch, key))
  return losses.box_loss(boxes, batch["target"]), {}


def _box_predict(model, variables, feats, split):
  return decoder_lib.predict(
      lambda v, b: losses.boxes_from_logits(_label_logits(model, v, b)), variables,
      _label_data(None)(feats, split))


def _box_score(boxes, feats, split):
  return metrics.grounding_metrics(boxes, split.targets["box"])


# --- dense decoder tasks -------------------------------------------------------------------

def _dense_model(task):
  def make(size: DecoderSize, split):
    return decoders.DenseDecoder(out_dim(task, split), width=size.width, dropout=size.dropout)
  return make


def _dense_logits(model, variables, batch, key, size: int):
  """Logits at the label maps' resolution (bilinear, as G-VUE upsamples the stride-4 output)."""
  train = key is not None
  out = model.apply(variables, [batch[p] for p in PYRAMID], train=train,
                    rngs={"dropout": key} if train else None,
                    mutable=["batch_stats"] if train else False)
  (logits, _), mutable = out if train else (out, {})
  b, _, _, k = logits.shape
  return jax.image.resize(logits, (b, size, size, k), "bilinear"), mutable


def _dense_data(target: str):
  def data(feats, split):
    return {**{p: feats[p] for p in PYRAMID}, "target": np.asarray(split.targets[target])}
  return data


def _depth_loss(model, variables, batch, key):
  logits, mutable = _dense_logits(model, variables, batch, key, batch["target"].shape[1])
  pred = losses.depth_from_logits(logits[..., 0])
  return losses.silog_loss(pred, batch["target"], losses.depth_valid(batch["target"])), mutable


def _dense_predict(model, variables, feats, split, fn):
  size = split.images.shape[1]
  return np.asarray(decoder_lib.predict(
      lambda v, b: fn(_dense_logits(model, v, b, None, size)[0]), variables,
      {p: feats[p] for p in PYRAMID}, batch_size=16))


def _depth_predict(model, variables, feats, split):
  return _dense_predict(model, variables, feats, split,
                        lambda logits: losses.depth_from_logits(logits[..., 0]))


def _depth_score(pred, feats, split):
  return metrics.depth_metrics(pred, split.targets["depth"])


def _segmentation_loss(model, variables, batch, key):
  logits, mutable = _dense_logits(model, variables, batch, key, batch["target"].shape[1])
  return losses.segmentation_loss(logits, batch["target"]), mutable


def _segmentation_predict(model, variables, feats, split):
  return _dense_predict(model, variables, feats, split, lambda logits: jnp.argmax(logits, -1))


def _segmentation_score(pred, feats, split):
  return metrics.segmentation_metrics(pred, split.targets["labels"],
                                      int(split.meta["num_classes"]))


def _dense_init(data):
  return {"pyramid": [data[p][:2] for p in PYRAMID]}


# --- retrieval and 3-D ---------------------------------------------------------------------

class RetrievalModel(nn.Module):
  """Image and text heads (separate parameters) into one 1024-d cosine space."""
  dim: int = 1024

  def setup(self):
    self.image_head = decoders.RetrievalHead(self.dim)
    self.text_head = decoders.RetrievalHead(self.dim)

  def image(self, features):
    b, h, w, c = features.shape
    return self.image_head(features.reshape(b, h * w, c), train=False)[0]

  def text(self, text, text_mask):
    return self.text_head(text, text_mask, train=False)[0]

  def __call__(self, features, text, text_mask, train: bool = False):
    return self.image(features), self.text(text, text_mask)


def _retrieval_data(feats, split):
  """One training example per caption: its image's map and its tokens."""
  image = np.asarray(feats["caption_image"])
  return {"map": feats["map"][image], "text": feats["caption_text"],
          "text_mask": feats["caption_mask"]}


def _retrieval_loss(model, variables, batch, key):
  img, txt = model.apply(variables, batch["map"], batch["text"], batch["text_mask"])
  return losses.retrieval_loss(img, txt), {}


def _retrieval_predict(model, variables, feats, split):
  """The image-caption cosine similarities [num_images, num_captions]."""
  img = decoder_lib.predict(lambda v, b: model.apply(v, b["map"], method=RetrievalModel.image),
                            variables, {"map": feats["map"]})
  txt = decoder_lib.predict(
      lambda v, b: model.apply(v, b["text"], b["text_mask"], method=RetrievalModel.text),
      variables, {"text": feats["caption_text"], "text_mask": feats["caption_mask"]})
  return np.asarray(img) @ np.asarray(txt).T


def _retrieval_score(similarity, feats, split):
  return metrics.recall_at_k(similarity, np.asarray(feats["caption_image"]))


def _occupancy_logits(model, variables, batch, key=None):
  train = key is not None
  return model.apply(variables, batch["map"], train=train,
                     rngs={"dropout": key} if train else None)[0]


def _occupancy_loss(model, variables, batch, key):
  return losses.occupancy_loss(_occupancy_logits(model, variables, batch, key),
                               batch["target"]), {}


def _occupancy_predict(model, variables, feats, split):
  return np.asarray(decoder_lib.predict(lambda v, b: _occupancy_logits(model, v, b), variables,
                                        {"map": feats["map"]}, batch_size=16)) > 0


def _occupancy_score(occupied, feats, split):
  return {"miou": 100.0 * float(np.mean(metrics.voxel_iou(occupied,
                                                          split.targets["occupancy"])))}


HEADS: dict[str, Head] = {
    "depth_estimation": Head(PYRAMID, _dense_model("depth_estimation"), _dense_data("depth"),
                             _dense_init, _depth_loss, _depth_predict, _depth_score),
    "camera_pose": Head(("map",), _label_model("camera_pose"), _pose_data, _first, _pose_loss,
                        _pose_predict, _pose_score),
    "reconstruction_3d": Head(
        ("map",), lambda size, split: decoders.OccupancyDecoder(
            resolution=split.targets["occupancy"].shape[1]),
        _label_data("occupancy"), lambda d: {"features": d["map"][:2]}, _occupancy_loss,
        _occupancy_predict, _occupancy_score),
    "image_text_retrieval": Head(
        ("map", "text"), lambda size, split: RetrievalModel(), _retrieval_data,
        lambda d: {"features": d["map"][:2], "text": d["text"][:2],
                   "text_mask": d["text_mask"][:2]}, _retrieval_loss, _retrieval_predict,
        _retrieval_score),
    "phrase_grounding": Head(("map", "text"), _label_model("phrase_grounding"),
                             _label_data("box"), _first, _box_loss, _box_predict, _box_score),
    "semantic_segmentation": Head(PYRAMID, _dense_model("semantic_segmentation"),
                                  _dense_data("labels"), _dense_init, _segmentation_loss,
                                  _segmentation_predict, _segmentation_score),
    "vqa": _classification("vqa", "answer", True),
    "commonsense_reasoning": _classification("commonsense_reasoning", "answer", True),
    "abstract_reasoning": _classification("abstract_reasoning", "label", False),
}
