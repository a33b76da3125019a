"""Sweep throughput: one grid run by one process (`launch.sweep --backend=local`) and by a
local Ray cluster of N workers (`--backend=ray`), with the same warm caches.

  python -m launch.bench.sweep --config configs/cortexbench.py:metaworld_quick \\
      --set='pvrs=("state_oracle","vcbench_vit_ti")' --set='seeds=(0,1)' --workers=2 \\
      --root=/tmp/bench_sweep [--out=bench_sweep.md]

First a warm-up run fills a shared `data_dir` (demos, embeddings), so that both timed runs do
the same work: BC fits and evaluation rollouts. Each timed run is a fresh workdir, and its wall
time is the whole command (process start, Ray's start and workers' imports and compilations
included): what a user waits for. One run of each (the grids take minutes); the cells' scores
are checked to agree between the two.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

from absl import flags

from launch import cli

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sweep(config: str, sets: list[str], workdir: str, data_dir: str, *backend) -> float:
  """Wall seconds of one `launch.sweep` command."""
  cmd = [sys.executable, "-m", "launch.sweep", "--config", config,
         f"--config.workdir={workdir}", f"--config.data_dir={data_dir}",
         *[f"--config.{s}" for s in sets], *[f"--plugin={p}" for p in flags.FLAGS.plugin],
         *backend]
  t0 = time.time()
  done = subprocess.run(cmd, cwd=_ROOT, capture_output=True, text=True, check=False,
                        env={**os.environ, "VCBENCH_NO_PROGRESS": "1"})
  if done.returncode:
    raise RuntimeError(f"{shlex.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
  return time.time() - t0


def _scores(workdir: str) -> dict:
  from vcbench.store import ResultStore  # pylint: disable=import-outside-toplevel
  return {(r["task"], r["pvr"], r["seed"]): r["score"]
          for r in ResultStore(os.path.join(workdir, "results.jsonl")).to_rows()}


def main(argv):
  del argv
  f = flags.FLAGS
  data_dir = os.path.join(f.root, "data")
  print("warm-up (caches)...", flush=True)
  warm = _sweep(f.config, f.set, os.path.join(f.root, "warm"), data_dir, "--backend=local")
  rows = []
  for name, run_dir, backend in (
      ("1 process (local backend)", "local", ("--backend=local",)),
      (f"Ray, {f.workers} workers", "ray", ("--backend=ray", f"--ray_local_cpus={f.workers}"))):
    workdir = os.path.join(f.root, run_dir)
    seconds = _sweep(f.config, f.set, workdir, data_dir, *backend)
    rows.append((name, seconds, _scores(workdir)))
    print(f"{name}: {seconds:.0f} s", flush=True)
  cells = len(rows[0][2])
  same = rows[0][2] == rows[1][2]
  command = "python -m " + " ".join(["launch.bench.sweep"] + [shlex.quote(a) for a in
                                                                sys.argv[1:]])
  lines = [f"{f.config} {' '.join(f.set)}: {cells} cells, caches warm (warm-up {warm:.0f} s); "
           f"{os.cpu_count()} CPU cores; wall time of the whole command, one run each.", "",
           f"    {command}", "", "| runner | wall s | cells/min | speed-up |",
           "| --- | ---: | ---: | ---: |"]
  for name, seconds, _ in rows:
    lines.append(f"| {name} | {seconds:.0f} | {60 * cells / seconds:.2f} | "
                 f"{rows[0][1] / seconds:.2f}x |")
  lines += ["", f"Scores identical in both runs: {same}."]
  text = "\n".join(lines)
  print(text)
  if f.out:
    with open(f.out, "w", encoding="utf-8") as fh:
      fh.write(text + "\n")
  if f.json:
    print(json.dumps({"cells": cells, "seconds": [r[1] for r in rows], "same": same}))


if __name__ == "__main__":
  flags.DEFINE_string("config", "configs/cortexbench.py:metaworld_quick", "the grid's config")
  flags.DEFINE_multi_string("set", [], "config overrides, key=value (without --config.)")
  flags.DEFINE_integer("workers", 2, "Ray workers (the local cluster's CPUs)")
  flags.DEFINE_string("root", "/tmp/bench_sweep", "where the three workdirs and caches go")
  flags.DEFINE_string("out", None, "also write the markdown table here")
  flags.DEFINE_bool("json", False, "also print a JSON summary line")
  flags.DEFINE_multi_string("plugin", [], "passed to launch.sweep")
  cli.run(main)
