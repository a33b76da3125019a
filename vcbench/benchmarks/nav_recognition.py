"""Can an encoder learn to recognise ObjectNav's goals in vcbench-nav frames, and from what labels?

A supervised probe outside any policy: frames of forward-biased random walks in ObjectNav
apartments, labelled from the env's semantic frame (`env.categories_in_view`), train the
policy's SimpleCNN (or a frozen zoo PVR's tokens through a trainable linear layer) to say
whether the episode's goal category is in view; it is scored on frames of *unseen* apartments.
Two ways to label: 'goal' (one label per frame: the goal category, the head conditioned on the
goal's embedding; what `policy.aux_goal_visible` learns) and 'all' (every category labelled in
every frame, a logit each; the goal's logit is the prediction; what `policy.aux_categories`
learns). `launch.nav_recognition` prints the comparison.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from vcbench.envs import nav
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import scene as sc
from vcbench.models import nav_policy

LABELS = ("goal", "all")
LARGE = 200        # pixels: a goal this large in view is one a policy must not miss
_WALK_ACTIONS = (nav_env.MOVE_AHEAD, nav_env.MOVE_AHEAD, nav_env.ROTATE_LEFT,
                 nav_env.ROTATE_RIGHT)   # no END: a walk runs its whole length


def random_walk_frames(split: str, *, size: int = 64, walks: int = 256, steps: int = 160,
                       every: int = 4, scenes: int = 100, seed: int = 0,
                       batch: int = 64) -> dict[str, np.ndarray]:
  """Every `every`-th frame of `walks` forward-biased random walks of `steps` steps through
  ObjectNav episodes of `scenes` apartments of `split`: rgb uint8 [N, H, W, 3], depth float16
  [N, H, W, 1], goal category index [N] (0..K-1), categories in view bool [N, K], goal pixels
  [N]."""
  if walks % batch:
    raise ValueError(f"walks = {walks} must be a multiple of batch = {batch}")
  env = nav.make("objectnav", split, num_scenes=scenes, num_episodes=max(walks, 64),
                 height=size, width=size, sensors=("rgb", "depth", "semantic"),
                 auto_reset=True, balanced=False)
  actions = jnp.asarray(_WALK_ACTIONS, jnp.int32)

  @jax.jit
  def walk(key):
    state = jax.vmap(env.reset)(jax.random.split(key, batch))

    def step(state, k):
      goal = jax.vmap(env.episode)(state.sim).category - 1
      sem = state.obs["semantic"]
      frame = dict(rgb=state.obs["rgb"], depth=state.obs["depth"].astype(jnp.float16),
                   category=goal, visible=state.sim.categories_visible,
                   goal_pixels=jnp.sum(sem == (sc.SEM_OBJECT0 + goal)[:, None, None], (1, 2)))
      action = jax.random.choice(k, actions, (batch,))
      return jax.vmap(env.step)(state, action), frame

    _, frames = jax.lax.scan(step, state, jax.random.split(key, steps))
    return jax.tree.map(lambda x: x[::every].reshape(-1, *x.shape[2:]), frames)

  keys = jax.random.split(jax.random.key(seed), walks // batch)
  parts = [jax.device_get(walk(k)) for k in keys]
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


class Recogniser(nn.Module):
  """The policy's SimpleCNN on rgb + depth (or a frozen PVR's tokens, normalised, through a
  linear layer), then the head of `labels`: 'goal' -> one logit from the features and the goal's embedding;
  'all' -> a logit per category, of which the goal's. Returns goal logits [N] and, for 'all',
  every category's [N, K] (None for 'goal')."""
  labels: str
  hidden: int = 256
  num_categories: int = nav_env.NUM_CATEGORIES

  @nn.compact
  def __call__(self, frames: dict, tokens: Optional[jax.Array] = None):
    if tokens is None:
      x = nav_policy.SimpleCNN(self.hidden)(nav_policy.cnn_input(frames))
    else:
      # Scale-free: random_mobilenetv2's tokens are ~1e-9 (its flax initialisation shrinks
      # the activations layer by layer), below any LayerNorm epsilon; the probe asks what the
      # features tell, not how large they are.
      x = tokens.reshape(tokens.shape[0], -1).astype(jnp.float32)
      x = x / (jnp.sqrt(jnp.mean(jnp.square(x), -1, keepdims=True)) + 1e-30)
      x = nn.relu(nn.Dense(self.hidden)(nn.LayerNorm()(x)))
    category = frames["category"]
    if self.labels == "all":
      logits = nn.Dense(self.num_categories)(x)
      return jnp.take_along_axis(logits, category[:, None], 1)[:, 0], logits
    x = jnp.concatenate([x, nn.Embed(self.num_categories, 32)(category)], -1)
    return nn.Dense(1)(nn.relu(nn.Dense(128)(x)))[:, 0], None


def _loss(model, params, frames, tokens):
  goal, every = model.apply(params, frames, tokens)
  if every is None:
    target = jnp.take_along_axis(frames["visible"], frames["category"][:, None], 1)[:, 0]
    return jnp.mean(optax.sigmoid_binary_cross_entropy(goal, target.astype(jnp.float32)))
  bce = optax.sigmoid_binary_cross_entropy(every, frames["visible"].astype(jnp.float32))
  return jnp.mean(jnp.sum(bce, -1))


def fit(frames: dict, labels: str, *, steps: int = 3000, batch: int = 128, lr: float = 1e-3,
        seed: int = 0, tokens: Optional[np.ndarray] = None, every: int = 0,
        on_every: Optional[Callable] = None):
  """Adam on minibatches of `frames` (and the frozen `tokens` of their rgb, if given); returns
  (model, params, loss per step). Every `every` steps, on_every(step, model, params, losses)."""
  if labels not in LABELS:
    raise ValueError(f"labels must be one of {LABELS}, got {labels!r}")
  model = Recogniser(labels)
  pick = lambda idx: (jax.tree.map(lambda x: x[idx], frames),
                      None if tokens is None else tokens[idx])
  params = model.init(jax.random.key(seed), *pick(np.arange(2)))
  opt = optax.adam(lr)

  @jax.jit
  def update(params, opt_state, minibatch, tok):
    loss, grads = jax.value_and_grad(functools.partial(_loss, model))(params, minibatch, tok)
    updates, opt_state = opt.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss

  rng, n = np.random.default_rng(seed), len(frames["category"])
  opt_state, losses = opt.init(params), []
  for _ in range(steps):
    params, opt_state, loss = update(params, opt_state, *pick(rng.integers(0, n, batch)))
    losses.append(float(loss))
    if every and on_every is not None and len(losses) % every == 0:
      on_every(len(losses), model, params, np.asarray(losses))
  return model, params, np.asarray(losses)


def scores(model, params, frames: dict, tokens: Optional[np.ndarray] = None,
           batch: int = 512) -> dict[str, float]:
  """Held-out goal-in-view figures: accuracy, the accuracy of always saying 'not in view',
  recall (of all goals in view and of those >= LARGE pixels) and the false-positive rate."""
  # params are an argument, not constants folded into the compiled program.
  apply = jax.jit(lambda p, f, t: model.apply(p, f, t)[0])
  n = len(frames["category"])
  logits = np.concatenate([np.asarray(apply(
      params, jax.tree.map(lambda x: x[i:i + batch], frames),
      None if tokens is None else tokens[i:i + batch])) for i in range(0, n, batch)])
  said = logits > 0
  seen = np.take_along_axis(frames["visible"], frames["category"][:, None], 1)[:, 0]
  large = frames["goal_pixels"] >= LARGE
  rate = lambda hit, of: float(hit[of].mean()) if of.any() else float("nan")
  return {"accuracy": float((said == seen).mean()), "base_rate": float(1.0 - seen.mean()),
          "recall": rate(said, seen), "recall_large": rate(said, large),
          "false_positive": rate(said, ~seen), "frames": float(n)}
