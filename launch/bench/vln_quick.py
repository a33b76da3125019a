"""G-VUE navigation's quick budget for one PVR: the VLN agent trained on generated R2R-style
episodes, then SR/SPL on seen and unseen apartments, beside the random walk.

  MUJOCO_GL=egl python -m launch.bench.vln_quick --pvr=in1k_mobilenetv2 [--budget=quick]
  python -m launch.bench.vln_quick --pvr=blind     # the control: every view feature zero

`--pvr=blind` reuses the view-feature shapes of `random_vit_ti` (computed first if missing),
zeroed, so the agent reads only the instruction and the candidates' directions. Splits and
features are cached under --cache, keyed as the G-VUE job keys them.
"""
from __future__ import annotations

import time

import numpy as np
from absl import flags

from launch import cli
from vcbench.benchmarks import gvue_navigation as nav
from vcbench.data.gvue import features as features_lib
from vcbench.data.gvue import vln, vln_features
from vcbench.models import text as text_lib
from vcbench.models import zoo

_PVR = flags.DEFINE_string("pvr", "in1k_mobilenetv2", "a zoo PVR, or 'blind'")
_BUDGET = flags.DEFINE_enum("budget", "quick", ["tiny", "quick", "full"], "config budget")
_CACHE = flags.DEFINE_string("cache", "runs/vln_quick", "where splits and features are cached")
_SEED = flags.DEFINE_integer("seed", 0, "training seed")


def _features(config, splits, pvr: str) -> dict:
  return vln_features.load_or_compute_features(
      _CACHE.value, config, pvr, splits,
      lambda: features_lib.jitted_encoder(zoo.load(pvr, img_size=config.image_size)))


def main(argv):
  del argv
  config = nav.default_config(_BUDGET.value)
  start = time.perf_counter()
  episodes = vln_features.load_or_make_splits(_CACHE.value, config)
  if _PVR.value == "blind":
    feats = {s: dict(f, views=np.zeros_like(f["views"]))
             for s, f in _features(config, episodes, "random_vit_ti").items()}
  else:
    feats = _features(config, episodes, _PVR.value)
  result = nav.fit_and_evaluate(config, feats, episodes, text_lib.load("hashed_words"),
                                _SEED.value, extra_splits={"train": "train"})
  walks = [vln.evaluate(episodes["val_unseen"],
                        vln.random_walk_trajectories(episodes["val_unseen"], seed=s))
           for s in range(10)]
  print(f"| {_PVR.value} | " + " | ".join(
      f"{100 * result[s]['success_rate']:.1f} / {100 * result[s]['spl']:.1f}"
      for s in ("unseen", "seen", "train")) + f" | {time.perf_counter() - start:.0f} s |")
  print(f"random walk (10 seeds), unseen: SR {100 * np.mean([w['success_rate'] for w in walks]):.1f}"
        f" / SPL {100 * np.mean([w['spl'] for w in walks]):.1f}")


if __name__ == "__main__":
  cli.run(main)
