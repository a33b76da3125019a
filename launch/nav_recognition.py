"""How learnable is recognising ObjectNav's goal in vcbench-nav frames, from which labels?

  python -m launch.nav_recognition [--size 64] [--walks 512] [--steps 3000]
      [--encoder cnn|<zoo PVR, frozen>] [--labels goal,all] [--seed 0]

Collects random-walk frames in ObjectNav's train apartments (100) and in the 15 unseen val
apartments, trains `vcbench.benchmarks.nav_recognition.Recogniser` on the first with each way
of labelling, and prints held-out goal-in-view accuracy (and that of always answering 'not in
view'), recall (all goals in view / those of >= 200 pixels) and false positives, every
--every steps. The README's ObjectNav section quotes it.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
import jax
import numpy as np
from launch import cli

from vcbench.benchmarks import nav_recognition as nr
from vcbench.models import zoo

_SIZE = flags.DEFINE_integer("size", 64, "frame height and width")
_WALKS = flags.DEFINE_integer("walks", 512, "train walks (160 steps, every 4th frame kept)")
_STEPS = flags.DEFINE_integer("steps", 3000, "Adam steps of 128 frames")
_EVERY = flags.DEFINE_integer("every", 1000, "score the held-out frames every this many steps")
_ENCODER = flags.DEFINE_string("encoder", "cnn", "'cnn' (trained SimpleCNN) or a zoo PVR "
                               "(frozen; its flattened tokens through a trained linear layer)")
_LABELS = flags.DEFINE_list("labels", list(nr.LABELS), "ways of labelling to compare")
_SEED = flags.DEFINE_integer("seed", 0, "walks and training seed")


def _tokens(frames):
  if _ENCODER.value == "cnn":
    return None
  encoder = zoo.load(_ENCODER.value, img_size=_SIZE.value)
  apply = jax.jit(lambda im: encoder.apply(encoder.params, im)["tokens"])
  return np.concatenate([np.asarray(apply(frames["rgb"][i:i + 256]))
                         for i in range(0, len(frames["rgb"]), 256)])


def main(argv):
  del argv
  train = nr.random_walk_frames("train", size=_SIZE.value, walks=_WALKS.value, seed=_SEED.value)
  held = nr.random_walk_frames("val", size=_SIZE.value, walks=max(64, _WALKS.value // 4),
                               scenes=15, seed=_SEED.value)
  tok_train, tok_held = _tokens(train), _tokens(held)
  print(f"{len(train['category'])} train frames, {len(held['category'])} held-out frames "
        f"(unseen apartments), {_SIZE.value}^2, encoder {_ENCODER.value}", flush=True)
  print("| labels | steps | train loss | accuracy | always 'no' | recall | recall >= "
        f"{nr.LARGE} px | false positives |\n|---|---:|---:|---:|---:|---:|---:|---:|")
  for labels in _LABELS.value:
    def report(step, model, params, losses, labels=labels):
      s = nr.scores(model, params, held, tok_held)
      print(f"| {labels} | {step} | {losses[-100:].mean():.3f} | {s['accuracy']:.3f} | "
            f"{s['base_rate']:.3f} | {s['recall']:.3f} | {s['recall_large']:.3f} | "
            f"{s['false_positive']:.3f} |", flush=True)
    nr.fit(train, labels, steps=_STEPS.value, seed=_SEED.value, tokens=tok_train,
           every=_EVERY.value, on_every=report)


if __name__ == "__main__":
  cli.run(main)
