"""What running as several processes costs: MAE pre-training on N CPU devices as one process,
and as P processes of N/P devices each joined by `jax.distributed` (gloo collectives over
localhost), with the same global batch.

  python -m launch.bench.processes --devices=2 --processes=1,2 --model=random_vit_ti \\
      --size=64 --batch=32 --steps=3 --repeats=5 [--out=bench_processes.md]

Each configuration runs `launch.bench.mae`'s measurement (one jitted `lax.scan` of --steps MAE
steps on frames already on the devices; images/s the median of --repeats calls after compile
and warm-up) in fresh processes, one configuration after the other; the P processes of one
configuration run at once, each feeding its share of every batch. The report gives images/s,
the ratio to one process, and the first step's loss, which must agree (the same program). On
one machine the processes share its cores, so the ratio is the price of the multi-process path
(collectives through gloo's TCP instead of in-process, per-process runtime threads), not a
multi-host speed-up.
"""
from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys

from absl import flags

from launch import cli
from launch.bench import mae as mae_bench

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def measure(devices: int, processes: int, model: str, size: int, run: mae_bench.Run) -> dict:
  """`mae_bench.measure` on `devices` CPU devices split over `processes` processes; process
  0's row."""
  if devices % processes or run.batch % devices:
    raise ValueError(f"{devices} devices over {processes} processes, batch {run.batch}: each "
                     "must divide the next")
  coordinator = f"localhost:{_free_port()}" if processes > 1 else ""
  procs = [subprocess.Popen(
      [sys.executable, "-m", "launch.bench.processes", "--child", f"--model={model}",
       f"--size={size}", f"--batch={run.batch}", f"--steps={run.steps}",
       f"--repeats={run.repeats}", f"--coordinator={coordinator}",
       f"--num_processes={processes}", f"--process_id={rank}",
       f"--cpu_devices={devices // processes}"],
      cwd=_ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for rank in range(processes)]
  outs = [p.communicate() for p in procs]
  for p, (_, err) in zip(procs, outs):
    if p.returncode:
      raise RuntimeError(f"child failed (exit {p.returncode}):\n{err[-3000:]}")
  row = json.loads([l for l in outs[0][0].splitlines() if l.startswith("{")][-1])
  return {**row, "processes": processes}


def table(rows: list[dict], run: mae_bench.Run, command: str) -> str:
  r0 = rows[0]
  lines = [f"MAE pre-training, {r0['model']} at {r0['input']}px, {run.steps} steps x global "
           f"batch {run.batch} per timed call, images/s median of {run.repeats} calls; "
           f"{r0['devices']} CPU devices in all, on {os.cpu_count()} cores.", "",
           f"    {command}", "",
           "| processes | devices each | images/s (median) | min-max | vs 1 process | "
           "first-step loss |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
  for r in rows:
    lines.append(f"| {r['processes']} | {r['devices'] // r['processes']} | "
                 f"{r['images_per_s']:.2f} | {r['min']:.2f}-{r['max']:.2f} | "
                 f"{r['images_per_s'] / r0['images_per_s']:.2f}x | {r['first_losses'][0]:.6f} |")
  return "\n".join(lines)


def main(argv):
  del argv
  f = flags.FLAGS
  run = mae_bench.Run(f.batch, f.steps, f.repeats, mae_bench.Decoder(
      f.decoder_depth, f.decoder_width, f.decoder_heads))
  if f.child:
    from vcbench import distributed  # pylint: disable=g-import-not-at-top
    distributed.initialize(f.coordinator, f.num_processes if f.coordinator else None,
                           f.process_id if f.coordinator else None, f.cpu_devices)
    print(json.dumps(mae_bench.measure(f.model, f.size, run)), flush=True)
    return
  rows = []
  for p in sorted(int(p) for p in f.processes):
    rows.append(measure(f.devices, p, f.model, f.size, run))
    print(f"{p} process(es): {rows[-1]['images_per_s']:.2f} images/s", flush=True)
  command = "python -m " + " ".join(["launch.bench.processes"] +
                                    [shlex.quote(a) for a in sys.argv[1:]])
  text = table(rows, run, command)
  print(text)
  if f.out:
    from vcbench import files  # pylint: disable=g-import-not-at-top
    files.atomic_write(f.out, lambda fh: fh.write((text + "\n").encode()))


if __name__ == "__main__":
  flags.DEFINE_integer("devices", 2, "CPU devices in all")
  flags.DEFINE_list("processes", ["1", "2"], "process counts to compare")
  flags.DEFINE_string("model", "random_vit_ti", "the zoo ViT entry")
  flags.DEFINE_integer("size", 64, "input size")
  flags.DEFINE_integer("batch", 32, "global batch")
  flags.DEFINE_integer("steps", 3, "steps per timed call")
  flags.DEFINE_integer("repeats", 5, "timed calls (median)")
  flags.DEFINE_integer("decoder_depth", 2, "MAE decoder blocks")
  flags.DEFINE_integer("decoder_width", 128, "MAE decoder width")
  flags.DEFINE_integer("decoder_heads", 4, "MAE decoder heads")
  flags.DEFINE_bool("child", False, "internal: one process of a measurement")
  flags.DEFINE_string("coordinator", "", "internal")
  flags.DEFINE_integer("num_processes", 1, "internal")
  flags.DEFINE_integer("process_id", 0, "internal")
  flags.DEFINE_integer("cpu_devices", 1, "internal")
  flags.DEFINE_string("out", None, "also write the markdown table here")
  cli.run(main)
