"""Recurrent actor-critic for navigation over dict observations (habitat-baselines / CortexBench).

    policy = NavPolicy(num_actions=4, hidden=512, rnn="lstm", rnn_layers=2)
    carry = policy.initial_carry(batch)
    # Training: a [T, B] sequence with per-step episode starts.
    carry, logits, value = policy.apply(variables, obs, carry, prev_action, start)
    # Acting: one step, leaves [B, ...].
    carry, logits, value = policy.apply(variables, obs, carry, prev_action, start,
                                        method=NavPolicy.step)

Observations (all optional except at least one input):
- 'rgb' uint8 [H, W, 3], 'depth' float32 [H, W, 1]: habitat's SimpleCNN from scratch over the
  channel-stacked image (rgb / 255, depth as given); 'goal_rgb' (ImageNav) gets its own CNN.
  With a PVR (`pvr`, see `pvr_tokens`), rgb and goal_rgb go through the zoo encoder (frozen:
  under stop_gradient, its variables an argument; or, with `train_pvr`, fine-tuned: its
  variables are the policy's 'pvr' param, initialised from the argument) and each through its
  own CortexBench compression layer (eai-vc `create_compression_layer`: conv 3x3 to
  round(2048 / g^2) channels, GroupNorm(1), ReLU, flatten) and `visual_fc` (linear + ReLU);
  depth then gets a SimpleCNN alone.
- any rank-1 float vector (e.g. 'gps_compass'): a linear `embed_dim` embedding (habitat's
  `tgt_embeding`), or concatenated as is with `embed_vectors` off; with `vector_fourier` = K,
  the embedding also reads sin/cos(2^k pi x), k < K, of each entry (Fourier features, Tancik et
  al. 2020), so that a sharp function of the goal distance (END within 0.2 m, not at 0.25) does
  not need a huge weight on one raw column. As one raw column among a
  few hundred RNN inputs, the goal distance was too weak a signal to learn when to call END
  from: PointNav agents then stopped in range on ~5% of the steps they spent there, and PPO
  fine-tuning drove that to ~0 (the agent no longer ended its episodes).
- 'objectgoal' int32 []: a 32-d embedding of the category (eai-vc's EAINet).
- the previous action (unless `use_prev_action` is off): a 32-d embedding of
  `prev_action + 1`, index 0 at an episode's start (habitat's start token). Imitation turns it
  off: a cloned policy that sees the expert's last action learns to repeat it (the copycat
  problem of behaviour cloning) and then turns in place at test time.
The features go through a stack of `rnn_layers` LSTM or GRU cells (a `nn.scan` over time)
whose state is zeroed where `start` is True, then linear actor (logits) and critic heads.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from vcbench.models import remat
from vcbench.models.trainable_conv import Conv

IMAGE_KEYS = ("rgb", "depth", "goal_rgb")
PVR_KEYS = ("rgb", "goal_rgb")    # the images a PVR encodes
TOKENS = "_tokens"                # obs['rgb_tokens']: rgb's frozen PVR tokens, computed before
OBJECTGOAL = "objectgoal"
RNN_TYPES = ("lstm", "gru")

PVR_PARAM = "pvr"   # The encoder's variables among the params, when `train_pvr`.

# (encoder variables, uint8 images [B, H, W, 3]) -> patch tokens [B, N, D].
TokenFn = Callable[[Any, jax.Array], jax.Array]


def pvr_tokens(encoder) -> TokenFn:
  """The token function of a `zoo.Encoder`, without its params (they are passed at call time,
  so big encoders are a jit argument rather than constants baked into the program)."""
  stripped = type(encoder)(encoder.module, None, encoder.preprocess)
  return lambda variables, images: stripped.apply(variables, images)["tokens"]


def unsupported_obs(spec: dict[str, Any]) -> list[str]:
  """Keys of an observation spec (per env, no batch axis) the policy cannot consume."""
  bad = []
  for key, s in spec.items():
    if key in IMAGE_KEYS:
      ok = len(s.shape) == 3
    elif key == OBJECTGOAL:
      ok = len(s.shape) == 0 and jnp.issubdtype(s.dtype, jnp.integer)
    else:
      ok = len(s.shape) == 1 and jnp.issubdtype(s.dtype, jnp.floating)
    if not ok:
      bad.append(f"{key} {tuple(s.shape)} {jnp.dtype(s.dtype).name}")
  return bad


def token_keys() -> tuple[str, ...]:
  return tuple(k + TOKENS for k in PVR_KEYS)


def cnn_input(obs, with_rgb: bool = True) -> Optional[jax.Array]:
  """The SimpleCNN's input: rgb / 255 (unless a PVR takes the rgb) and depth stacked on the
  channel axis; None when there is neither."""
  parts = ([obs["rgb"].astype(jnp.float32) / 255.0] if with_rgb and "rgb" in obs else [])
  if "depth" in obs:
    parts.append(obs["depth"].astype(jnp.float32))
  return jnp.concatenate(parts, axis=-1) if parts else None


def compression_channels(grid: int, flat_size: int = 2048) -> int:
  """eai-vc: channels such that the flattened g x g x C map has about `flat_size` entries."""
  return int(round(flat_size / grid ** 2))


class SimpleCNN(nn.Module):
  """habitat-baselines' SimpleCNN: convs 8x8/4 (32), 4x4/2 (64), 3x3/1 (32), flatten, linear,
  ReLU. SAME padding (habitat: none) so that small frames (tests, low-res nav) keep >= 1 cell.
  The convs are `trainable_conv.Conv`: XLA's kernel gradient is very slow inside the training
  scan on CPU."""
  out_dim: int

  @nn.compact
  def __call__(self, x):
    for i, (features, kernel, stride) in enumerate(((32, 8, 4), (64, 4, 2), (32, 3, 1))):
      x = Conv(features, (kernel, kernel), strides=stride, padding="SAME")(x)
      x = nn.relu(x) if i < 2 else x
    return nn.relu(nn.Dense(self.out_dim)(x.reshape(x.shape[0], -1)))


class CompressionLayer(nn.Module):
  """CortexBench's nav compression of patch tokens [B, g*g, D] -> [B, g*g*C] (C from
  `compression_channels`): conv 3x3 (no bias), GroupNorm with one group, ReLU, flatten."""
  flat_size: int = 2048

  @nn.compact
  def __call__(self, tokens):
    b, n, d = tokens.shape
    grid = math.isqrt(n)
    if grid * grid != n:
      raise ValueError(f"CompressionLayer needs a square token grid, got {n} tokens")
    x = tokens.reshape(b, grid, grid, d)
    x = Conv(compression_channels(grid, self.flat_size), (3, 3), padding=1, use_bias=False,
             taps=True)(x)
    x = nn.relu(nn.GroupNorm(num_groups=1, epsilon=1e-5)(x))
    return x.reshape(b, -1)


class PVRVisual(nn.Module):
  """Frozen-encoder tokens -> compression layer -> `visual_fc` (linear + ReLU)."""
  out_dim: int
  flat_size: int = 2048

  @nn.compact
  def __call__(self, tokens):
    return nn.relu(nn.Dense(self.out_dim)(CompressionLayer(self.flat_size)(tokens)))


def _zero_where(start, carry):
  """Resets the recurrent state of the envs whose episode starts at this step."""
  return jax.tree.map(lambda c: jnp.where(start[:, None], jnp.zeros_like(c), c), carry)


class _RecurrentStep(nn.Module):
  """One time step of the stacked RNN: (carry, (x [B, F], start [B])) -> (carry, h [B, H])."""
  rnn: str
  layers: int
  hidden: int

  @nn.compact
  def __call__(self, carry, inputs):
    x, start = inputs
    carry = _zero_where(start, carry)
    new = []
    for i in range(self.layers):
      cell = (nn.OptimizedLSTMCell(self.hidden, name=f"lstm_{i}") if self.rnn == "lstm"
              else nn.GRUCell(self.hidden, name=f"gru_{i}"))
      layer_carry, x = cell(carry[i], x)
      new.append(layer_carry)
    return tuple(new), x


# The whole sequence in one scan; parameters are shared over time.
_RecurrentScan = nn.scan(_RecurrentStep, variable_broadcast="params",
                         split_rngs={"params": False}, in_axes=0, out_axes=0)


def initial_carry(rnn: str, layers: int, hidden: int, batch: int):
  """Zero recurrent state: per layer (c, h) for LSTMs, h for GRUs, each [batch, hidden]."""
  zeros = lambda: jnp.zeros((batch, hidden), jnp.float32)
  return tuple((zeros(), zeros()) if rnn == "lstm" else zeros() for _ in range(layers))


def fourier_features(x: jax.Array, octaves: int) -> jax.Array:
  """[..., D] -> [..., D * (1 + 2 * octaves)]: x, then sin and cos of 2^k pi x for k < octaves."""
  if octaves == 0:
    return x
  angles = (x[..., None] * (math.pi * 2.0 ** jnp.arange(octaves))).reshape(*x.shape[:-1], -1)
  return jnp.concatenate([x, jnp.sin(angles), jnp.cos(angles)], axis=-1)


class NavPolicy(nn.Module):
  """Recurrent actor-critic; see the module docstring for the observation handling.

  Attributes:
    num_actions: discrete actions.
    hidden: width of the visual features and of the RNN (habitat's hidden_size).
    rnn: 'lstm' or 'gru'.
    rnn_layers: stacked recurrent layers (2 in CortexBench nav).
    embed_dim: width of the previous-action and object-goal embeddings.
    num_object_categories: size of the 'objectgoal' embedding table.
    compression_size: flattened size of the compressed PVR token map (eai-vc: 2048).
    pvr: the encoder's token function (`pvr_tokens`), or None for the SimpleCNN.
    train_pvr: fine-tune the encoder: its variables become the param `PVR_PARAM` (initialised
      from `frozen` at init; later `frozen` is ignored) and gradients reach them.
    pvr_chunk: with `train_pvr`, frames per encoder pass (`remat.apply_in_chunks`: bounds the
      activations kept for the backward pass); None: all at once.
    use_prev_action: feed the previous action's embedding (habitat does).
    visual_norm: LayerNorm over the visual features before the RNN. Without it, behaviour
      cloning on ObjectNav grew the SimpleCNN features from mean |x| 0.09 at initialisation to
      19-51 (three 0.6M-step runs), almost all of it common to every image, which saturates the
      LSTM gates: the policy then outputs the same action distribution whatever it sees
      (`python -m launch.nav_probe` measures both).
    embed_vectors: a linear `embed_dim` embedding of each rank-1 float observation (on), or
      the raw vector (off).
    vector_fourier: octaves K of the Fourier features the vector embeddings also read
      (periods 2, 1, ..., 2^(1-K) in the vector's units, metres for the goal distance); 0: none.
    aux_goal_visible: also a linear head on the RNN's output whose logit says whether the goal
      is in view, sown as intermediates['goal_visible_logit'] [T, B] (an auxiliary loss on it
      teaches ObjectNav agents to recognise their goal, `nav_bc`'s `aux_coef`).
    aux_categories: K > 0: also a linear head on the current frame's visual features with a
      logit per object category (is it in view?), sown as
      intermediates['categories_visible_logits'] [T, B, K]. Every frame labels every category,
      so it gives the encoder K times the recognition signal of the goal head.
    aux_depth: G > 0: also a linear head on the current frame's visual features predicting
      its depth averaged over a G x G grid (sigmoid, [0, 1] as the 'depth' observation), sown
      as intermediates['coarse_depth'] [T, B, G*G]: geometry for an RGB-only encoder, which
      depth-prediction auxiliary losses give navigation agents (Mirowski et al. 2017).
  """
  num_actions: int
  hidden: int = 512
  rnn: str = "lstm"
  rnn_layers: int = 2
  embed_dim: int = 32
  num_object_categories: int = 7
  compression_size: int = 2048
  pvr: Optional[TokenFn] = None
  train_pvr: bool = False
  pvr_chunk: Optional[int] = None
  use_prev_action: bool = True
  visual_norm: bool = False
  embed_vectors: bool = True
  vector_fourier: int = 0
  aux_goal_visible: bool = False
  aux_categories: int = 0
  aux_depth: int = 0

  def initial_carry(self, batch: int):
    return initial_carry(self.rnn, self.rnn_layers, self.hidden, batch)

  @nn.compact
  def __call__(self, obs, carry, prev_action, start, frozen=None):
    """Sequence path. obs leaves [T, B, ...], prev_action int [T, B], start bool [T, B] (the
    obs at t begins an episode), carry leaves [B, ...] (state before step 0), frozen: the PVR's
    variables (with `train_pvr`: only their initial value, at init). Returns (carry after
    step T-1, logits [T, B, A], value [T, B])."""
    if self.rnn not in RNN_TYPES:
      raise ValueError(f"NavPolicy.rnn must be one of {RNN_TYPES}, got {self.rnn!r}")
    t, b = start.shape
    # Env-major flattening: when the env axis is sharded over devices, [B*T] stays split in
    # contiguous blocks, so the per-frame encoders run data parallel (a time-major [T*B]
    # would be gathered onto every device).
    flat = lambda x: jnp.swapaxes(x, 0, 1).reshape(b * t, *x.shape[2:])
    unflat = lambda x: jnp.swapaxes(x.reshape(b, t, *x.shape[1:]), 0, 1)
    x, frame = self._features(jax.tree.map(flat, obs), flat(prev_action), flat(start), frozen)
    x = unflat(x)
    carry, h = _RecurrentScan(self.rnn, self.rnn_layers, self.hidden, name="rnn")(
        carry, (x, start))
    logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01),
                      name="actor")(h)
    value = nn.Dense(1, name="critic")(h)[..., 0]
    if self.aux_goal_visible:
      self.sow("intermediates", "goal_visible_logit",
               nn.Dense(1, name="aux_goal_visible")(h)[..., 0])
    frame = unflat(jnp.concatenate(frame, axis=-1)) if frame else None
    for name, size, out, squash in (
        ("aux_categories", self.aux_categories, "categories_visible_logits", None),
        ("aux_depth", self.aux_depth ** 2, "coarse_depth", jax.nn.sigmoid)):
      if not size:
        continue
      if frame is None:
        raise ValueError(f"NavPolicy.{name} needs an rgb or depth observation")
      y = nn.Dense(size, name=name)(frame)
      self.sow("intermediates", out, y if squash is None else squash(y))
    return carry, logits, value

  def step(self, obs, carry, prev_action, start, frozen=None):
    """Acting path: one step, leaves [B, ...]; returns (carry, logits [B, A], value [B])."""
    add_time = lambda x: x[None]
    carry, logits, value = self(jax.tree.map(add_time, obs), carry, add_time(prev_action),
                                add_time(start), frozen)
    return carry, logits[0], value[0]

  def _features(self, obs, prev_action, start, frozen):
    """Per-step input of the RNN, [N, F], from flat observations [N, ...], and the current
    frame's visual parts of it (no goal image): a list of [N, F_i]."""
    unknown = sorted(k for k, v in obs.items()
                     if k not in IMAGE_KEYS and k != OBJECTGOAL and v.ndim != 2
                     and not (self.pvr is not None and k in token_keys()))
    if unknown:
      raise ValueError(f"NavPolicy cannot consume observations {unknown}; supported: "
                       f"{IMAGE_KEYS}, '{OBJECTGOAL}' and rank-1 float vectors")
    frame, goal = self._visual(obs, frozen)
    parts = frame + goal
    if self.visual_norm:
      parts = [nn.LayerNorm(name=f"visual_norm_{i}")(p) for i, p in enumerate(parts)]
    frame = parts[:len(frame)]
    for k in sorted(obs):
      if k not in IMAGE_KEYS and k != OBJECTGOAL and k not in token_keys():
        x = obs[k].astype(jnp.float32)
        if self.embed_vectors:
          parts.append(nn.Dense(self.embed_dim, name=f"{k}_embed")(
              fourier_features(x, self.vector_fourier)))
        else:
          parts.append(x)
    if OBJECTGOAL in obs:
      parts.append(nn.Embed(self.num_object_categories, self.embed_dim, name="objectgoal_embed")(
          obs[OBJECTGOAL].astype(jnp.int32)))
    if self.use_prev_action:
      # Index 0 is habitat's start token: there is no previous action at an episode start.
      token = jnp.where(start, 0, prev_action.astype(jnp.int32) + 1)
      parts.append(nn.Embed(self.num_actions + 1, self.embed_dim,
                            name="prev_action_embed")(token))
    return jnp.concatenate(parts, axis=-1), frame

  def _visual(self, obs, frozen):
    """Visual features: ([the current frame's rgb(+depth) features], [goal image features]),
    as present. A PVR's tokens may
    come precomputed (obs[key + TOKENS], `Trainer.obs`: a frozen encoder then runs once per
    frame, not again in every SGD epoch)."""
    parts = []
    uses_pvr = self.pvr is not None and any(k in obs for k in PVR_KEYS)
    variables = self._pvr_variables(frozen) if uses_pvr else None
    tokens = lambda k: obs[k + TOKENS] if k + TOKENS in obs else self._tokens(obs[k], variables)
    has = lambda k: k in obs or k + TOKENS in obs
    if has("rgb") and self.pvr is not None:
      parts.append(PVRVisual(self.hidden, self.compression_size, name="rgb_visual")(
          tokens("rgb")))
    x = cnn_input(obs, with_rgb=self.pvr is None)
    if x is not None:
      parts.insert(0, SimpleCNN(self.hidden, name="visual_cnn")(x))
    goal = []
    if has("goal_rgb"):
      if self.pvr is None:
        goal.append(SimpleCNN(self.hidden, name="goal_cnn")(
            obs["goal_rgb"].astype(jnp.float32) / 255.0))
      else:
        goal.append(PVRVisual(self.hidden, self.compression_size, name="goal_visual")(
            tokens("goal_rgb")))
    return parts, goal

  def _pvr_variables(self, frozen):
    """The encoder's variables: the trained param (read once: rgb and goal_rgb share it), or
    the frozen argument."""
    if self.train_pvr:
      if frozen is None and self.is_initializing():
        raise ValueError("NavPolicy with a trained PVR is initialised from the encoder's "
                         "variables: pass frozen=... to init")
      return self.param(PVR_PARAM, lambda _: frozen)
    if frozen is None:
      raise ValueError("NavPolicy with a frozen PVR needs its variables: pass frozen=...")
    return jax.lax.stop_gradient(frozen)

  def _tokens(self, images, variables):
    if self.train_pvr:
      return remat.apply_in_chunks(self.pvr, variables, images, self.pvr_chunk)
    # A frozen encoder gets no gradient (stopping here also spares the backward pass through
    # it).
    return jax.lax.stop_gradient(self.pvr(variables, images))
