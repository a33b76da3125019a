"""G-VUE's navigation decoder: a small recurrent cross-modal policy for vision-language navigation.

The agent stands on a node of a viewpoint graph, reads an instruction, sees the node's panorama
as one frozen PVR feature per view (12 level views, view k facing heading 2 pi k / 12) and picks
a neighbour to move to, or STOP. `VLNAgent` is Recurrent-VLN-BERT's design shrunk to train on a
CPU from scratch in minutes:

  encode   the instruction's frozen token features (the text encoder's, padding masked) ->
           Linear + LayerNorm -> `text_layers` pre-norm self-attention blocks = the language
           memory [B, T, D]; the first state is a learned query attending over that memory
           (VLN-BERT's state is the [CLS] token of its language pass).
  step     (a) the state attends over the memory (masked): which part of the instruction now;
           (b) a query from the state and that language context attends over the 12 view
               tokens, each Linear(LayerNorm(feature)) + Linear(sin, cos of the view's heading
               relative to the agent);
           (c) a GRU cell reads both contexts and updates the state;
           (d) candidates: per neighbour the token of the view facing it, with the sin/cos of
               the neighbour's own relative direction, plus a learned STOP token; the logits are
               scaled dot products of a query from (new state, both contexts) with their keys,
               padded candidates set to NEG (probability exactly 0). STOP is the last logit.

Where this differs from Recurrent-VLN-BERT: no pretrained multi-layer BERT; one cross-attention
per modality per step instead of VLN-BERT's joint self-attention over state, words and
candidates (so the language memory is not refined by the state), a GRU instead of its
state-token projection (concat of the state with the product of the attended language and
vision), panorama attention as in EnvDrop's agent (VLN-BERT sees candidates only), and a single
sin/cos pair per angle where R2R repeats them to 128 channels. Feature dropout on the raw view
features stands in for EnvDrop's environment dropout.

Every method returns `(output, intermediates)` with the new state next to it where there is
one; shapes are padded and fixed (K candidate slots, T tokens), so a rollout is a `lax.scan`.

Rollouts (`rollout`) run on `World`, a set of viewpoint graphs as padded arrays: observing a
node, the shortest-path label (`expert_action`) and moving are gathers, so teacher forcing,
student forcing (sampled or argmax actions) and greedy evaluation are one jitted scan each.
"""
from __future__ import annotations

import math

from typing import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

NEG = -1e9      # logit of a masked slot: exp(NEG - max) is exactly 0 in float32.


def angle_features(angle: jax.Array) -> jax.Array:
  """[...] radians -> [..., 2] (sin, cos): continuous across the +-pi wrap."""
  return jnp.stack([jnp.sin(angle), jnp.cos(angle)], -1)


class Attention(nn.Module):
  """Multi-head attention of one query vector per example over a masked memory, whose keys and
  values (`project`) can be computed once and attended at every step.

  query [B, Dq], memory [B, N, Dm], mask bool [B, N] -> (context [B, width], weights
  [B, heads, N])."""
  width: int
  heads: int

  def setup(self):
    shape = (self.heads, self.width // self.heads)
    self.query = nn.DenseGeneral(shape)
    self.key = nn.DenseGeneral(shape)
    self.value = nn.DenseGeneral(shape)
    self.out = nn.Dense(self.width)

  def project(self, memory):
    """memory [B, N, Dm] -> (keys, values) [B, N, heads, width / heads]."""
    return self.key(memory), self.value(memory)

  def attend(self, query, keys_values, mask):
    k, v = keys_values
    scores = jnp.einsum("bhd,bnhd->bhn", self.query(query), k) / math.sqrt(k.shape[-1])
    weights = jax.nn.softmax(jnp.where(mask[:, None, :], scores, NEG), axis=-1)
    context = jnp.einsum("bhn,bnhd->bhd", weights, v).reshape(query.shape[0], -1)
    return self.out(context), weights

  def __call__(self, query, memory, mask):
    return self.attend(query, self.project(memory), mask)


class TextBlock(nn.Module):
  """A pre-norm transformer block over the instruction (keys masked to real tokens)."""
  width: int
  heads: int

  @nn.compact
  def __call__(self, x, mask):
    # Every query row attends (padded rows too) so no row is all-masked; padded rows are
    # never read afterwards, as every later attention masks them as keys.
    attn_mask = nn.make_attention_mask(jnp.ones_like(mask), mask)
    y = nn.LayerNorm(name="norm_attn")(x)
    x = x + nn.MultiHeadDotProductAttention(self.heads, qkv_features=self.width,
                                            name="attn")(y, y, mask=attn_mask)
    y = nn.LayerNorm(name="norm_mlp")(x)
    y = nn.Dense(self.width, name="mlp_out")(nn.gelu(nn.Dense(2 * self.width, name="mlp_in")(y)))
    return x + y


class VLNAgent(nn.Module):
  """The recurrent policy (module docstring). Inputs of `step`, all batch-leading:

  views [B, H, C] the current node's view features; view_angle [B, H] each view's heading minus
  the agent's (radians); cand_view int [B, K] the view facing each candidate (any value where
  padded); cand_angle [B, K] each candidate's direction minus the agent's heading; cand_mask
  bool [B, K] real candidates. Logits [B, K + 1], STOP last.
  """
  width: int = 128
  heads: int = 4
  text_layers: int = 1
  feature_dropout: float = 0.0

  def setup(self):
    w, h = self.width, self.heads
    self.text_in = nn.Dense(w)
    self.text_norm = nn.LayerNorm()
    self.text_blocks = [TextBlock(w, h) for _ in range(self.text_layers)]
    self.init_query = self.param("init_query", nn.initializers.normal(0.1), (w,))
    self.init_attn = Attention(w, h)
    self.feature_norm = nn.LayerNorm()
    self.feature_drop = nn.Dropout(self.feature_dropout)
    self.view_proj = nn.Dense(w)
    self.angle_proj = nn.Dense(w)
    self.token_norm = nn.LayerNorm()
    self.lang_attn = Attention(w, h)
    self.vis_query = nn.Dense(w)
    self.vis_attn = Attention(w, h)
    self.gru = nn.GRUCell(w)
    self.act_query = nn.Dense(w)
    self.act_key = nn.Dense(w)
    self.stop_token = self.param("stop_token", nn.initializers.normal(1.0), (w,))

  def encode(self, text, text_mask, train: bool = False):
    """text [B, T, Dt], text_mask bool [B, T] -> ((memory, intermediates), state [B, D]).

    memory: the language attention's keys and values, computed once per episode (the step's
    cost is then independent of recomputing them)."""
    del train
    tokens = self.text_norm(self.text_in(text.astype(jnp.float32)))
    for block in self.text_blocks:
      tokens = block(tokens, text_mask)
    query = jnp.broadcast_to(self.init_query, (text.shape[0], self.width))
    state, weights = self.init_attn(query, tokens, text_mask)
    return (self.lang_attn.project(tokens), {"init_attention": weights}), jnp.tanh(state)

  def step(self, state, memory, text_mask, views, view_angle, cand_view, cand_angle, cand_mask,
           train: bool = False):
    """One decision -> ((logits [B, K + 1], intermediates), new state [B, D])."""
    feats = self.feature_drop(self.feature_norm(views.astype(jnp.float32)),
                              deterministic=not train)
    content = self.view_proj(feats)                                      # [B, H, D]
    tokens = self.token_norm(content + self.angle_proj(angle_features(view_angle)))
    lang, lang_w = self.lang_attn.attend(state, memory, text_mask)
    vis, vis_w = self.vis_attn(self.vis_query(jnp.concatenate([state, lang], -1)), tokens,
                               jnp.ones(tokens.shape[:2], bool))
    state, _ = self.gru(state, jnp.concatenate([lang, vis], -1))
    cand = jnp.take_along_axis(content, jnp.clip(cand_view, 0, views.shape[1] - 1)[..., None],
                               axis=1)
    cand = self.token_norm(cand + self.angle_proj(angle_features(cand_angle)))   # [B, K, D]
    stop = jnp.broadcast_to(self.stop_token, (state.shape[0], 1, self.width))
    keys = self.act_key(jnp.concatenate([cand, stop], 1))
    query = self.act_query(jnp.concatenate([state, lang, vis], -1))
    logits = jnp.einsum("bd,bkd->bk", query, keys) / math.sqrt(self.width)
    valid = jnp.concatenate([cand_mask, jnp.ones_like(cand_mask[:, :1])], -1)
    logits = jnp.where(valid, logits, NEG)
    return (logits, {"text_attention": lang_w, "view_attention": vis_w, "state": state}), state

  def __call__(self, text, text_mask, views, view_angle, cand_view, cand_angle, cand_mask,
               train: bool = False):
    """The first decision of an episode (what `init` traces): encode, then one step."""
    (memory, _), state = self.encode(text, text_mask, train)
    return self.step(state, memory, text_mask, views, view_angle, cand_view, cand_angle,
                     cand_mask, train)


# ---------------------------------------------------------------------------------------------
# Rollouts on padded graphs: the environment as array code, so an episode is one lax.scan.

@struct.dataclass
class World:
  """A set of viewpoint graphs as padded device arrays, with each node's view features: what a
  rollout needs, in fixed shapes (built by `benchmarks.gvue_navigation.make_world`). Padded
  nodes have no neighbours; K is the largest degree."""
  views: jax.Array          # float16 [A, V, H, C]
  neighbours: jax.Array     # int32 [A, V, K], ascending, -1 padded
  cand_view: jax.Array      # int32 [A, V, K] the view facing each neighbour
  cand_heading: jax.Array   # float32 [A, V, K] heading of the edge to each neighbour
  dist: jax.Array           # float32 [A, V, V] metres along edges (inf padded)


def observe(world: World, apt, node, heading) -> tuple:
  """The step inputs of `VLNAgent.step` (after state, memory, text_mask) at these nodes; view k
  faces heading 2 pi k / H in the graph's frame."""
  headings = world.views.shape[2]
  view_angle = jnp.arange(headings) * (2 * math.pi / headings) - heading[:, None]
  nbrs = world.neighbours[apt, node]
  return (world.views[apt, node], view_angle, world.cand_view[apt, node],
          world.cand_heading[apt, node] - heading[:, None], nbrs >= 0)


def expert_action(world: World, apt, node, goal) -> jax.Array:
  """The shortest-path label: the first neighbour on a shortest path to the goal (the lowest
  slot within 1e-4 m of the best, as `viewpoints.shortest_path`), K (STOP) at the goal."""
  nbrs = world.neighbours[apt, node]
  safe = jnp.maximum(nbrs, 0)
  total = world.dist[apt[:, None], node[:, None], safe] + world.dist[apt[:, None], safe,
                                                                     goal[:, None]]
  total = jnp.where(nbrs >= 0, total, jnp.inf)
  first = jnp.argmax(total <= total.min(-1, keepdims=True) + 1e-4, axis=-1)
  return jnp.where(node == goal, nbrs.shape[-1], first).astype(jnp.int32)


def move(world: World, apt, node, heading, action):
  """Takes candidate `action` (STOP = K stays); the heading becomes the edge's."""
  k = world.neighbours.shape[-1]
  slot = jnp.minimum(action, k - 1)[:, None]
  go = action < k
  nxt = jnp.take_along_axis(world.neighbours[apt, node], slot, 1)[:, 0]
  turn = jnp.take_along_axis(world.cand_heading[apt, node], slot, 1)[:, 0]
  return jnp.where(go, nxt, node), jnp.where(go, turn, heading)


def encode(model, variables, batch: Mapping, train: bool = False) -> tuple:
  """The instruction's (memory, first state), shared by a batch's rollouts."""
  (memory, _), state = model.apply(variables, batch["text"], batch["text_mask"], train,
                                   method="encode")
  return memory, state


def rollout(model, variables, world: World, batch: Mapping, key, steps: int, feedback: str,
            train: bool = False, encoded: tuple | None = None) -> dict:
  """`steps` decisions of a batch of episodes -> per step [S, B]: logits [S, B, K+1], label,
  action, active (not stopped before this step), node (after the step), moved.

  batch: apartment, start, goal (node indices), heading (start heading, radians) [B]; text
    [B, T, Dt] and text_mask [B, T].
  feedback: "teacher" takes the label, "sample" a draw from the policy, "argmax" its best; a
    stopped episode stays stopped (its later steps are inactive).
  encoded: `encode`'s output if already computed."""
  apt, goal, mask = batch["apartment"], batch["goal"], batch["text_mask"]
  memory, state = encoded or encode(model, variables, batch, train)

  def decide(carry, k):
    state, node, heading, done = carry
    k_drop, k_act = jax.random.split(k)
    obs = observe(world, apt, node, heading)
    (logits, _), state = model.apply(variables, state, memory, mask, *obs, train,
                                     rngs={"dropout": k_drop}, method="step")
    label = expert_action(world, apt, node, goal)
    action = {"teacher": lambda: label,
              "sample": lambda: jax.random.categorical(k_act, logits).astype(jnp.int32),
              "argmax": lambda: jnp.argmax(logits, -1).astype(jnp.int32)}[feedback]()
    moved = ~done & (action < world.neighbours.shape[-1])
    nxt, heading = move(world, apt, node, heading, jnp.where(moved, action, logits.shape[-1]))
    out = {"logits": logits, "label": label, "action": action, "active": ~done, "node": nxt,
           "moved": moved}
    return (state, nxt, heading, done | ~moved), out

  carry = (state, batch["start"], batch["heading"], jnp.zeros(apt.shape, bool))
  return jax.lax.scan(decide, carry, jax.random.split(key, steps))[1]


def imitation_loss(out: dict) -> jax.Array:
  """Cross-entropy of the labels, mean over the active steps."""
  logp = jax.nn.log_softmax(out["logits"])
  ce = -jnp.take_along_axis(logp, out["label"][..., None], -1)[..., 0]
  return (ce * out["active"]).sum() / jnp.maximum(out["active"].sum(), 1)
