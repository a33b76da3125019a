"""G-VUE's manipulation task end to end on a tiny scale: the image/grid geometry, oracle demos,
the affordance decoder's training on cached PVR features, closed-loop evaluation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.algos import decoder as decoder_lib
from vcbench.algos import runner
from vcbench.benchmarks import gvue_manipulation as gm
from vcbench.data.gvue import features as features_lib
from vcbench.envs.mujoco import tabletop_tasks as T
from vcbench.models import affordance, text as text_lib, zoo

pytest.importorskip("mujoco")


def test_frame_geometry_round_trips():
  frame = gm.Frame.make(224, 56)
  assert frame.workspace.shape == (112, 224) and frame.pad == 56
  assert frame.cell == pytest.approx(4 / 224)
  for xy in [(0.3, -0.4), (0.61, 0.22)]:
    assert np.allclose(frame.to_table(frame.to_grid(xy)), xy)
  valid = frame.valid()
  assert valid[:, 0].sum() == 30 and valid[13:43, :].all() and not valid[:13].any()
  assert frame.image(np.full((112, 224, 3), 7, np.uint8))[56:168].min() == 7


def test_demos_label_the_oracle_pick_on_the_object():
  frame = gm.Frame.make(64, 16)
  d = gm.collect_demos(["put_block_in_bowl"], 1, frame, 36)
  ep = T.Episode("put_block_in_bowl", "seen", 0, frame.workspace, render=False)
  first = ep.goals[0].objects
  picked = frame.to_table(d["pick"][0])
  assert any(np.allclose(ep.sim.pose(o)[0][:2], picked, atol=frame.workspace.pix_size)
             for o in first)
  assert d["image"].shape[1:] == (64, 64, 3) and d["instruction"][0].startswith("put the ")
  assert len(d["image"]) == len(d["pick"]) == len(d["rotation"]) >= 1


def test_tiny_train_and_closed_loop_evaluation():
  size, n_rot, crop = 64, 8, 3
  enc = zoo.load("random_vit_ti", img_size=size)
  apply = features_lib.jitted_encoder(enc)
  grid = apply(jnp.zeros((1, size, size, 3), jnp.uint8))["pyramid"][0].shape[1]
  frame = gm.Frame.make(size, grid)
  d = gm.collect_demos(["put_block_in_bowl", "packing_shapes"], 2, frame, n_rot)
  feats = features_lib.image_features(apply, d["image"], gm.PYRAMID, 8)
  te = text_lib.load("hashed_words")
  text, mask = te.encode(d["instruction"], 12)
  data = {**feats, "text": text, "text_mask": mask, "pick": d["pick"], "place": d["place"],
          "rotation": d["rotation"]}
  model = affordance.AffordanceDecoder(width=16, transport_dim=4)
  optim = decoder_lib.default_config()
  optim.update(lr=3e-3, epochs=30, batch_size=4)
  init = {"pyramid": [data[p][:2] for p in gm.PYRAMID], "text": text[:2], "text_mask": mask[:2]}
  loss = gm.make_loss(n_rot, crop, frame.valid())
  trainer = decoder_lib.make_train(optim, model, init, loss, data)
  state = trainer.init(jax.random.key(0))
  before = float(loss(model, state.variables(), trainer.data, None)[0])
  state, _ = runner.run(trainer, None, trainer.num_updates, key=jax.random.key(0))
  after = float(loss(model, state.variables(), trainer.data, None)[0])
  assert after < 0.7 * before, (before, after)
  policy = gm.make_policy(lambda x: enc.apply(enc.params, x), model, state.variables(), te,
                          frame, n_rot, crop, 12)
  values = gm.evaluate(policy, ["put_block_in_bowl"], 1, frame, n_rot)
  assert set(values) == {"put_block_in_bowl_score@unseen", "put_block_in_bowl_success@unseen",
                         "score@unseen"}
  assert 0.0 <= values["score@unseen"] <= 100.0
