"""The zoo demo job: shapes probe over zoo encoders (configs/zoo_demo.py)."""
from __future__ import annotations

import os

from configs import zoo_demo as zoo_demo_config
from launch import jobs
from vcbench import config as config_lib
from vcbench.benchmarks import shapes_probe
from vcbench.models import zoo
from vcbench.reports import store as store_lib


def validate(config) -> None:
  config_lib.require_choice(config, "encoders", zoo.names())
  for key in ("num_train", "num_test", "batch_size"):
    config_lib.require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")
  config_lib.require(config, "num_train", lambda v: v >= 10, "at least 10 images")
  config_lib.require(config, "image_size", lambda v: isinstance(v, int) and v >= 16,
                     "an int >= 16 (pixels)")


@jobs.register("zoo_demo", schema=zoo_demo_config.get_config, validate=validate)
def run(config) -> str:
  store = store_lib.ResultStore(os.path.join(config.workdir, "results.jsonl"))
  chash = store_lib.config_hash(config)
  print(f"zoo demo: {len(config.encoders)} PVRs, {config.num_train} train / "
        f"{config.num_test} test shapes, results in {store.path}")
  for r in shapes_probe.run_probe(config, store, chash):
    status = "already in the store, skipped" if r.skipped else (
        f"accuracy {r.metrics['accuracy']:.3f}, {r.metrics['images_per_s']:.1f} images/s")
    print(f"  {r.pvr}: {status}")
  rows = store.to_rows(benchmark="zoo_demo", config_hash=chash, latest_only=True)
  text = shapes_probe.table(rows)
  print(text)
  return text
