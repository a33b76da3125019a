"""MAE training throughput on this machine, and its data-parallel scaling over devices.

  python -m launch.bench.mae --mode=models --models=random_vit_ti,random_vit_s,random_vit_b
      --sizes=224,128 --batch=16 --steps=3 --repeats=3 [--decoder_depth=8]
      [--decoder_width=512] [--decoder_heads=16] [--out=bench_mae.md]
  python -m launch.bench.mae --mode=scaling --devices=1,2,4 --model=random_vit_ti --size=128
      --batch=32 [--steps=3] [--repeats=3] [--out=bench_mae_scaling.md]
  python -m launch.bench.mae --mode=models --quick       # a tiny smoke run (also --mode=scaling)

`models`: images/s of MAE pre-training (`vcbench.algos.mae.Trainer.chunk_fn`) for each
encoder and input size, with MAE's default decoder (8 blocks, width 512, 16 heads; the
--decoder_* flags change it) and mask ratio 0.75. One timed call is the jitted `lax.scan` of
--steps training steps (on-device augmentation, masking, forward, backward, AdamW) on --batch
random uint8 frames per step at the input size. The frames are placed on the devices before
timing, so the figure is the model's training speed, without data loading or host-to-device
copies (`mae.train` overlaps those with the step). images/s = steps x batch / time per call:
the median (and min-max) of --repeats timed calls after a compile (trace + lower + XLA
compile, reported) and one warm-up call. The input size must be a multiple of the patch (16).

`scaling`: the same measurement of one (model, size) cell with the batch split over N devices
(`parallel.data_mesh()` over all of them, parameters replicated, the gradient mean an
all-reduce), for each N in --devices. The device count is fixed when JAX starts, so each N runs
`python -m launch.bench.mae --mode=models --json` in a fresh process with
XLA_FLAGS=--xla_force_host_platform_device_count=N (and JAX_PLATFORMS=cpu); the report gives
images/s, the speed-up over the smallest count (1), and the first training step's loss of each
count with its relative difference from that of the smallest count, which should be float
summation noise (the sharded program computes what one device does).

Forced host devices are not extra hardware: all N "devices" are threads sharing this
machine's cores (2 on the machine this was written on). So the scaling mode shows that the
sharded program compiles, runs and computes the same losses, and what the partitioning costs
or gains on these cores; it is a correctness and overhead check, not a speed-up claim for
real accelerators, where each device brings its own compute.
"""
from __future__ import annotations

from concurrent import futures
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable, NamedTuple, Sequence

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from launch.bench import timing

from absl import flags
from absl import logging
import numpy as np
from launch import cli

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEVICE_FLAG = "--xla_force_host_platform_device_count"


class Decoder(NamedTuple):
  """The MAE decoder's size (MAE's default: 8 blocks of width 512, 16 heads)."""
  depth: int = 8
  width: int = 512
  heads: int = 16

  def label(self) -> str:
    return f"{self.depth} x {self.width}, {self.heads} heads"


class Run(NamedTuple):
  """What every cell of one benchmark shares."""
  batch: int = 16
  steps: int = 3
  repeats: int = 3
  decoder: Decoder = Decoder()


# --quick: small enough to compile and run in seconds (the test's setting).
QUICK_MODEL, QUICK_SIZE = "random_vit_ti", 32
QUICK = Run(batch=4, steps=1, repeats=1, decoder=Decoder(depth=1, width=32, heads=2))


def mae_config(model: str, size: int, run: Run):
  """MAE's default config for `model` at `size`, with `run`'s batch, chunk and decoder."""
  from vcbench.algos import mae  # pylint: disable=g-import-not-at-top
  c = mae.default_config()
  c.encoder, c.img_size = model, size
  c.batch_size, c.chunk = run.batch, run.steps
  c.decoder_depth, c.decoder_width, c.decoder_heads = run.decoder
  return c


def measure(model: str, size: int, run: Run, seed: int = 0) -> dict:
  """images/s of `run.steps` MAE steps per call on all of this process's devices.

  Returns a dict with the cell's settings, `devices`, `images_per_s` (median), `min` and
  `max` images/s, `times` (seconds per timed call), `compile_s` and `first_losses` (the
  losses of the warm-up call, whose first is the loss of the first step from the
  initialisation: the same for any device count up to float summation order).
  """
  import jax  # pylint: disable=g-import-not-at-top
  from vcbench import distributed, parallel  # pylint: disable=g-import-not-at-top
  from vcbench.algos import mae  # pylint: disable=g-import-not-at-top
  mesh = parallel.data_mesh()
  trainer = mae.make_train(mae_config(model, size, run), mesh=mesh)
  # Jitted: run op by op, the init compiles each of its hundreds of small ops on first use,
  # which takes longer than compiling it as one program; and that program runs once, so it
  # is not worth LLVM's optimisations (O0 halves its compile time; the values differ
  # from O2's by float rounding only).
  key = jax.random.key(seed)
  init = jax.jit(trainer.init, out_shardings=parallel.replicated(mesh)).lower(key).compile(
      compiler_options={"xla_backend_optimization_level": 0})
  state = init(key)
  frames = np.random.default_rng(seed).integers(
      0, 256, (run.steps, run.batch, size, size, 3), dtype=np.uint8)
  index, count = distributed.process_share(run.batch, "batch")   # Of several processes,
  share = run.batch // count                                       # each places its rows.
  batches = jax.block_until_ready(parallel.shard_batch(
      frames[:, index * share:(index + 1) * share], mesh, axis=1))
  t0 = time.perf_counter()
  # Compiled ahead of time so that compile time is measured apart from the first run.
  chunk = trainer.chunk_fn.lower(state, batches).compile()
  compile_s = time.perf_counter() - t0
  # Warm-up: the first run also allocates its buffers. `state` is donated, so it is threaded.
  carry = list(chunk(state, batches))
  first_losses = [float(v) for v in np.asarray(carry[1]["loss"])]

  def call():
    carry[:] = chunk(carry[0], batches)
    return carry

  times = timing.repeat(call, run.repeats, warmup=False)
  images = run.steps * run.batch
  return {"model": model, "input": size, "decoder": run.decoder._asdict(),
          "batch": run.batch, "steps": run.steps, "repeats": run.repeats,
          "devices": jax.device_count(), "platform": jax.devices()[0].platform,
          "images_per_s": images / statistics.median(times), "min": images / max(times),
          "max": images / min(times), "times": times, "compile_s": compile_s,
          "first_losses": first_losses}


def models_rows(models: Sequence[str], sizes: Sequence[int], run: Run,
                log: Callable[[str], object] = print) -> list[dict]:
  """`measure` for every (model, size), in this process."""
  rows = []
  for model in models:
    for size in sizes:
      rows.append(measure(model, int(size), run))
      r = rows[-1]
      log(f"{model} {size}px batch {run.batch}: {r['images_per_s']:.2f} images/s "
          f"(compile {r['compile_s']:.1f} s)")
  return rows


def _header(run: Run, command: str | None) -> list[str]:
  lines = [f"MAE pre-training (mask 0.75), {run.steps} step(s) x batch {run.batch} of random "
           f"uint8 frames already on the device(s) per timed call (one jitted `lax.scan`: "
           f"augment, mask, forward, backward, AdamW), images/s median of {run.repeats} "
           f"calls after compile + warm-up; {os.cpu_count()} CPU cores.", ""]
  if command:
    lines[-1:-1] = ["", f"    {command}"]
  return lines


def models_table(rows: Sequence[dict], run: Run, command: str | None = None) -> str:
  lines = _header(run, command) + [
      "| model | input | decoder | batch | images/s (median) | min-max | compile s |",
      "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
  for r in rows:
    lines.append(f"| {r['model']} | {r['input']} | {Decoder(**r['decoder']).label()} | "
                 f"{r['batch']} | {r['images_per_s']:.2f} | {r['min']:.2f}-{r['max']:.2f} | "
                 f"{r['compile_s']:.1f} |")
  return "\n".join(lines)


def child_command(model: str, size: int, run: Run) -> list[str]:
  """The models-mode command line that measures one cell and prints it as a JSON line."""
  d = run.decoder
  return [sys.executable, "-m", "launch.bench.mae", "--mode=models", f"--models={model}",
          f"--sizes={size}", f"--batch={run.batch}", f"--steps={run.steps}",
          f"--repeats={run.repeats}", f"--decoder_depth={d.depth}",
          f"--decoder_width={d.width}", f"--decoder_heads={d.heads}", "--json"]


def device_env(devices: int) -> dict:
  """This process's environment with JAX on the CPU split into `devices` host devices."""
  kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(_DEVICE_FLAG)]
  return {**os.environ, "XLA_FLAGS": " ".join(kept + [f"{_DEVICE_FLAG}={devices}"]),
          "JAX_PLATFORMS": "cpu"}


def measure_on_devices(devices: int, model: str, size: int, run: Run) -> dict:
  """`measure` in a fresh process whose JAX has `devices` forced host devices."""
  done = subprocess.run(child_command(model, size, run), env=device_env(devices), cwd=_ROOT,
                        capture_output=True, text=True, check=False)
  lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
  if done.returncode or not lines:
    raise RuntimeError(f"bench_mae child on {devices} devices failed (exit "
                       f"{done.returncode}):\n{done.stderr[-3000:]}")
  row = json.loads(lines[-1])
  if row["devices"] != devices:
    raise RuntimeError(f"asked for {devices} host devices, the child ran on {row['devices']} "
                       f"({row['platform']}); is {_DEVICE_FLAG} overridden?")
  return row


def scaling_rows(devices: Sequence[int], model: str, size: int, run: Run,
                 log: Callable[[str], object] = print, concurrent: bool = False) -> list[dict]:
  """One row per device count, each measured in its own process, with `speedup` and
  `loss_rel_diff` against the smallest count.

  Args:
    devices: forced host device counts; each must divide `run.batch`.
    model: the zoo ViT entry.
    size: the input size.
    run: batch, steps, repeats and decoder.
    log: called with a line per device count.
    concurrent: start all processes at once. Their timings then overlap and mean nothing;
      only for checking that the sharded programs run and agree (the test), in less time.

  Returns:
    `measure`'s rows, smallest device count first.
  """
  devices = sorted(int(n) for n in devices)
  bad = [n for n in devices if n < 1 or run.batch % n]
  if bad:
    raise ValueError(f"batch {run.batch} does not split evenly over {bad} devices")

  def one(n: int) -> dict:
    row = measure_on_devices(n, model, size, run)
    log(f"{n} device(s): {row['images_per_s']:.2f} images/s "
        f"(compile {row['compile_s']:.1f} s)")
    return row

  if concurrent:
    with futures.ThreadPoolExecutor(len(devices)) as pool:
      rows = list(pool.map(one, devices))
  else:  # One after another, so that no measurement shares the cores with another.
    rows = [one(n) for n in devices]
  base = rows[0]
  for r in rows:
    r["speedup"] = r["images_per_s"] / base["images_per_s"]
    b, l = base["first_losses"][0], r["first_losses"][0]
    r["loss_rel_diff"] = abs(l - b) / abs(b)
  return rows


def scaling_table(rows: Sequence[dict], run: Run, command: str | None = None) -> str:
  r0 = rows[0]
  lines = _header(run, command)
  lines[0] += (f" {r0['model']} at {r0['input']}px, decoder {run.decoder.label()}; the batch "
               "is split over N forced host devices sharing those cores (a correctness and "
               "overhead check, not an accelerator speed-up).")
  lines += [f"| devices | images/s (median) | min-max | speed-up vs {r0['devices']} | "
            "first-step loss | rel. diff | compile s |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
  for r in rows:
    lines.append(f"| {r['devices']} | {r['images_per_s']:.2f} | {r['min']:.2f}-{r['max']:.2f} "
                 f"| {r['speedup']:.2f}x | {r['first_losses'][0]:.6f} | "
                 f"{r['loss_rel_diff']:.1e} | {r['compile_s']:.1f} |")
  lines += ["", "Max relative difference of the first-step losses across device counts: "
            f"{max(r['loss_rel_diff'] for r in rows):.1e}"]
  return "\n".join(lines)


def define_flags() -> None:
  """The command line's flags; defined only when run as a program, so that importing this
  module (tests) never clashes with another launch module's --out or --models."""
  flags.DEFINE_enum("mode", "models", ["models", "scaling"], "what to measure")
  flags.DEFINE_list("models", ["random_vit_ti", "random_vit_s", "random_vit_b"],
                    "models mode: zoo ViT entries")
  flags.DEFINE_list("sizes", ["224", "128"], "models mode: input sizes (multiples of 16)")
  flags.DEFINE_list("devices", ["1", "2", "4"], "scaling mode: forced host device counts")
  flags.DEFINE_string("model", "random_vit_ti", "scaling mode: the zoo ViT entry")
  flags.DEFINE_integer("size", 128, "scaling mode: the input size")
  flags.DEFINE_integer("batch", None, "images per step (default 16 models, 32 scaling)")
  flags.DEFINE_integer("steps", 3, "training steps per timed call (one lax.scan)")
  flags.DEFINE_integer("repeats", 3, "timed calls per figure (median)")
  flags.DEFINE_integer("decoder_depth", Decoder().depth, "MAE decoder blocks")
  flags.DEFINE_integer("decoder_width", Decoder().width, "MAE decoder width")
  flags.DEFINE_integer("decoder_heads", Decoder().heads, "MAE decoder attention heads")
  flags.DEFINE_bool("quick", False, f"smoke run: {QUICK_MODEL} at {QUICK_SIZE}px, batch "
                    f"{QUICK.batch}, {QUICK.steps} step, {QUICK.repeats} repeat, decoder "
                    f"{QUICK.decoder.label()} (replaces the model, size and run flags)")
  flags.DEFINE_string("out", None, "also write the markdown table here (.md)")
  flags.DEFINE_bool("json", False, "internal (scaling mode's subprocesses): print each row "
                    "as one JSON line instead of the table")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  f = flags.FLAGS
  scaling = f.mode == "scaling"
  if f.quick:
    run = QUICK
    models, sizes, model, size = [QUICK_MODEL], [QUICK_SIZE], QUICK_MODEL, QUICK_SIZE
  else:
    batch = f.batch if f.batch is not None else (32 if scaling else 16)
    run = Run(batch, f.steps, f.repeats, Decoder(f.decoder_depth, f.decoder_width,
                                                 f.decoder_heads))
    models, sizes, model, size = f.models, [int(s) for s in f.sizes], f.model, f.size
  command = "python -m " + " ".join(["launch.bench.mae"] + [shlex.quote(a) for a in sys.argv[1:]])
  if f.json:
    for r in models_rows(models, sizes, run, log=lambda s: None):
      print(json.dumps(r), flush=True)
    return
  if scaling:
    text = scaling_table(scaling_rows(f.devices, model, size, run), run, command)
  else:
    text = models_table(models_rows(models, sizes, run), run, command)
  print(text)
  if f.out:
    from vcbench import files  # pylint: disable=g-import-not-at-top
    files.atomic_write(f.out, lambda fh: fh.write((text + "\n").encode()))


if __name__ == "__main__":
  define_flags()
  cli.run(main)
