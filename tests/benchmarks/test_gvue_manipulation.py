"""G-VUE's manipulation task end to end on a tiny scale: the affordance decoder's training on
cached PVR features of oracle demos, closed-loop evaluation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.algos import decoder as decoder_lib
from vcbench.algos import runner
from vcbench.benchmarks import gvue_manipulation as gm
from vcbench.data.gvue import features as features_lib
from vcbench.data.gvue import tabletop_demos
from vcbench.models import affordance, text as text_lib, zoo

pytest.importorskip("mujoco")


def test_tiny_train_and_closed_loop_evaluation():
  size, n_rot, crop = 64, 8, 3
  enc = zoo.load("random_vit_ti", img_size=size)
  apply = features_lib.jitted_encoder(enc)
  grid = apply(jnp.zeros((1, size, size, 3), jnp.uint8))["pyramid"][0].shape[1]
  frame = tabletop_demos.Frame.make(size, grid)
  d = tabletop_demos.collect_demos(["put_block_in_bowl", "packing_shapes"], 2, frame, n_rot)
  feats = features_lib.image_features(apply, d["image"], gm.PYRAMID, 8)
  te = text_lib.load("hashed_words")
  text, mask = te.encode(d["instruction"], 12)
  data = gm.training_data(feats, d, text, mask)
  model = affordance.AffordanceDecoder(width=16, transport_dim=4)
  optim = decoder_lib.default_config()
  optim.update(lr=3e-3, epochs=30, batch_size=4)
  variables, logs = gm.fit(optim, model, data, frame, n_rot, crop, seed=0)
  losses = np.asarray(logs["loss"]).reshape(optim.epochs, -1).mean(1)
  assert losses[-1] < 0.7 * losses[0], losses
  policy = gm.make_policy(lambda x: enc.apply(enc.params, x), model, variables, te,
                          frame, n_rot, crop, 12)
  values = gm.evaluate(policy, ["put_block_in_bowl"], 1, frame, n_rot)
  assert set(values) == {"put_block_in_bowl_score@unseen", "put_block_in_bowl_success@unseen",
                         "score@unseen", "success@unseen"}
  assert 0.0 <= values["score@unseen"] <= 100.0
