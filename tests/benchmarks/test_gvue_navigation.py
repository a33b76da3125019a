"""G-VUE navigation (benchmarks/gvue_navigation.py) on two small apartments: the features of a
split, the shortest-path labels against viewpoints.shortest_path, teacher forcing along the
episodes' paths, a tiny end-to-end training (the loss falls, success on the training episodes
beats the random walk) and `fit_and_score`'s metrics.

The PVR here is a stand-in (block-mean colours, no compile to wait for); the job runs the zoo's
encoders through the same `split_features`."""
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.benchmarks import gvue
from vcbench.benchmarks import gvue_navigation as nav
from vcbench.data.gvue import r2r, vln
from vcbench.data.gvue import vln_features as vf
from vcbench.envs.nav import viewpoints as vp
from vcbench.models import text as text_lib
from vcbench.models import vln_agent


@jax.jit
def block_colours(images):
  """A stand-in PVR: two tokens (top and bottom half) of 4x4 block-mean colours."""
  x = images.astype(jnp.float32) / 255.0
  b, h, w, _ = x.shape
  return {"tokens": x.reshape(b, 4, h // 4, 4, w // 4, 3).mean((2, 4)).reshape(b, 2, 24)}


def config():
  c = nav.default_config("tiny")
  c.episodes.update(train=6, val_seen=2, val_unseen=3)
  c.optim.update(epochs=30, batch_size=6)
  return c


@functools.lru_cache(maxsize=None)
def splits():
  return vf.make_splits(config())


@functools.lru_cache(maxsize=None)
def features():
  c, eps = config(), splits()
  train = vf.split_features(eps["train"], block_colours, c.image_size, c.headings)
  assert eps["val_seen"].scans == eps["train"].scans    # the same apartments: same panoramas
  return {"train": train, "val_seen": train,
          "val_unseen": vf.split_features(eps["val_unseen"], block_colours, c.image_size,
                                           c.headings)}


@functools.lru_cache(maxsize=None)
def world_and_examples():
  eps = splits()["train"]
  views = [features()["train"]["views"][a, :len(g)] for a, g in enumerate(eps.graphs)]
  data = nav.examples(eps, np.arange(len(eps.graphs)), text_lib.load("hashed_words"),
                      config().max_len)
  return eps, nav.make_world(eps.graphs, views), data


def test_pooled_tokens_average_the_tokens_of_each_image_in_fixed_batches():
  images = np.random.default_rng(0).integers(0, 256, (7, 32, 32, 3), dtype=np.uint8)
  pooled = vf.pooled_tokens(block_colours, images, batch_size=4)
  expected = np.asarray(block_colours(jnp.asarray(images))["tokens"]).mean(1)
  assert pooled.dtype == np.float16 and pooled.shape == (7, 24)
  np.testing.assert_allclose(pooled, expected, atol=1e-3)


def test_features_are_one_float16_vector_per_view_of_every_node():
  eps, f = splits()["train"], features()["train"]
  v = max(len(g) for g in eps.graphs)
  assert f["views"].shape == (len(eps.graphs), v, 12, 24) and f["views"].dtype == np.float16
  assert f["num_nodes"].tolist() == [len(g) for g in eps.graphs]
  a = int(np.argmin(f["num_nodes"]))
  assert (f["views"][a, f["num_nodes"][a]:] == 0).all()
  real = f["views"][a, :f["num_nodes"][a]].astype(np.float32)
  assert (np.ptp(real, axis=1).max(-1) > 0).all()     # each node's views differ


def test_r2r_features_are_the_level_row_of_each_viewpoint(tmp_path):
  pose = lambda x, y: [1, 0, 0, x, 0, 1, 0, y, 0, 0, 1, 0, 0, 0, 0, 1]
  nodes = [{"image_id": i, "pose": pose(x, 0), "included": True, "unobstructed": links}
           for i, x, links in (("a", 0, [0, 1, 0]), ("b", 2, [1, 0, 1]), ("c", 4, [0, 1, 0]))]
  (tmp_path / "scan0_connectivity.json").write_text(json.dumps(nodes))
  (tmp_path / "R2R_val_unseen.json").write_text(json.dumps([
      {"scan": "scan0", "path_id": 1, "path": ["a", "b", "c"], "heading": 0.0,
       "instructions": ["go", "walk", "head"]}]))
  eps = r2r.load_split(str(tmp_path), "val_unseen", str(tmp_path))
  views = {("scan0", v): np.arange(36 * 4, dtype=np.float32).reshape(36, 4) + 1000 * k
           for k, v in enumerate("abc")}
  r2r.save_features(str(tmp_path / "feats.npz"), views)
  f = vf.r2r_features(r2r.ViewFeatures(str(tmp_path / "feats.npz")), eps)
  assert f["views"].shape == (1, 3, 12, 4) and f["views"].dtype == np.float16
  np.testing.assert_array_equal(f["views"][0, 1], views[("scan0", "b")][12:24])


def test_labels_are_the_first_step_of_a_shortest_path_or_stop_at_the_goal():
  eps, world, _ = world_and_examples()
  g = eps.graphs[0]
  node, goal = (x.ravel().astype(np.int32) for x in np.meshgrid(np.arange(len(g)),
                                                                np.arange(len(g))))
  label = np.asarray(jax.jit(vln_agent.expert_action)(world, np.zeros_like(node), node, goal))
  k = world.neighbours.shape[-1]
  np.testing.assert_array_equal(label == k, node == goal)
  nbrs = np.asarray(world.neighbours[0])
  for n, t, lab in zip(node, goal, label):
    if n != t:
      nxt = nbrs[n, lab]
      assert g.adj[n, nxt] and g.dist[n, nxt] + g.dist[nxt, t] <= g.dist[n, t] + 1e-4
      assert nxt == vp.shortest_path(g, int(n), int(t))[1]


class UniformPolicy:
  """Stands in for the agent where only the environment matters: equal logits."""

  def apply(self, variables, *args, method, rngs=None):
    if method == "encode":
      return (None, {}), jnp.zeros((args[0].shape[0], 1))
    state, cand_mask = args[0], args[7]
    logits = jnp.where(jnp.concatenate([cand_mask, jnp.ones_like(cand_mask[:, :1])], 1), 0.0,
                       vln_agent.NEG)
    return (logits, {}), state


def test_teacher_forcing_follows_the_ground_truth_path():
  eps, world, data = world_and_examples()
  out = jax.device_get(jax.jit(lambda w, b: vln_agent.rollout(
      UniformPolicy(), {}, w, b, jax.random.key(0), config().max_steps, "teacher"))(world, data))
  k, n = world.neighbours.shape[-1], len(eps)
  for row in range(len(data["start"])):
    path = eps.nodes(row % n)
    walk = [path[0], *out["node"][:, row][out["moved"][:, row]].tolist()]
    assert walk == path
    assert out["action"][len(path) - 1, row] == k             # STOP at the goal,
    assert out["active"][:, row].sum() == len(path)            # then nothing more counts.


@functools.lru_cache(maxsize=None)
def trained():
  return nav.fit_and_evaluate(config(), features(), splits(), text_lib.load("hashed_words"),
                              seed=0, extra_splits={"train": "train"})


def test_training_lowers_the_loss_and_beats_the_random_walk_on_its_episodes():
  results = trained()
  loss = results["train_loss"]
  assert loss[-3:].mean() < 0.5 * loss[:3].mean(), loss
  eps = splits()["train"]
  walk = np.mean([vln.evaluate(eps, vln.random_walk_trajectories(eps, seed=s))["success_rate"]
                  for s in range(10)])
  assert results["train"]["success_rate"] > max(walk + 0.2, 0.5), (results["train"], walk)


def test_fit_and_score_returns_the_scored_metrics_in_percent():
  trained()     # the same recipe and shapes: the training and the rollouts compile once
  values = nav.fit_and_score(config(), features(), splits(), text_lib.load("hashed_words"), 1)
  assert set(values) == {"success@unseen", "spl@unseen", "success@seen", "spl@seen"}
  assert all(0.0 <= v <= 100.0 for v in values.values())
  assert values["spl@unseen"] <= values["success@unseen"]
  assert gvue.scored_metrics("navigation", values) == {"spl@unseen": values["spl@unseen"]}


def test_unknown_budget_is_refused():
  with pytest.raises(ValueError, match="budget"):
    nav.default_config("huge")
