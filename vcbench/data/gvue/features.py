"""Frozen PVR and text features of a G-VUE split, computed once and cached.

What each decoder reads (see `benchmarks/gvue_heads.py`): `map` is the PVR's last block as an
unresized grid (a ViT's patch tokens, a CNN's C5), `p0`..`p3` its four-level pyramid, `text` and
`text_mask` the frozen text encoder's tokens of each example's text. Abstract reasoning's map is
one mean-pooled token per image of the problem: [N, 13, 1, C]. Retrieval's captions are
flattened: `caption_text`/`caption_mask` [M, T, D] with `caption_image` [M] naming each
caption's image.

Features are stored as float16 (the pyramid of 500 images at 112 px is ~200 MB as float32) and
cached under `<root>/gvue_features/<task>/<pvr>-<split>-<key>`, the key a hash of the split's
contents, the encoder's fingerprint and the input size.
"""
from __future__ import annotations

import hashlib
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vcbench import files
from vcbench.data.gvue.split import Split
from vcbench.provenance import config_hash

MAP, PYRAMID = ("map",), ("p0", "p1", "p2", "p3")
CHOICE_MARKERS = ("(a)", "(b)", "(c)", "(d)")


def split_digest(split: Split) -> str:
  """A hash of what a split holds (images, targets, texts), to key the caches built on it."""
  h = hashlib.sha256()
  for array in (split.images, *(split.targets[k] for k in sorted(split.targets))):
    h.update(np.ascontiguousarray(array).tobytes())
  h.update(repr(split.texts).encode())
  return h.hexdigest()[:16]


def example_text(task: str, texts: Sequence[str]) -> str:
  """The one text the label decoder reads for an example: the question or expression; for
  commonsense the question followed by the four marked choices (G-VUE's decoder sees them in
  one sequence and outputs four logits)."""
  if task == "commonsense_reasoning":
    question, *choices = texts
    return " ".join([question, *(f"{m} {c}" for m, c in zip(CHOICE_MARKERS, choices))])
  return texts[0]


def padded_batches(n: int, batch_size: int):
  """(indices [batch_size], how many are real) over n examples; the last batch is padded by
  repeating the last example, so one compiled shape serves every batch."""
  for start in range(0, n, batch_size):
    yield np.minimum(np.arange(start, start + batch_size), n - 1), min(batch_size, n - start)


def image_features(apply: Callable, images: np.ndarray, keys: Sequence[str],
                   batch_size: int = 32) -> dict[str, np.ndarray]:
  """`apply(uint8 images) -> {'tokens', 'pyramid'}` over `images` in batches -> the `keys` of
  {map, p0..p3} as float16 arrays (the last batch padded, so one compiled shape serves all)."""
  out = {k: [] for k in keys}
  for idx, keep in padded_batches(len(images), batch_size):
    enc = apply(jnp.asarray(images[idx]))
    if "map" in out:
      tokens = np.asarray(enc["tokens"])
      g = int(round(np.sqrt(tokens.shape[1])))
      if g * g != tokens.shape[1]:
        raise ValueError(f"G-VUE features: {tokens.shape[1]} tokens are not a square grid "
                         f"(inputs must be square).")
      out["map"].append(tokens[:keep].reshape(keep, g, g, -1).astype(np.float16))
    for i, p in enumerate(PYRAMID):
      if p in out:
        out[p].append(np.asarray(enc["pyramid"][i][:keep]).astype(np.float16))
  return {k: np.concatenate(v) for k, v in out.items()}


def problem_features(apply: Callable, problems: np.ndarray, batch_size: int = 32) -> np.ndarray:
  """Bongard problems [N, K, H, W, 3] -> [N, K, 1, C]: each image's mean-pooled map."""
  n, k = problems.shape[:2]
  grid = image_features(apply, problems.reshape(n * k, *problems.shape[2:]), MAP,
                        batch_size)["map"]
  pooled = grid.astype(np.float32).mean(axis=(1, 2))
  return pooled.reshape(n, k, 1, -1).astype(np.float16)


def text_features(encode: Callable, task: str, split: Split, max_len: int) -> dict:
  """The text encoder's tokens for each example (retrieval: for each caption)."""
  if task == "image_text_retrieval":
    captions = [c for caps in split.texts for c in caps]
    image = np.repeat(np.arange(len(split.texts)), [len(c) for c in split.texts])
    tokens, mask = encode(captions, max_len)
    return {"caption_text": np.asarray(tokens, np.float16), "caption_mask": np.asarray(mask),
            "caption_image": image.astype(np.int32)}
  tokens, mask = encode([example_text(task, t) for t in split.texts], max_len)
  return {"text": np.asarray(tokens, np.float16), "text_mask": np.asarray(mask)}


def load_or_compute(root: str, task: str, pvr: str, split_name: str, split: Split,
                    fingerprint: dict, compute: Callable[[], dict]) -> dict[str, np.ndarray]:
  """`compute()`'s arrays, cached by (split contents, `fingerprint`)."""
  key = config_hash({"split": split_digest(split), **fingerprint})
  base = f"{root}/gvue_features/{task}/{pvr}-{split_name}-{key}"
  if files.exists(base):
    try:
      return files.load(base, key)[0]
    except files.CorruptFileError as e:
      files.rebuild_or_refuse(str(e), "Recomputing.")
      files.remove(base)
  arrays = compute()
  files.save(base, arrays, {"pvr": pvr, "task": task, "split": split_name}, key, compress=False)
  return arrays


def jitted_encoder(encoder) -> Callable:
  """The zoo encoder's pure apply, jitted once, closed over its params."""
  fn = jax.jit(encoder.apply)
  return lambda images: fn(encoder.params, images)
