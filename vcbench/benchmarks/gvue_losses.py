"""The training losses of G-VUE's task decoders, in JAX (jittable, batched, each a scalar).

G-VUE trains a small decoder per task on a frozen PVR. These are the losses its reference
implementation trains them with, written from its definitions:

  depth     `silog_loss`: the BTS/AdaBins scale-invariant log loss, 10 sqrt(mean d^2 - 0.85
            (mean d)^2) with d = log(pred / target), pooled over the valid pixels (depth in
            (1e-3, 10) m) of the whole batch -- not averaged per image. The decoder's output
            becomes a depth with `depth_from_logits` (sigmoid times 10 m).
  pose      `pose_loss`: MSE of the position plus 150 times the MSE between the predicted and
            the target quaternion, both scaled to unit norm (q and -q are not identified: the
            reference does not, and a decoder learns one hemisphere).
  boxes     `box_loss`: 2 GIoU loss + 5 SmoothL1 (beta 1) on normalised (x0, y0, x1, y1); the
            decoder's four outputs become a box with `boxes_from_logits` (sigmoid, then
            centre-size to corners).
  segment.  `segmentation_loss`: pixel cross entropy over num_classes + 1 outputs with label 0
            ("other" in ADE20K) ignored and the labels kept as they are (not shifted); the mean
            runs over the non-ignored pixels of the batch.
  retrieval `retrieval_loss`: the symmetric (image->text, text->image) cross entropy of the
            cosine similarities divided by the temperature 0.07, the i-th caption matching the
            i-th image.
  labels    `classification_loss`: cross entropy (VQA answers, commonsense choices, Bongard).
  3-D       `occupancy_loss`: binary cross entropy on voxel occupancy logits. G-VUE predicts
            the codes of a pre-trained SDF auto-encoder instead; vcbench's 3-D target is a
            plain occupancy grid, so its decoder is trained voxel by voxel.

Box geometry (`box_iou`, `generalized_box_iou` pairwise like torchvision's, and the elementwise
`paired_*`) takes `xp=np` for exact host-side metrics. Shapes are checked when a function is
traced, so a mistake fails before any step runs.
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vcbench.errors import UserError

MIN_DEPTH, MAX_DEPTH = 1e-3, 10.0   # metres; NYUv2's valid range in G-VUE.
SILOG_LAMBDA = 0.85
SILOG_SCALE = 10.0                  # BTS's factor, kept by G-VUE.
POSE_BETA = 150.0                   # weight of the quaternion term.
GIOU_WEIGHT, L1_WEIGHT = 2.0, 5.0
RETRIEVAL_TEMPERATURE = 0.07
# Keeps the GIoU loss finite for degenerate boxes (torchvision's loss uses the same).
BOX_LOSS_EPS = 1e-7


class MetricInputError(UserError, ValueError):
  """Predictions or targets of the wrong shape for a G-VUE loss or metric."""


def check_shape(where: str, name: str, array, expected: Sequence[int | None]) -> None:
  """Raise unless `array` has len(expected) axes of the given sizes (None = any)."""
  shape = tuple(np.shape(array))
  if len(shape) != len(expected) or any(e is not None and s != e
                                        for s, e in zip(shape, expected)):
    want = "[" + ", ".join("*" if e is None else str(e) for e in expected) + "]"
    raise MetricInputError(f"{where}: {name} must have shape {want}; got {list(shape)}.")


def check_same_shape(where: str, names: Sequence[str], *arrays) -> None:
  shapes = [tuple(np.shape(a)) for a in arrays]
  if len(set(shapes)) != 1:
    raise MetricInputError(f"{where}: {', '.join(names)} must have the same shape; got "
                           f"{', '.join(f'{n} {list(s)}' for n, s in zip(names, shapes))}.")


# --- depth -------------------------------------------------------------------------------------

def depth_valid(target, min_depth: float = MIN_DEPTH, max_depth: float = MAX_DEPTH):
  """Pixels with a measured depth strictly inside (min_depth, max_depth) metres (0 = none)."""
  return (target > min_depth) & (target < max_depth)


def depth_from_logits(logits, max_depth: float = MAX_DEPTH):
  """The dense decoder's one channel as a depth in (0, max_depth) metres."""
  return jax.nn.sigmoid(logits) * max_depth


def _safe_sqrt(x):
  """sqrt(x) for x > 0, else 0, with a finite gradient everywhere."""
  positive = x > 0
  return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0)


def silog_loss(pred, target, valid, lam: float = SILOG_LAMBDA, scale: float = SILOG_SCALE):
  """Scale-invariant log loss over all valid pixels of the batch (0 when there are none).

  pred: positive depths [B, H, W]; target: depths [B, H, W]; valid: bool [B, H, W].
  """
  check_same_shape("silog_loss", ("pred", "target", "valid"), pred, target, valid)
  # Invalid pixels get ratio 1 so their log (and its gradient) is an exact 0, not NaN * 0.
  d = jnp.log(jnp.where(valid, pred, 1.0)) - jnp.log(jnp.where(valid, target, 1.0))
  count = jnp.maximum(jnp.sum(valid), 1)
  mean_sq, mean = jnp.sum(d * d) / count, jnp.sum(d) / count
  return _safe_sqrt(mean_sq - lam * mean * mean) * scale


# --- camera pose -------------------------------------------------------------------------------

def unit_vectors(x, eps: float = 1e-12, xp=jnp):
  """x / max(|x|, eps) along the last axis (quaternions, embeddings)."""
  return x / xp.maximum(xp.linalg.norm(x, axis=-1, keepdims=True), eps)


def pose_loss(pred, position, quaternion, beta: float = POSE_BETA):
  """MSE(position) + beta MSE(unit quaternions).

  pred: [B, 7] = position (3) then quaternion (4, any norm); position: [B, 3] metres;
  quaternion: [B, 4] (w, x, y, z).
  """
  check_shape("pose_loss", "pred", pred, (None, 7))
  check_shape("pose_loss", "position", position, (pred.shape[0], 3))
  check_shape("pose_loss", "quaternion", quaternion, (pred.shape[0], 4))
  position_mse = jnp.mean((pred[:, :3] - position) ** 2)
  q_diff = unit_vectors(pred[:, 3:]) - unit_vectors(quaternion)
  return position_mse + beta * jnp.mean(q_diff ** 2)


# --- boxes -------------------------------------------------------------------------------------

def boxes_from_logits(logits):
  """The grounding decoder's [B, 4] outputs as (x0, y0, x1, y1): sigmoid gives a normalised
  (centre x, centre y, width, height)."""
  check_shape("boxes_from_logits", "logits", logits, (None, 4))
  cx, cy, w, h = jnp.moveaxis(jax.nn.sigmoid(logits), -1, 0)
  return jnp.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)


def _area(boxes):
  return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def _iou_and_enclosure(a, b, xp, eps: float = 0.0):
  """IoU and GIoU's penalty of boxes a and b, broadcast against each other."""
  inter_wh = xp.clip(xp.minimum(a[..., 2:], b[..., 2:]) - xp.maximum(a[..., :2], b[..., :2]),
                     0, None)
  inter = inter_wh[..., 0] * inter_wh[..., 1]
  union = _area(a) + _area(b) - inter
  hull_wh = xp.clip(xp.maximum(a[..., 2:], b[..., 2:]) - xp.minimum(a[..., :2], b[..., :2]),
                    0, None)
  hull = hull_wh[..., 0] * hull_wh[..., 1]
  return inter / (union + eps), (hull - union) / (hull + eps)


def _check_boxes(where: str, a, b, paired: bool) -> None:
  check_shape(where, "boxes1", a, (None, 4))
  check_shape(where, "boxes2", b, (a.shape[0] if paired else None, 4))


def box_iou(a, b, xp=jnp):
  """Pairwise IoU [N, M] of boxes a [N, 4] and b [M, 4] given as (x0, y0, x1, y1)."""
  _check_boxes("box_iou", a, b, paired=False)
  return _iou_and_enclosure(a[:, None], b[None, :], xp)[0]


def generalized_box_iou(a, b, xp=jnp):
  """Pairwise generalised IoU [N, M]: IoU minus the share of the enclosing box left empty."""
  _check_boxes("generalized_box_iou", a, b, paired=False)
  iou, penalty = _iou_and_enclosure(a[:, None], b[None, :], xp)
  return iou - penalty


def paired_box_iou(a, b, xp=jnp):
  """IoU [N] of a[i] with b[i]."""
  _check_boxes("paired_box_iou", a, b, paired=True)
  return _iou_and_enclosure(a, b, xp)[0]


def paired_generalized_box_iou(a, b, xp=jnp):
  """Generalised IoU [N] of a[i] with b[i]."""
  _check_boxes("paired_generalized_box_iou", a, b, paired=True)
  iou, penalty = _iou_and_enclosure(a, b, xp)
  return iou - penalty


def box_loss(pred, target, giou_weight: float = GIOU_WEIGHT, l1_weight: float = L1_WEIGHT):
  """2 mean(1 - GIoU) + 5 SmoothL1 (beta 1, mean over all coordinates), boxes [B, 4]."""
  _check_boxes("box_loss", pred, target, paired=True)
  iou, penalty = _iou_and_enclosure(pred, target, jnp, eps=BOX_LOSS_EPS)
  giou_loss = jnp.mean(1.0 - (iou - penalty))
  smooth_l1 = jnp.mean(optax.huber_loss(pred, target, delta=1.0))
  return giou_weight * giou_loss + l1_weight * smooth_l1


# --- segmentation, retrieval, labels, occupancy ------------------------------------------------

def segmentation_loss(logits, labels, ignore_index: int = 0):
  """Mean pixel cross entropy over the pixels whose label is not `ignore_index` (0 if none).

  logits: [B, H, W, K] (K = num_classes + 1, channel 0 never a target); labels: int [B, H, W].
  """
  check_shape("segmentation_loss", "logits", logits, (None, None, None, None))
  check_shape("segmentation_loss", "labels", labels, logits.shape[:3])
  keep = labels != ignore_index
  safe_labels = jnp.where(keep, labels, 0)
  per_pixel = optax.softmax_cross_entropy_with_integer_labels(logits, safe_labels)
  return jnp.sum(jnp.where(keep, per_pixel, 0.0)) / jnp.maximum(jnp.sum(keep), 1)


def retrieval_loss(image_emb, text_emb, temperature: float = RETRIEVAL_TEMPERATURE):
  """Symmetric contrastive cross entropy of a batch of matching (image, caption) pairs.

  image_emb, text_emb: [B, D]; row i of each describes the same example.
  """
  check_shape("retrieval_loss", "image_emb", image_emb, (None, None))
  check_shape("retrieval_loss", "text_emb", text_emb, image_emb.shape)
  logits = unit_vectors(image_emb) @ unit_vectors(text_emb).T / temperature
  match = jnp.arange(logits.shape[0])
  image_to_text = optax.softmax_cross_entropy_with_integer_labels(logits, match)
  text_to_image = optax.softmax_cross_entropy_with_integer_labels(logits.T, match)
  return (jnp.mean(image_to_text) + jnp.mean(text_to_image)) / 2


def classification_loss(logits, labels):
  """Mean cross entropy; logits [..., K], integer labels [...]."""
  check_shape("classification_loss", "labels", labels, logits.shape[:-1])
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def occupancy_loss(logits, occupancy):
  """Mean binary cross entropy over voxels; logits and bool occupancy of the same shape."""
  check_same_shape("occupancy_loss", ("logits", "occupancy"), logits, occupancy)
  return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, occupancy.astype(logits.dtype)))
