"""Frozen embeddings of demo frames, computed once per (PVR version, demos) and cached.

Key = hash of the embedder's fingerprint (name, input size, weight digest) and the demo
file's sha256 (which covers the task, render config and seeds), so a cache made under
another render config or PVR version is never reused. A corrupt or truncated cache file is
detected by its checksum and recomputed.
"""
from __future__ import annotations

import numpy as np

from vcbench import files
from vcbench.data.demos import Demos
from vcbench.models.embedder import Embedder, embed_all
from vcbench.provenance import config_hash


def cache_key(embedder: Embedder, demos: Demos) -> str:
  return config_hash({"embedder": embedder.fingerprint, "demos": demos.sha256})


def load_or_compute(root: str, task: str, embedder: Embedder, demos: Demos,
                    batch_size: int = 64) -> np.ndarray:
  key = cache_key(embedder, demos)
  base = f"{root}/embeddings/{task}/{embedder.name}-{key}"
  if files.exists(base):
    try:
      return files.load(base, key)[0]["emb"]
    except files.CorruptFileError as e:
      files.rebuild_or_refuse(str(e), "Recomputing.")
      files.remove(base)
  values = demos.state if embedder.obs_key == "state" else demos.frames
  emb = embed_all(embedder, values, batch_size, desc=f"embed {task} {embedder.name}")
  files.save(base, {"emb": emb.astype(np.float32)},
             {"embedder": embedder.fingerprint, "demos": demos.sha256}, key, compress=False)
  return emb
