"""Shapes probe: linear probes of frozen PVRs on drawn shapes (the zoo demo job).

Frozen PVR embeddings of procedurally drawn shapes (disc, square, triangle,
cross, ring, bar; random colours, sizes, positions, rotations, textured
backgrounds) are classified by a ridge-regression linear probe. It exercises
the whole zoo path (checkpoint -> conversion -> preprocessing -> jitted
encoder -> embeddings -> metric -> result store -> table) and gives a real,
if small, signal: a pretrained encoder (torchvision's ImageNet MobileNetV2,
whose weights install offline) against random ones of similar cost.
"""
from __future__ import annotations

import time

import jax
import numpy as np

from vcbench.models import zoo
from vcbench.progress import progress

BENCHMARK = "zoo_demo"
SHAPES = ("disc", "square", "triangle", "cross", "ring", "bar")


def _shape_mask(kind: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
  """Boolean mask of `kind` in rotated, scaled coordinates u, v (unit radius)."""
  if kind == "disc":
    return u * u + v * v <= 1.0
  if kind == "square":
    return (np.abs(u) <= 0.8) & (np.abs(v) <= 0.8)
  if kind == "triangle":
    return (v >= -0.6) & (v <= 1.0 - 1.2 * np.abs(u)) & (np.abs(u) <= 0.9)
  if kind == "cross":
    return ((np.abs(u) <= 0.25) | (np.abs(v) <= 0.25)) & (np.abs(u) <= 1) & (np.abs(v) <= 1)
  if kind == "ring":
    r2 = u * u + v * v
    return (r2 <= 1.0) & (r2 >= 0.45)
  if kind == "bar":
    return (np.abs(u) <= 1.0) & (np.abs(v) <= 0.3)
  raise ValueError(f"unknown shape {kind!r}; known: {SHAPES}")


def make_shapes(seed: int, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
  """n uint8 images [n, size, size, 3] and their labels, deterministic in seed."""
  rng = np.random.default_rng(seed)
  yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
  images = np.empty((n, size, size, 3), np.uint8)
  labels = rng.integers(0, len(SHAPES), n)
  for i, label in enumerate(labels):
    bg = rng.uniform(0, 255, 3)
    fg = rng.uniform(0, 255, 3)
    freq, phase = rng.uniform(2, 12, 2), rng.uniform(0, 2 * np.pi, 2)
    texture = 20 * np.sin(freq[0] * 2 * np.pi * xx + phase[0]) * np.sin(
        freq[1] * 2 * np.pi * yy + phase[1])
    radius = rng.uniform(0.15, 0.35)
    cx, cy = rng.uniform(radius, 1 - radius, 2)
    angle = rng.uniform(0, 2 * np.pi)
    dx, dy = (xx - cx) / radius, (yy - cy) / radius
    u = np.cos(angle) * dx + np.sin(angle) * dy
    v = -np.sin(angle) * dx + np.cos(angle) * dy
    mask = _shape_mask(SHAPES[label], u, v)[..., None]
    img = np.where(mask, fg, bg + texture[..., None]) + rng.normal(0, 8, (size, size, 3))
    images[i] = np.clip(img, 0, 255).astype(np.uint8)
  return images, labels


def embed(encoder: zoo.Encoder, images: np.ndarray, batch_size: int,
          desc: str = "embed") -> tuple[np.ndarray, float]:
  """CLS embeddings of `images` in fixed-size batches (one compile); returns
  (embeddings, images per second excluding the compile)."""
  fn = jax.jit(lambda p, x: encoder.apply(p, x)["cls"])
  n = len(images)
  pad = (-n) % batch_size
  padded = np.concatenate([images, np.zeros((pad, *images.shape[1:]), images.dtype)])
  fn(encoder.params, padded[:batch_size]).block_until_ready()  # compile
  out, start = [], time.perf_counter()
  for i in progress(range(0, len(padded), batch_size), desc=desc):
    out.append(np.asarray(fn(encoder.params, padded[i:i + batch_size])))
  seconds = time.perf_counter() - start
  return np.concatenate(out)[:n], len(padded) / seconds


def _ridge(x, y, lam):
  d = x.shape[1]
  return np.linalg.solve(x.T @ x + lam * x.shape[0] * np.eye(d), x.T @ y)


def linear_probe(train_x, train_y, test_x, test_y, num_classes: int,
                 lambdas=(1e-4, 1e-3, 1e-2, 1e-1, 1.0)) -> dict[str, float]:
  """Ridge-regression probe; the penalty is chosen on the last fifth of train."""
  mu, sd = train_x.mean(0), train_x.std(0) + 1e-6
  norm = lambda x: np.concatenate([(x - mu) / sd, np.ones((len(x), 1))], 1).astype(np.float64)
  xtr, xte = norm(train_x), norm(test_x)
  onehot = np.eye(num_classes)[train_y]
  cut = len(xtr) * 4 // 5
  val_acc = []
  for lam in lambdas:
    w = _ridge(xtr[:cut], onehot[:cut], lam)
    val_acc.append(float(np.mean(np.argmax(xtr[cut:] @ w, 1) == train_y[cut:])))
  best = lambdas[int(np.argmax(val_acc))]
  w = _ridge(xtr, onehot, best)
  acc = float(np.mean(np.argmax(xte @ w, 1) == test_y))
  return {"accuracy": acc, "val_accuracy": max(val_acc), "ridge": best}


def probe(encoder: zoo.Encoder, train, test, batch_size: int, name: str = "") -> dict:
  """A ridge probe on `encoder`'s frozen `cls` embeddings of `train` (images, labels), scored
  on `test`; the metrics of one store cell."""
  xtr, ips = embed(encoder, train[0], batch_size, f"{name} train")
  xte, _ = embed(encoder, test[0], batch_size, f"{name} test")
  metrics = linear_probe(xtr, train[1], xte, test[1], len(SHAPES))
  metrics.update(images_per_s=ips, embed_dim=int(xtr.shape[1]))
  return metrics


def table(rows: list[dict]) -> str:
  """Markdown table of stored probe results."""
  lines = ["| PVR | probe accuracy | val accuracy | embed dim | images/s |",
           "| --- | ---: | ---: | ---: | ---: |"]
  for r in sorted(rows, key=lambda r: -r["accuracy"]):
    lines.append(f"| {r['pvr']} | {r['accuracy']:.3f} | {r['val_accuracy']:.3f} | "
                 f"{r['embed_dim']} | {r['images_per_s']:.1f} |")
  return "\n".join(lines)
