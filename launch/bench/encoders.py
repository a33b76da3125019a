"""Speed of the zoo's encoders.

  python -m launch.bench.encoders [--models=vit_b16,rn50] [--batch=32] [--repeats=5]

Images/s of each Flax encoder and of its PyTorch reference on this machine in one run (same
batch, float32, 224x224, medians of `repeats` timed calls after a warm-up, the frameworks
timed round-robin), plus the Flax encoder in bfloat16, the Flax/PyTorch ratio, and the GFLOP/s
the Flax encoder reaches (XLA's FLOP count) next to the machine's GEMM rate. Prints a markdown
table (the one in the README) and, with --out, writes it with the raw timings as JSON.
"""
from __future__ import annotations

import json
import os
import statistics
from typing import Callable

from absl import app
from absl import flags
import numpy as np

import vcbench  # noqa: F401  # pylint: disable=unused-import  # Sets XLA:CPU defaults before JAX starts.
from launch import cli

from launch.bench import timing

_MODELS = flags.DEFINE_list(
    "models", "vit_s16,vit_b16,clip_vitb32,rn50,clip_rn50,mobilenetv2",
    "which encoders (also: vit_l16, clip_vitb16)")
_BATCH = flags.DEFINE_integer("batch", 32, "images per call")
_REPEATS = flags.DEFINE_integer("repeats", 5, "timed calls per measurement (median)")
_THREADS = flags.DEFINE_integer("torch_threads", os.cpu_count() or 1, "torch intra-op threads")
_OUT = flags.DEFINE_string("out", None, "write the table and raw timings as JSON here")


def _timm_vit(name: str):
  import timm  # pylint: disable=g-import-not-at-top
  return lambda: timm.create_model(name, pretrained=False, num_classes=0)


def _torchvision(name: str):
  import torchvision  # pylint: disable=g-import-not-at-top
  return lambda: getattr(torchvision.models, name)()


def _open_clip(name: str):
  def build():
    import open_clip  # pylint: disable=g-import-not-at-top
    return open_clip.create_model(name, pretrained=None).visual
  return build


# name -> (zoo entry whose architecture gives the Flax encoder, randomly
# initialised, and the PyTorch reference builder).
BENCHMARKS: dict[str, tuple[str, Callable]] = {
    "vit_s16": ("random_vit_s", _timm_vit("vit_small_patch16_224")),
    "vit_b16": ("random_vit_b", _timm_vit("vit_base_patch16_224")),
    "vit_l16": ("random_vit_l", _timm_vit("vit_large_patch16_224")),
    "clip_vitb16": ("clip_vitb16", _open_clip("ViT-B-16-quickgelu")),
    "clip_vitb32": ("clip_vitb32", _open_clip("ViT-B-32-quickgelu")),
    "rn50": ("in1k_rn50", _torchvision("resnet50")),
    "clip_rn50": ("clip_rn50", _open_clip("RN50-quickgelu")),
    "mobilenetv2": ("random_mobilenetv2", _torchvision("mobilenet_v2")),
}


def matmul_gflops(repeats: int) -> float:
  """The machine's float32 GEMM rate through XLA (ViT-B's MLP shape at batch 32),
  the roofline against which the encoders' rates are read."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  m, k, n = 32 * 197, 768, 3072
  a, b = jnp.ones((m, k)), jnp.ones((k, n))
  f = jax.jit(jnp.dot)
  return 2 * m * k * n / timing.median(lambda: f(a, b), repeats) / 1e9


def flax_encoder(entry: str, dtype):
  """A randomly initialised Flax encoder with the zoo entry's architecture, and
  the FLOPs of one call on a batch of 32 as XLA counts them."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from vcbench.models import zoo  # pylint: disable=g-import-not-at-top
  e = zoo.entry(entry)
  module = e.build(img_size=224, dtype=dtype)
  variables = jax.jit(module.init)(jax.random.key(0), jnp.zeros((1, 224, 224, 3)))
  apply = jax.jit(lambda v, x: module.apply(v, x)[0]["cls"])
  run = lambda x: apply(variables, x).block_until_ready()

  def flops(x):
    return apply.lower(variables, x).compile().cost_analysis()["flops"]
  return run, flops


def bench_one(name: str, batch: int, repeats: int) -> dict:
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  entry, torch_build = BENCHMARKS[name]
  x = np.random.default_rng(0).standard_normal((batch, 224, 224, 3), np.float32)
  xj = jnp.asarray(x)
  fp32, flops = flax_encoder(entry, jnp.float32)
  bf16, _ = flax_encoder(entry, jnp.bfloat16)
  model = torch_build().eval()
  xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
  with torch.inference_mode():
    times = timing.interleaved({"flax_fp32": lambda: fp32(xj), "flax_bf16": lambda: bf16(xj),
                                "torch_fp32": lambda: model(xt)}, repeats)
  row = {"model": name, "gflops_per_image": flops(xj) / batch / 1e9}
  for label, t in times.items():
    row[label], row[f"{label}_times"] = batch / statistics.median(t), t
  row["ratio"] = row["flax_fp32"] / row["torch_fp32"]
  return row


def table(rows: list[dict], batch: int, repeats: int, gemm: float) -> str:
  lines = [f"| encoder (batch {batch}, 224², median of {repeats}) | Flax fp32 img/s | "
           "Flax bf16 img/s | PyTorch fp32 img/s | Flax/PyTorch | Flax GFLOP/s |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
  for r in rows:
    lines.append(f"| {r['model']} | {r['flax_fp32']:.2f} | {r['flax_bf16']:.2f} | "
                 f"{r['torch_fp32']:.2f} | {r['ratio']:.2f}x | "
                 f"{r['flax_fp32'] * r['gflops_per_image']:.0f} |")
  lines.append(f"\nfloat32 GEMM through XLA on this machine ({32 * 197}x768x3072): "
               f"{gemm:.0f} GFLOP/s (the roofline for the GFLOP/s column).")
  return "\n".join(lines)


def encoders() -> str:
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(_THREADS.value)
  unknown = [m for m in _MODELS.value if m not in BENCHMARKS]
  if unknown:
    raise app.UsageError(f"unknown --models {unknown}; choose from {sorted(BENCHMARKS)}")
  rows = []
  for name in _MODELS.value:
    rows.append(bench_one(name, _BATCH.value, _REPEATS.value))
    print(f"{name}: flax {rows[-1]['flax_fp32']:.2f} img/s, torch {rows[-1]['torch_fp32']:.2f} "
          f"img/s ({rows[-1]['ratio']:.2f}x)", flush=True)
  gemm = matmul_gflops(_REPEATS.value)
  text = table(rows, _BATCH.value, _REPEATS.value, gemm)
  print(text)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"table": text, "rows": rows, "gemm_gflops": gemm,
                 "torch_threads": _THREADS.value}, f, indent=1)
  return text


main = timing.main_of(encoders)


if __name__ == "__main__":
  cli.run(main)
