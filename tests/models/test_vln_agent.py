"""The navigation agent (models/vln_agent.py): shapes, masking of padded candidates and tokens,
and its rollout (benchmarks/gvue_navigation.py) against a step-by-step Python loop over the
graphs themselves, on a small hand-made world."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.benchmarks import gvue_navigation as nav
from vcbench.envs.nav import viewpoints as vp
from vcbench.models import vln_agent

B, T, H, C, K, WIDTH, HEADS = 3, 10, 12, 16, 5, 32, 2


def inputs(seed=0):
  rng = np.random.default_rng(seed)
  lengths = np.array([T, 4, 7])
  cands = np.array([K, 2, 0])          # the third node has no neighbour: only STOP is valid.
  return dict(
      text=rng.normal(size=(B, T, 24)).astype(np.float32) * (np.arange(T) < lengths[:, None])[
          ..., None],
      text_mask=np.arange(T)[None] < lengths[:, None],
      views=rng.normal(size=(B, H, C)).astype(np.float16),
      view_angle=rng.uniform(-math.pi, math.pi, (B, H)).astype(np.float32),
      cand_view=rng.integers(0, H, (B, K)).astype(np.int32),
      cand_angle=rng.uniform(-math.pi, math.pi, (B, K)).astype(np.float32),
      cand_mask=np.arange(K)[None] < cands[:, None])


@pytest.fixture(scope="module")
def agent():
  model = vln_agent.VLNAgent(WIDTH, HEADS, text_layers=1)
  params = jax.jit(model.init)(jax.random.key(0), **inputs())
  return model, params, jax.jit(model.apply)


def test_shapes(agent):
  model, params, apply = agent
  (logits, inter), state = apply(params, **inputs())
  assert logits.shape == (B, K + 1) and state.shape == (B, WIDTH)
  assert inter["text_attention"].shape == (B, HEADS, T)
  assert inter["view_attention"].shape == (B, HEADS, H)
  assert np.isfinite(np.asarray(logits)).all()


def test_padded_candidates_are_never_chosen_and_do_not_matter(agent):
  model, params, apply = agent
  x = inputs()
  (logits, _), state = apply(params, **x)
  probs = np.asarray(jax.nn.softmax(logits))
  valid = np.concatenate([x["cand_mask"], np.ones((B, 1), bool)], 1)
  assert (probs[~valid] == 0).all() and (probs[2, -1] == 1.0)
  draws = jax.random.categorical(jax.random.key(1), logits, shape=(2000, B))
  assert valid[np.arange(B)[None], np.asarray(draws)].all()
  # Whatever sits in a padded slot, the real logits and the state are the same.
  y = dict(x, cand_view=np.where(x["cand_mask"], x["cand_view"], 11),
           cand_angle=np.where(x["cand_mask"], x["cand_angle"], 2.5).astype(np.float32))
  (logits2, _), state2 = apply(params, **y)
  np.testing.assert_array_equal(np.asarray(logits2)[valid], np.asarray(logits)[valid])
  np.testing.assert_array_equal(state2, state)


def test_padded_tokens_are_ignored(agent):
  model, params, apply = agent
  x = inputs()
  noise = np.random.default_rng(5).normal(size=x["text"].shape).astype(np.float32) * 10
  y = dict(x, text=np.where(x["text_mask"][..., None], x["text"], noise))
  (a, ia), sa = apply(params, **x)
  (b, ib), sb = apply(params, **y)
  np.testing.assert_allclose(b, a, atol=1e-6)
  np.testing.assert_allclose(sb, sa, atol=1e-6)
  assert (np.asarray(ib["text_attention"])[~np.repeat(x["text_mask"][:, None], HEADS, 1)] == 0
          ).all()


def test_changing_a_real_token_or_view_changes_the_decision(agent):
  model, params, apply = agent
  x = inputs()
  (a, _), _ = apply(params, **x)
  (b, _), _ = apply(params, **dict(x, text=x["text"] * np.float32(-1)))
  (c, _), _ = apply(params, **dict(x, views=x["views"][:, ::-1]))
  assert not np.allclose(a[:2], b[:2]) and not np.allclose(a[:2], c[:2])


# ---------------------------------------------------------------------------------------------
# The rollout (a lax.scan) against a Python loop over the graphs.

def line_graph(pos, edges) -> vp.Graph:
  pos = np.asarray(pos, np.float32)
  adj = np.zeros((len(pos),) * 2, bool)
  for a, b in edges:
    adj[a, b] = adj[b, a] = True
  length = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
  return vp.Graph(pos=pos, room=np.zeros(len(pos), np.int32), adj=adj,
                  dist=vp.shortest_distances(adj, length), ids=tuple(map(str, range(len(pos)))))


GRAPHS = (line_graph([(0, 0), (2, 0), (2, 2), (4, 2), (0, 2)], [(0, 1), (1, 2), (2, 3), (0, 4),
                                                                   (4, 2), (1, 3)]),
          line_graph([(0, 0), (0, 2), (2, 2)], [(0, 1), (1, 2)]))


def test_rollout_equals_a_python_loop(agent):
  model, params, apply = agent
  rng = np.random.default_rng(3)
  views = [rng.normal(size=(len(g), H, C)).astype(np.float16) for g in GRAPHS]
  world = nav.make_world(GRAPHS, views)
  n, steps = 6, 6
  apt = np.array([0, 0, 0, 1, 1, 0], np.int32)
  start = np.array([0, 3, 4, 0, 2, 1], np.int32)
  goal = np.array([3, 0, 4, 2, 0, 2], np.int32)
  x = inputs(1)
  batch = {"apartment": apt, "start": start, "goal": goal,
           "heading": rng.uniform(-3, 3, n).astype(np.float32),
           "text": np.concatenate([x["text"]] * 2),
           "text_mask": np.concatenate([x["text_mask"]] * 2)}
  out = jax.jit(lambda p, w, b: vln_agent.rollout(model, p, w, b, jax.random.key(7), steps,
                                                  "sample"))(params, world, batch)
  out = jax.device_get(out)
  (memory, _), state = jax.jit(lambda p, t, m: model.apply(p, t, m, method="encode"))(
      params, batch["text"], batch["text_mask"])
  step = jax.jit(lambda p, *a: model.apply(p, *a, method="step"))
  k_pad = world.neighbours.shape[-1]
  node, heading, done = start.copy(), batch["heading"].copy(), np.zeros(n, bool)
  for t in range(steps):
    cand_view = np.zeros((n, k_pad), np.int32)
    cand_angle = np.zeros((n, k_pad), np.float32)
    cand_mask = np.zeros((n, k_pad), bool)
    nbrs = []
    for i in range(n):
      ids, view = vp.candidate_views(GRAPHS[apt[i]], int(node[i]), H)
      nbrs.append(ids)
      cand_view[i, :len(ids)], cand_mask[i, :len(ids)] = view, True
      cand_angle[i, :len(ids)] = [GRAPHS[apt[i]].heading(int(node[i]), int(b)) - heading[i]
                                  for b in ids]
    obs = (np.stack([views[a][v] for a, v in zip(apt, node)]),
           (np.arange(H) * 2 * math.pi / H)[None] - heading[:, None], cand_view, cand_angle,
           cand_mask)
    (logits, _), state = step(params, state, memory, batch["text_mask"], *obs)
    valid = np.concatenate([cand_mask, np.ones((n, 1), bool)], 1)
    np.testing.assert_allclose(np.asarray(logits)[valid], out["logits"][t][valid], atol=2e-5)
    np.testing.assert_array_equal(out["active"][t], ~done)
    for i in range(n):
      g, a = GRAPHS[apt[i]], int(out["action"][t][i])
      if not done[i]:
        if node[i] == goal[i]:
          assert out["label"][t][i] == k_pad
        else:
          nxt = int(nbrs[i][out["label"][t][i]])
          assert nxt == vp.shortest_path(g, int(node[i]), int(goal[i]))[1]
      if done[i] or a == k_pad:
        done[i] = True
        continue
      heading[i] = g.heading(int(node[i]), int(nbrs[i][a]))
      node[i] = nbrs[i][a]
    np.testing.assert_array_equal(out["node"][t], node)
  assert out["moved"].any() and out["active"].sum() > n
