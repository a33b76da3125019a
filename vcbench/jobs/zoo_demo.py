"""The zoo demo job: linear probes of frozen PVRs on procedurally drawn shapes (configs/zoo_demo.py)."""
from __future__ import annotations

import ml_collections

from vcbench import config as config_lib
from vcbench.benchmarks import shapes_probe
from vcbench.jobs import grid as grid_lib
from vcbench.models import zoo
from vcbench.store import Cell


GRIDS = ("encoders",)


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.job = "zoo_demo"
  c.workdir = "runs/zoo_demo"
  c.encoders = ("in1k_mobilenetv2", "random_mobilenetv2", "random_vit_s")
  c.num_train = 600
  c.num_test = 300
  c.image_size = 96       # Drawn size; each encoder's preprocessing resizes to its input.
  c.batch_size = 32
  c.seed = 0
  return c


def validate(config) -> None:
  config_lib.require_choice(config, "encoders", zoo.names())
  config_lib.require_ints(config, ("num_train", "num_test", "batch_size"))
  config_lib.require(config, "num_train", lambda v: v >= 10, "at least 10 images")
  config_lib.require(config, "image_size", lambda v: isinstance(v, int) and v >= 16,
                     "an int >= 16 (pixels)")


def run(config) -> str:
  grid = grid_lib.Grid("zoo demo", config.workdir, grid_lib.config_hash(config))
  print(f"zoo demo: {len(config.encoders)} PVRs, {config.num_train} train / "
        f"{config.num_test} test shapes, results in {grid.store.path}")
  units = [grid_lib.Unit((name,), (Cell(benchmark=shapes_probe.BENCHMARK, task="shapes",
                                        pvr=name, seed=config.seed),))
           for name in config.encoders]
  todo = grid.todo(units)
  if todo:
    train = shapes_probe.make_shapes(config.seed, config.num_train, config.image_size)
    test = shapes_probe.make_shapes(config.seed + 1, config.num_test, config.image_size)
  for unit in grid.pending(todo):
    (name,) = unit.key
    metrics = shapes_probe.probe(zoo.load(name), train, test, config.batch_size)
    grid.record(unit.cells[0], metrics)
    print(f"  {name}: accuracy {metrics['accuracy']:.3f}, {metrics['images_per_s']:.1f} "
          "images/s")
  text = shapes_probe.table(grid.rows(benchmark=shapes_probe.BENCHMARK))
  print(text)
  return text
