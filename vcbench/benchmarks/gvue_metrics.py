"""G-VUE's evaluation metrics, in NumPy over a whole split (several are accumulated over the
split, not averaged over batches).

Each follows G-VUE's reference evaluation; the keys are those of the paper's Table 3 (and of
`vcbench.benchmarks.gvue.TASKS`), plus a few diagnostics the job may drop before scoring. Units
follow Table 3: depth in metres with the d<1.25 family as fractions; positions in metres,
orientations in degrees; every other score in percent (0-100).

  depth_metrics         'd<1.25' 'd<1.25^2' 'd<1.25^3' 'abs_rel' 'sq_rel' 'rmse' 'rmse_log'
                        'log10' 'silog'. Predictions are clipped to [1e-3, 10] m, each image is
                        scored on its valid pixels (target in (1e-3, 10) m, optionally inside
                        `eigen_crop`), and the split's value is the mean over images. 'silog'
                        is BTS's evaluation form, 100 sqrt(mean e^2 - (mean e)^2) with e the
                        natural-log error; G-VUE does not report it. G-VUE evaluates NYUv2
                        without the Eigen crop: its loader cuts the unregistered border
                        (`NYU_BORDER_BOX`) off image and depth before resizing. For a large
                        split call `depth_errors_per_image` per batch and average the rows.
  pose_metrics          'position_error' (Euclidean, metres) and 'orientation_error'
                        (2 acos |q . q_hat| in degrees, both quaternions scaled to unit norm):
                        means, not medians. With `scene`, the mean of each scene, then the mean
                        over scenes, as G-VUE averages the scenes of Cambridge and of 7-Scenes.
  reconstruction_metrics 'miou': the voxel IoU of each shape, then the mean over shapes.
  recall_at_k           'r@1' 'r@5' 'r@10' image-to-text (G-VUE's reported direction; an image
                        is a hit when any of its captions ranks in its top K) and 't2i_r@1'
                        't2i_r@5' 't2i_r@10' text-to-image.
  grounding_metrics     'acc@0.5': the share of boxes with IoU >= 0.5 with the target.
  segmentation_metrics  'miou': intersection and union of each class summed over the whole
  (SegmentationAccumulator) split, pixels labelled 0 ignored, IoU averaged over the classes
                        with a non-empty union; 'pixel_accuracy' over the non-ignored pixels.
  accuracy              'accuracy' (VQA, commonsense, abstract reasoning).

Ties in retrieval count against the model: a matching item ranks behind every other item that
scores at least as high, so a model that scores everything alike gets no hits (G-VUE's sort
leaves ties in an arbitrary order).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from vcbench.benchmarks.gvue_losses import (MAX_DEPTH, MIN_DEPTH, MetricInputError,
                                            check_same_shape, check_shape, depth_valid,
                                            paired_box_iou, unit_vectors)

DEPTH_KEYS = ("d<1.25", "d<1.25^2", "d<1.25^3", "abs_rel", "sq_rel", "rmse", "rmse_log", "log10",
              "silog")
# NYUv2 (480 x 640): the Eigen evaluation crop, rows [45, 471) and columns [41, 601).
EIGEN_CROP_480X640 = (45, 471, 41, 601)
# The border G-VUE cuts off NYUv2's 480 x 640 images and depths before resizing (rows [45, 472),
# columns [43, 608)): the Kinect's depth is not registered there.
NYU_BORDER_BOX = (45, 472, 43, 608)
GROUNDING_IOU = 0.5


# --- depth -------------------------------------------------------------------------------------

def eigen_crop(height: int = 480, width: int = 640) -> np.ndarray:
  """The Eigen crop as a bool mask [height, width]; exact at NYUv2's 480 x 640, scaled
  proportionally (rounded) for other sizes, e.g. depth maps already resized."""
  top, bottom, left, right = EIGEN_CROP_480X640
  mask = np.zeros((height, width), bool)
  mask[round(top * height / 480):round(bottom * height / 480),
       round(left * width / 640):round(right * width / 640)] = True
  return mask


def _masked_mean(values: np.ndarray, mask: np.ndarray, count: np.ndarray) -> np.ndarray:
  return np.where(mask, values, 0.0).sum(axis=1) / count


def depth_errors_per_image(pred, target, crop=None, min_depth: float = MIN_DEPTH,
                           max_depth: float = MAX_DEPTH) -> np.ndarray:
  """Every DEPTH_KEYS metric of each image, [N, 9] (columns in DEPTH_KEYS order); rows of
  images without a valid pixel are NaN.

  pred: positive depths [N, H, W] (clipped to [min_depth, max_depth]); target: [N, H, W] metres,
  0 where not measured; crop: optional bool [H, W] of the pixels to score (`eigen_crop`).
  """
  check_shape("depth_metrics", "pred", pred, (None, None, None))
  check_same_shape("depth_metrics", ("pred", "target"), pred, target)
  if crop is not None:
    check_shape("depth_metrics", "crop", crop, np.shape(pred)[1:])
  n = np.shape(pred)[0]
  target = np.asarray(target, np.float64).reshape(n, -1)
  pred = np.clip(np.asarray(pred, np.float64).reshape(n, -1), min_depth, max_depth)
  valid = depth_valid(target, min_depth, max_depth)
  if crop is not None:
    valid &= np.asarray(crop, bool).reshape(1, -1)
  count = valid.sum(axis=1).astype(np.float64)
  count[count == 0] = np.nan
  safe_target = np.where(valid, target, 1.0)   # Keeps 0-depth pixels out of the divisions.
  mean = lambda values: _masked_mean(values, valid, count)
  ratio = np.maximum(pred / safe_target, safe_target / pred)
  log_error = np.log(pred) - np.log(safe_target)
  sq_error = (pred - safe_target) ** 2
  silog = 100 * np.sqrt(np.maximum(mean(log_error ** 2) - mean(log_error) ** 2, 0.0))
  columns = [mean(ratio < 1.25), mean(ratio < 1.25 ** 2), mean(ratio < 1.25 ** 3),
             mean(np.abs(pred - safe_target) / safe_target), mean(sq_error / safe_target),
             np.sqrt(mean(sq_error)), np.sqrt(mean(log_error ** 2)),
             mean(np.abs(np.log10(pred) - np.log10(safe_target))), silog]
  return np.stack(columns, axis=1)


def depth_metrics(pred, target, crop=None, min_depth: float = MIN_DEPTH,
                  max_depth: float = MAX_DEPTH) -> dict[str, float]:
  """The mean over images of each image's metrics (images without a valid pixel are left out)."""
  per_image = depth_errors_per_image(pred, target, crop, min_depth, max_depth)
  scored = per_image[~np.isnan(per_image[:, 0])]
  if not len(scored):
    raise MetricInputError(f"depth_metrics: none of the {len(per_image)} target depth maps has "
                           f"a valid pixel (depth in ({min_depth}, {max_depth}) m).")
  return dict(zip(DEPTH_KEYS, map(float, scored.mean(axis=0))))


# --- camera pose -------------------------------------------------------------------------------

def orientation_error(q_pred, q_true) -> np.ndarray:
  """Angle in degrees [N] between rotations given as quaternions [N, 4] of any norm and sign."""
  check_same_shape("orientation_error", ("q_pred", "q_true"), q_pred, q_true)
  dot = np.abs(np.sum(unit_vectors(np.asarray(q_pred, np.float64), xp=np)
                      * unit_vectors(np.asarray(q_true, np.float64), xp=np), axis=-1))
  return np.degrees(2 * np.arccos(np.clip(dot, 0.0, 1.0)))


def pose_errors(pred, position, quaternion) -> tuple[np.ndarray, np.ndarray]:
  """Position error (metres) and orientation error (degrees) of each example, each [N].

  pred: [N, 7] = position then quaternion; position: [N, 3]; quaternion: [N, 4] (w, x, y, z).
  """
  check_shape("pose_metrics", "pred", pred, (None, 7))
  check_shape("pose_metrics", "position", position, (np.shape(pred)[0], 3))
  check_shape("pose_metrics", "quaternion", quaternion, (np.shape(pred)[0], 4))
  pred = np.asarray(pred, np.float64)
  return (np.linalg.norm(pred[:, :3] - np.asarray(position, np.float64), axis=-1),
          orientation_error(pred[:, 3:], quaternion))


def _mean_over_scenes(values: np.ndarray, scene: Sequence[str]) -> float:
  scene = np.asarray(scene)
  return float(np.mean([values[scene == s].mean() for s in np.unique(scene)]))


def pose_metrics(pred, position, quaternion, scene: Sequence[str] | None = None
                 ) -> dict[str, float]:
  """Mean position and orientation errors; with `scene` (one name per example) the mean of the
  per-scene means, so a long sequence counts as much as a short one."""
  position_err, orientation_err = pose_errors(pred, position, quaternion)
  if not len(position_err):
    raise MetricInputError("pose_metrics: no examples.")
  if scene is None:
    return {"position_error": float(position_err.mean()),
            "orientation_error": float(orientation_err.mean())}
  if len(scene) != len(position_err):
    raise MetricInputError(f"pose_metrics: scene must name each of the {len(position_err)} "
                           f"examples; got {len(scene)} names.")
  return {"position_error": _mean_over_scenes(position_err, scene),
          "orientation_error": _mean_over_scenes(orientation_err, scene)}


# --- 3-D reconstruction, grounding, accuracy ---------------------------------------------------

def voxel_iou(pred, target) -> np.ndarray:
  """IoU [N] of each predicted occupancy grid with its target (bool [N, R, R, R]); a shape whose
  prediction and target are both empty counts 1 (G-VUE's 0 / 0 never arises on ShapeNet)."""
  check_same_shape("voxel_iou", ("pred", "target"), pred, target)
  n = np.shape(pred)[0]
  pred, target = np.asarray(pred, bool).reshape(n, -1), np.asarray(target, bool).reshape(n, -1)
  inter, union = (pred & target).sum(axis=1), (pred | target).sum(axis=1)
  return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def reconstruction_metrics(logits, occupancy, threshold: float = 0.0) -> dict[str, float]:
  """'miou' (percent): a voxel is predicted occupied where its logit exceeds `threshold`
  (0 = probability 0.5)."""
  check_same_shape("reconstruction_metrics", ("logits", "occupancy"), logits, occupancy)
  return {"miou": 100 * float(voxel_iou(np.asarray(logits) > threshold, occupancy).mean())}


def grounding_metrics(pred_boxes, target_boxes, threshold: float = GROUNDING_IOU
                      ) -> dict[str, float]:
  """'acc@0.5' (percent): boxes [N, 4] (x0, y0, x1, y1) with IoU >= threshold, as G-VUE counts."""
  iou = paired_box_iou(np.asarray(pred_boxes, np.float64), np.asarray(target_boxes, np.float64),
                       xp=np)
  return {"acc@0.5": 100 * float(np.mean(iou >= threshold))}


def accuracy(predicted, labels) -> dict[str, float]:
  """'accuracy' (percent). predicted: class indices shaped like labels, or scores with one more
  trailing axis (the arg-max is the prediction)."""
  predicted, labels = np.asarray(predicted), np.asarray(labels)
  if predicted.ndim == labels.ndim + 1:
    predicted = predicted.argmax(axis=-1)
  check_same_shape("accuracy", ("predicted", "labels"), predicted, labels)
  return {"accuracy": 100 * float(np.mean(predicted == labels))}


# --- retrieval ---------------------------------------------------------------------------------

def _check_retrieval(similarity, caption_image) -> tuple[np.ndarray, np.ndarray]:
  similarity, caption_image = np.asarray(similarity, np.float64), np.asarray(caption_image)
  check_shape("recall_at_k", "similarity", similarity, (None, None))
  check_shape("recall_at_k", "caption_image", caption_image, (similarity.shape[1],))
  num_images = similarity.shape[0]
  if caption_image.min(initial=0) < 0 or caption_image.max(initial=0) >= num_images:
    raise MetricInputError(f"recall_at_k: caption_image must index the {num_images} images; "
                           f"got values in [{caption_image.min()}, {caption_image.max()}].")
  uncaptioned = np.setdiff1d(np.arange(num_images), caption_image)
  if len(uncaptioned):
    raise MetricInputError(f"recall_at_k: images {uncaptioned[:5].tolist()} (of "
                           f"{len(uncaptioned)}) have no caption in caption_image.")
  return similarity, caption_image


def image_to_text_ranks(similarity, caption_image) -> np.ndarray:
  """For each image [num_images], the 0-based rank of its best caption: the number of other
  images' captions scoring at least as high. similarity: [num_images, num_captions]."""
  similarity, caption_image = _check_retrieval(similarity, caption_image)
  matches = caption_image[None, :] == np.arange(similarity.shape[0])[:, None]
  best_match = np.where(matches, similarity, -np.inf).max(axis=1, keepdims=True)
  return ((similarity >= best_match) & ~matches).sum(axis=1)


def text_to_image_ranks(similarity, caption_image) -> np.ndarray:
  """For each caption [num_captions], the 0-based rank of its image among all images: the number
  of other images scoring at least as high."""
  similarity, caption_image = _check_retrieval(similarity, caption_image)
  captions = np.arange(similarity.shape[1])
  own = similarity[caption_image, captions]
  return (similarity >= own[None, :]).sum(axis=0) - 1


def recall_at_k(similarity, caption_image, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
  """Image-to-text 'r@K' and text-to-image 't2i_r@K' in percent.

  similarity: [num_images, num_captions] scores; caption_image: [num_captions] the image each
  caption describes (every image needs at least one).
  """
  i2t = image_to_text_ranks(similarity, caption_image)
  t2i = text_to_image_ranks(similarity, caption_image)
  out = {f"r@{k}": 100 * float(np.mean(i2t < k)) for k in ks}
  out.update({f"t2i_r@{k}": 100 * float(np.mean(t2i < k)) for k in ks})
  return out


# --- segmentation ------------------------------------------------------------------------------

def intersection_and_union(pred, labels, num_classes: int, ignore_index: int = 0
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Pixel counts of classes 1..num_classes (index c - 1): intersection, union and target area.

  pred, labels: integer maps of one shape; labels in 0..num_classes, where `ignore_index` (0)
  pixels are left out whatever is predicted there. A prediction outside 1..num_classes on a
  scored pixel is wrong and enlarges only the target class's union.
  """
  check_same_shape("segmentation_metrics", ("pred", "labels"), pred, labels)
  pred, labels = np.asarray(pred).ravel(), np.asarray(labels).ravel()
  if labels.size and (labels.min() < 0 or labels.max() > num_classes):
    raise MetricInputError(f"segmentation_metrics: labels must lie in 0..{num_classes}; got "
                           f"values in [{labels.min()}, {labels.max()}].")
  scored = labels != ignore_index
  pred, labels = pred[scored], labels[scored]
  count = lambda values: np.bincount(values, minlength=num_classes + 1)[1:num_classes + 1]
  in_range = (pred >= 1) & (pred <= num_classes)
  intersection = count(labels[pred == labels])
  label_area = count(labels)
  pred_area = count(pred[in_range].astype(np.int64))
  return intersection, pred_area + label_area - intersection, label_area


class SegmentationAccumulator:
  """Sums intersection, union and target area over a split's batches; `result()` scores them."""

  def __init__(self, num_classes: int, ignore_index: int = 0):
    self.num_classes, self.ignore_index = num_classes, ignore_index
    self.intersection = np.zeros(num_classes, np.int64)
    self.union = np.zeros(num_classes, np.int64)
    self.label_area = np.zeros(num_classes, np.int64)

  def update(self, pred, labels) -> None:
    inter, union, area = intersection_and_union(pred, labels, self.num_classes,
                                                self.ignore_index)
    self.intersection += inter
    self.union += union
    self.label_area += area

  def result(self) -> dict[str, float]:
    """'miou' over the classes with a non-empty union and 'pixel_accuracy', in percent."""
    present = self.union > 0
    if not present.any():
      raise MetricInputError("segmentation_metrics: no scored pixel (every label is "
                             f"{self.ignore_index}).")
    iou = self.intersection[present] / self.union[present]
    pixels = max(int(self.label_area.sum()), 1)
    return {"miou": 100 * float(iou.mean()),
            "pixel_accuracy": 100 * float(self.intersection.sum() / pixels)}


def segmentation_metrics(pred, labels, num_classes: int, ignore_index: int = 0
                         ) -> dict[str, float]:
  """`SegmentationAccumulator`'s result for one array of label maps."""
  accumulator = SegmentationAccumulator(num_classes, ignore_index)
  accumulator.update(pred, labels)
  return accumulator.result()
