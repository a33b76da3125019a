"""The leaderboard job: the given PVRs through CortexBench, G-VUE, RobustNav and The Colosseum
into one result store, then one leaderboard (markdown and a static web page).

Each benchmark runs as its own job (its config is a section of this one: `config.cortexbench`,
`config.gvue`, `config.robustnav`, `config.colosseum`, each a variant of its config file) in
`<workdir>/<benchmark>/`, which keeps its caches and its full report; `pvrs` and `checkpoints`
come from this config. RobustNav trains one PointNav agent per PVR (the PVR as its frozen
encoder) and runs once per PVR. After each run its new records are appended to
`<workdir>/results.jsonl`, the one store, and the leaderboard is rewritten, so a long run shows
its progress. A re-run resumes: each benchmark's own store is seeded from the one store (a
deleted benchmark directory costs its caches, not its results) and skips what is stored.

Outputs under <workdir>/leaderboard/: index.html (open it from disk; `python -m launch.serve`
serves it), leaderboard.md, leaderboard.csv / .parquet, records/<pvr>/<benchmark>.jsonl (each
cell's records) and configs/<benchmark>[-<pvr>].json (the exact config of each run).
<workdir>/timings.json holds each run's wall time.
"""
from __future__ import annotations

import datetime
import json
import os
import pathlib
import time
from typing import Any

import ml_collections

from vcbench import config as config_lib
from vcbench import files
from vcbench import jobs
from vcbench import provenance
from vcbench import registry
from vcbench.benchmarks import colosseum as col
from vcbench.benchmarks import gvue
from vcbench.benchmarks import robustnav as rn
from vcbench.models import zoo
from vcbench.reports import leaderboard as board
from vcbench.reports import leaderboard_page
from vcbench.reports import plots
from vcbench.reports import robustnav as robustnav_report
from vcbench.store import ResultStore

BENCHMARKS = board.BENCHMARKS
GRIDS = ("pvrs", "benchmarks")
# Leaderboard variant -> the variant of each benchmark's config file it runs.
SECTIONS = {
    "full": {"cortexbench": "full", "gvue": "full", "robustnav": "pvr", "colosseum": "full"},
    "quick": {"cortexbench": "quick", "gvue": "quick", "robustnav": "pvr_quick",
              "colosseum": "quick"},
    "tiny": {"cortexbench": "tiny", "gvue": "tiny", "robustnav": "pvr_tiny", "colosseum": "tiny"},
}
# The store's benchmark names each run writes.
RECORDS = {"cortexbench": ("cortexbench",), "gvue": ("gvue",), "robustnav": (rn.BENCHMARK,),
           "colosseum": (col.BENCHMARK, col.EXPERT_BENCHMARK)}
# Each benchmark's full report, relative to <workdir>.
REPORTS = {"cortexbench": "cortexbench/report/cortexbench.html", "gvue": "gvue/gvue.md",
           "robustnav": "robustnav/report/table2.md", "colosseum": "colosseum/report/tables.md"}
PAGE_DIR = "leaderboard"


def sections(variant: str) -> dict[str, ml_collections.ConfigDict]:
  return {b: config_lib.load_file(f"configs/{b}.py:{v}") for b, v in SECTIONS[variant].items()}


def default_config(variant: str = "full") -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.job = "leaderboard"
  c.variant = variant
  c.workdir = "runs/leaderboard"
  c.pvrs = ("in1k_mobilenetv2", "vcbench_vit_ti", "random_vit_ti")
  c.checkpoints = ""     # "pvr=path[,pvr=path]": checkpoints other than the zoo's own.
  c.plugins = ()         # modules or .py files imported first: they may register PVRs
                         # (`zoo.register`), which `pvrs` can then name.
  c.benchmarks = BENCHMARKS
  for name, section in sections(variant).items():
    c[name] = section
  return c


def checkpoints(config) -> dict[str, str]:
  return config_lib.parse_mapping(config, "checkpoints", config.pvrs)


def runs(config, benchmark: str) -> list[ml_collections.ConfigDict]:
  """The job configs `benchmark` runs: its section with this config's workdir, PVRs and
  checkpoints (RobustNav: one per PVR)."""
  base = config[benchmark].copy_and_resolve_references()
  base.workdir = os.path.join(config.workdir, benchmark)
  if benchmark != "robustnav":
    base.pvrs, base.checkpoints = tuple(config.pvrs), config.checkpoints
    return [base]
  out = []
  ckpts = checkpoints(config)
  for pvr in config.pvrs:
    run = base.copy_and_resolve_references()
    run.pvr, run.pvr_checkpoint = pvr, ckpts.get(pvr, "")
    run.nav_workdir = os.path.join(base.workdir, "nav")
    out.append(run)
  return out


def run_name(benchmark: str, sub, sep: str = "/") -> str:
  """A run of `runs(config, benchmark)` by name: the benchmark, and RobustNav's PVR."""
  return benchmark if benchmark != "robustnav" else f"{benchmark}{sep}{sub.pvr}"


def validate(config) -> None:
  config_lib.require_choice(config, "variant", tuple(SECTIONS))
  config_lib.require_choice(config, "benchmarks", BENCHMARKS)
  try:
    registry.load_plugins(config.plugins)
  except registry.PluginError as e:
    raise config_lib.ConfigError(f"config.plugins: {e}") from None
  config_lib.require_choice(config, "pvrs", zoo.names())
  ckpts = checkpoints(config)
  for pvr in config.pvrs:
    # Loaded and run once on a black image: an outside module that breaks the Encoder
    # contract, or a checkpoint that does not fit it, fails here rather than hours in.
    zoo.check_contract(zoo.load(pvr, ckpts.get(pvr)), pvr)
  for name in config.benchmarks:
    for run in runs(config, name):
      try:
        jobs.get(run.job).check(run)
      except config_lib.ConfigError as e:
        raise config_lib.ConfigError(f"config.{name} ({run.job} job): {e}") from None


def run(config) -> dict[str, Any]:
  registry.load_plugins(config.plugins)
  root = pathlib.Path(config.workdir)
  store = ResultStore(root / "results.jsonl")
  timings = _read_json(root / "timings.json")
  for name in config.benchmarks:
    for sub in runs(config, name):
      label = run_name(name, sub)
      own = ResultStore(pathlib.Path(sub.workdir) / "results.jsonl")
      own.append_new(r for r in store.records() if r["cell"]["benchmark"] in RECORDS[name])
      start = time.time()
      print(f"leaderboard: {label} (workdir {sub.workdir})", flush=True)
      jobs.get(sub.job).run(sub)
      new = store.append_new(own.records())
      if new or label not in timings:   # A re-run that computed nothing keeps the real time.
        timings[label] = {"seconds": round(time.time() - start, 1), "new_records": new}
      files.atomic_write(root / "timings.json",
                         lambda f: f.write(json.dumps(timings, indent=1).encode()))
    if name == "robustnav":
      robustnav_report.write_report(own.to_rows(latest_only=True),
                                    root / "robustnav" / "report")
    out = write(config, store)
    print(f"leaderboard: {label} done; {out}", flush=True)
  return {"records": float(len(store))}


def _read_json(path: pathlib.Path) -> dict:
  return json.loads(path.read_text()) if path.exists() else {}


def _provenance(config, records: list[dict]) -> dict[str, dict[str, Any]]:
  """Per PVR: the code versions and config hashes behind its records, and its weights file."""
  out = {}
  ckpts = checkpoints(config)
  for pvr in config.pvrs:
    mine = [r for r in records if r["cell"]["pvr"] == pvr]
    path = zoo.checkpoint_file(pvr, ckpts.get(pvr))
    out[pvr] = {
        "code_version": ", ".join(sorted({r.get("code_version", "?") for r in mine})) or None,
        "config_hash": {b: ", ".join(sorted({r["config_hash"][:12] for r in mine
                                              if r["cell"]["benchmark"] in RECORDS[b]}))
                        for b in config.benchmarks},
        "checkpoint": path,
        "checkpoint_sha256": files.sha256_file(path) if path and os.path.exists(path) else None}
  return out


def _write_lines(path: pathlib.Path, records: list[dict]) -> None:
  text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
  files.atomic_write(path, lambda f: f.write(text.encode()))


def _write_links(config, out: pathlib.Path, records: list[dict]) -> dict:
  """records/<pvr>/<benchmark>.jsonl and configs/<run>.json; returns the page's links."""
  links: dict[str, dict[str, dict[str, str]]] = {p: {} for p in config.pvrs}
  for name in config.benchmarks:
    for sub in runs(config, name):
      stem = run_name(name, sub, sep="-")
      text = json.dumps(sub.to_dict(), indent=1, sort_keys=True, default=str)
      files.atomic_write(out / "configs" / f"{stem}.json", lambda f, t=text: f.write(t.encode()))
      for pvr in ([sub.pvr] if name == "robustnav" else config.pvrs):
        links[pvr][name] = {"records": f"records/{pvr}/{name}.jsonl",
                            "config": f"configs/{stem}.json"}
    for pvr in config.pvrs:
      _write_lines(out / "records" / pvr / f"{name}.jsonl",
                   [r for r in records if r["cell"]["pvr"] == pvr
                    and r["cell"]["benchmark"] in RECORDS[name]])
  return links


def _notes(config) -> list[str]:
  seeds = {b: tuple(config[b].seeds) if "seeds" in config[b] else (config[b].seed,)
           for b in config.benchmarks}
  one_seed = [board.NAMES[b] for b, s in seeds.items() if len(s) < 2]
  notes = [f"The {config.variant!r} variant: each benchmark's {config.variant} protocol "
           "(configs/leaderboard.py says what it reduces).",
           "Overall rank: mean over benchmarks of the rank by CortexBench mean success, G-VUE "
           "summary, RobustNav corrupted SPL and Colosseum perturbed success (robustness "
           "benchmarks rank by performance under perturbation: a blind policy loses nothing "
           "to a corruption)."]
  if "gvue" in config.benchmarks and len(config.gvue.tasks) < len(gvue.TASKS.names()):
    notes.append(f"G-VUE ran {len(config.gvue.tasks)} of its {len(gvue.TASKS.names())} tasks "
                 f"({', '.join(config.gvue.tasks)}): its summary and category scores cover "
                 "those only and are not comparable with full runs.")
  if one_seed:
    notes.append(f"One seed in {', '.join(one_seed)}: no ± over seeds there (RobustNav's "
                 "clean SPL ± is the 95% interval over its episodes); orderings within noise "
                 "are not significant.")
  return notes


def write(config, store: ResultStore) -> pathlib.Path:
  """The leaderboard of what the store holds for `config.pvrs`: the page and leaderboard.md."""
  out = pathlib.Path(config.workdir) / PAGE_DIR
  records = store.records()
  rows = store.to_rows(latest_only=True)
  table = board.table(
      rows, config.pvrs, benchmarks=[b for b in BENCHMARKS if b in config.benchmarks],
      variant=config.variant,
      generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
      code_version=provenance.code_version(),
      reports={b: (f"../{REPORTS[b]}" if (out.parent / REPORTS[b]).exists() else None)
               for b in config.benchmarks},
      links=_write_links(config, out, records), provenance=_provenance(config, records),
      notes=_notes(config))
  plots.write_text(out / "leaderboard.md", board.markdown(table))
  return leaderboard_page.write_page(table, out)
