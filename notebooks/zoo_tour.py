# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
# ---

# %% [markdown]
# # A tour of the PVR zoo
#
# Percent-format notebook paired with `zoo_tour.ipynb` by jupytext (`jupytext
# --sync notebooks/*.py` after editing either; run it as a script with
# `python notebooks/zoo_tour.py`). The tests execute it in a Jupyter kernel on a
# small setting (`VCBENCH_NOTEBOOK_SMALL=1`).
#
# It loads the real pretrained ImageNet MobileNetV2 and a random one, shows the
# Encoder contract (cls, tokens, pyramid), and compares them with a linear probe
# on procedurally drawn shapes, reading the numbers back from the result store.

# %%
import os
import tempfile

from vcbench import store as store_lib
from vcbench.benchmarks import shapes_probe
from vcbench.models import zoo

SMALL = os.environ.get("VCBENCH_NOTEBOOK_SMALL") == "1"
print(len(zoo.names()), "zoo entries:", ", ".join(zoo.names()))

# %% [markdown]
# ## The Encoder contract

# %%
encoder = zoo.load("in1k_mobilenetv2")
images, labels = shapes_probe.make_shapes(seed=0, n=4, size=96)
out = encoder(images)
print("cls", out["cls"].shape, "tokens", out["tokens"].shape)
for stride, level in zip((4, 8, 16, 32), out["pyramid"]):
  print(f"pyramid stride {stride}:", level.shape)

# %% [markdown]
# ## Pretrained vs random, through the result store

# %%
from vcbench.jobs import zoo_demo

config = zoo_demo.default_config()   # The job `configs/zoo_demo.py` runs, at a small size.
config.update(dict(encoders=("in1k_mobilenetv2", "random_mobilenetv2"),
                   image_size=64 if SMALL else 96, num_train=60 if SMALL else 400,
                   num_test=30 if SMALL else 200, batch_size=16,
                   workdir=tempfile.mkdtemp(prefix="zoo_tour_")))
zoo_demo.run(config)
store = store_lib.ResultStore(os.path.join(config.workdir, "results.jsonl"))
rows = store.to_rows(benchmark=shapes_probe.BENCHMARK)
print(shapes_probe.table(rows))
accuracy = {r["pvr"]: r["accuracy"] for r in rows}
assert set(accuracy) == set(config.encoders)
