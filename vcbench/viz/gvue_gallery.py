"""A gallery of each G-VUE task: inputs, labels and every PVR's predictions, one row per example.

`figure(task, split, predictions)` draws the first test examples of `split` (a `Split`) with the
predictions the job kept for them (`{pvr: array}`, the `predict` output of the task's head):
depth and segmentation maps, boxes over the image, voxel silhouettes, the top caption, the
chosen answer. Text is shown as titles; right answers are marked with a check, wrong with a
cross.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from matplotlib import figure as figure_lib
from matplotlib import patches

from vcbench.data.gvue import features as features_lib


def figure(task: str, split, predictions: Mapping[str, np.ndarray], num: int = 4):
  n = min(num, len(split), *(len(p) for p in predictions.values()))
  pvrs = list(predictions)
  cols = 2 + len(pvrs)
  fig = figure_lib.Figure(figsize=(2.4 * cols, 2.4 * n + 0.4))
  for i in range(n):
    axes = [fig.add_subplot(n, cols, i * cols + j + 1) for j in range(cols)]
    for ax in axes:
      ax.set_xticks([]), ax.set_yticks([])
    _input(axes[0], task, split, i)
    _target(axes[1], task, split, i)
    for ax, pvr in zip(axes[2:], pvrs):
      _prediction(ax, task, split, i, predictions[pvr][i], pvr)
  fig.suptitle(f"G-VUE {task}: input, label, predictions")
  return fig


def _input(ax, task, split, i):
  image = split.images[i][-1] if task == "abstract_reasoning" else split.images[i]
  ax.imshow(image)
  title = {"abstract_reasoning": "query"}.get(task)
  if split.texts and task != "image_text_retrieval":
    title = features_lib.example_text(task, split.texts[i])
  ax.set_title(_wrap(title or "input"), fontsize=6)


def _target(ax, task, split, i):
  t = split.targets
  if task == "depth_estimation":
    ax.imshow(t["depth"][i], cmap="magma")
  elif task == "semantic_segmentation":
    ax.imshow(t["labels"][i], cmap="tab20", interpolation="nearest")
  elif task == "reconstruction_3d":
    ax.imshow(t["occupancy"][i].any(axis=0), cmap="gray")
  elif task == "phrase_grounding":
    ax.imshow(split.images[i])
    _box(ax, t["box"][i], split.images.shape[2], "lime")
  else:
    ax.imshow(split.images[i][0] if task == "abstract_reasoning" else split.images[i])
  ax.set_title(_wrap("label: " + _label_text(task, split, i)), fontsize=6)


def _prediction(ax, task, split, i, pred, pvr):
  if task == "depth_estimation":
    ax.imshow(pred, cmap="magma", vmin=0, vmax=float(split.targets["depth"][i].max()) or 1)
    text = pvr
  elif task == "semantic_segmentation":
    ax.imshow(pred, cmap="tab20", interpolation="nearest")
    text = pvr
  elif task == "reconstruction_3d":
    ax.imshow(np.asarray(pred).any(axis=0), cmap="gray")
    text = pvr
  elif task == "phrase_grounding":
    ax.imshow(split.images[i])
    _box(ax, pred, split.images.shape[2], "red")
    text = pvr
  else:
    ax.imshow(np.full((8, 8, 3), 255, np.uint8))
    text = f"{pvr}: {_predicted_text(task, split, i, pred)}"
  ax.set_title(_wrap(text), fontsize=6)


def _label_text(task, split, i) -> str:
  t = split.targets
  if task == "vqa":
    return str(split.meta["answers"][int(t["answer"][i])])
  if task == "commonsense_reasoning":
    return split.texts[i][1 + int(t["answer"][i])]
  if task == "abstract_reasoning":
    return "positive" if int(t["label"][i]) else "negative"
  if task == "image_text_retrieval":
    return split.texts[i][0]
  if task == "camera_pose":
    return "xyz " + " ".join(f"{v:.2f}" for v in t["position"][i])
  return ""


def _predicted_text(task, split, i, pred) -> str:
  t = split.targets
  if task == "vqa":
    mark = "✓" if int(pred) == int(t["answer"][i]) else "✗"
    return f"{split.meta['answers'][int(pred)]} {mark}"
  if task == "commonsense_reasoning":
    mark = "✓" if int(pred) == int(t["answer"][i]) else "✗"
    return f"{split.texts[i][1 + int(pred)]} {mark}"
  if task == "abstract_reasoning":
    mark = "✓" if int(pred) == int(t["label"][i]) else "✗"
    return f"{'positive' if int(pred) else 'negative'} {mark}"
  if task == "image_text_retrieval":
    captions = [c for caps in split.texts for c in caps]
    best = int(np.argmax(pred))
    return captions[best] if best < len(captions) else "?"
  if task == "camera_pose":
    err = float(np.linalg.norm(np.asarray(pred[:3]) - t["position"][i]))
    return "xyz " + " ".join(f"{v:.2f}" for v in pred[:3]) + f" ({err:.2f} m off)"
  return ""


def _box(ax, box, size, colour):
  x0, y0, x1, y1 = np.asarray(box) * size
  ax.add_patch(patches.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=colour,
                                 linewidth=1.5))


def _wrap(text: str, width: int = 38) -> str:
  words, lines, line = text.split(), [], ""
  for w in words:
    if len(line) + len(w) + 1 > width and line:
      lines.append(line)
      line = w
    else:
      line = f"{line} {w}".strip()
  return "\n".join(lines + [line])[:160]
