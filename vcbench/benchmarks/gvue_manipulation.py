"""G-VUE's manipulation task on the MuJoCo tabletop: oracle demos on the seen split, the
affordance decoder trained on the frozen PVR's cached features, closed-loop evaluation on the
unseen split with Ravens' score.

Protocol as G-VUE's (CLIPort's multi-task seen->unseen setting): one decoder is trained on the
demos of every task at once (`config.tasks`, `config.demos` oracle episodes each, seen colours
or shapes), then each task is evaluated on `config.episodes` unseen-split episodes; the task's
metric is the mean Ravens score x100 over the unseen tasks (`score@unseen`), next to each task's
own score and success rate. Only the oracle's successful episodes become demos (CLIPort keeps
those too).

The demos and their geometry (`Frame`: workspace <-> square PVR image <-> the decoder's
stride-4 grid) live in `data/gvue/tabletop_demos.py`. Pick and place targets are continuous grid
coordinates (soft labels); decoded points go back through the grid to metres and reach the
simulator as pixels and a rotation bin (`tabletop_tasks.Action`).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.algos import decoder as decoder_lib
from vcbench.algos import runner
from vcbench.data.gvue.features import PYRAMID
from vcbench.data.gvue.tabletop_demos import Frame
from vcbench.envs.mujoco import tabletop_tasks as tasks_lib
from vcbench.models import affordance

def _cross_entropy(logits: jax.Array, target: jax.Array) -> jax.Array:
  flat = logits.reshape(logits.shape[0], -1)
  return -(jax.nn.log_softmax(flat) * target.reshape(flat.shape)).sum(-1).mean()


def make_loss(n_rotations: int, crop: int, valid: np.ndarray) -> Callable:
  """CLIPort's losses on soft labels: cross-entropy over the pick map and over the place map
  x rotations, the place map read at the demo's pick point (teacher forcing, as CLIPort)."""
  valid = jnp.asarray(valid)

  def loss(model, variables, batch, key):
    del key
    (pick, k, q), _ = model.apply(variables, [batch[p] for p in PYRAMID], batch["text"],
                                  batch["text_mask"])
    shape = pick.shape[1:]
    pick = jnp.where(valid, pick, -1e9)
    pick_target = jax.vmap(lambda p: affordance.soft_target(p, shape))(batch["pick"])
    place = affordance.place_logits(k, q, batch["pick"], n_rotations, crop)
    place = jnp.where(valid[..., None], place, -1e9)
    rot = jax.nn.one_hot(batch["rotation"], n_rotations)
    place_target = jax.vmap(lambda p: affordance.soft_target(p, shape))(batch["place"])
    place_target = place_target[..., None] * rot[:, None, None, :]
    return _cross_entropy(pick, pick_target) + _cross_entropy(place, place_target), {}

  return loss


def training_data(features: dict, demos: dict, text: np.ndarray, text_mask: np.ndarray) -> dict:
  """The decoder's training arrays: the demos' pyramid features, instruction tokens and
  pick/place/rotation labels, one row per demo step."""
  return {**{p: features[p] for p in PYRAMID}, "text": text, "text_mask": text_mask,
          "pick": demos["pick"], "place": demos["place"], "rotation": demos["rotation"]}


def fit(optim, model, data: dict, frame: Frame, n_rotations: int, crop: int, seed: int):
  """Trains `model` on `data` (`training_data`) with the decoder recipe -> (variables, the
  per-epoch losses)."""
  init = {"pyramid": [data[p][:2] for p in PYRAMID], "text": data["text"][:2],
          "text_mask": data["text_mask"][:2]}
  trainer = decoder_lib.make_train(optim, model, init,
                                   make_loss(n_rotations, crop, frame.valid()), data)
  state, logs = runner.run(trainer, None, trainer.num_updates, key=jax.random.key(seed))
  return state.variables(), logs


SEEN_TEST_SEED = 10_000   # Seen-split test episodes start here, past any demo episode.


def fit_and_score(config, frame: Frame, features: dict, demos: dict, encoder, text_encoder,
                  seed: int) -> dict[str, float]:
  """One seed of the task: the decoder trained on the demos' cached `features` (pyramid and
  instruction tokens), then evaluated closed loop with the PVR in the loop on
  `config.episodes` unseen episodes per task (and `config.seen_episodes` seen ones, reported
  but not scored). `config`: the job's `manipulation` section."""
  data = training_data(features, demos, features["text"], features["text_mask"])
  model = affordance.AffordanceDecoder(config.width, config.transport_dim)
  variables, logs = fit(config.optim, model, data, frame, config.n_rotations, config.crop, seed)
  policy = make_policy(lambda x: encoder.apply(encoder.params, x), model, variables,
                       text_encoder, frame, config.n_rotations, config.crop,
                       features["text"].shape[1])
  values = evaluate(policy, config.tasks, config.episodes, frame, config.n_rotations, "unseen")
  if config.seen_episodes:
    values.update(evaluate(policy, config.tasks, config.seen_episodes, frame,
                           config.n_rotations, "seen", first_seed=SEEN_TEST_SEED))
  values["final_loss"] = float(np.asarray(logs["loss"])[-1].mean())
  return values


def make_policy(encoder_apply: Callable, model, variables, text_encoder, frame: Frame,
                n_rotations: int, crop: int, max_len: int) -> Callable:
  """`policy(episode) -> Action`: render, encode, pick at the refined pick argmax, place at
  the refined argmax of the best rotation's place map."""
  valid = jnp.asarray(frame.valid())

  @jax.jit
  def act(images, text, mask):
    pyramid = encoder_apply(images)["pyramid"]
    (pick, k, q), _ = model.apply(variables, list(pyramid), text, mask)
    p = affordance.refine(pick[0], valid)
    place = affordance.place_logits(k, q, p[None], n_rotations, crop)[0]
    best_rot = jnp.argmax(jnp.where(valid[..., None], place, -jnp.inf).max((0, 1)))
    return p, affordance.refine(place[..., best_rot], valid), best_rot

  def policy(ep: tasks_lib.Episode) -> tasks_lib.Action:
    image = frame.image(ep.sim.render()["rgb"])[None]
    text, mask = text_encoder.encode([ep.instruction], max_len)
    p, placed, r = act(jnp.asarray(image), jnp.asarray(text), jnp.asarray(mask))
    return tasks_lib.Action(frame.to_table(np.asarray(p)), frame.to_table(np.asarray(placed)),
                            2 * math.pi * int(r) / n_rotations)

  return policy


def evaluate(policy: Callable, task_names: Sequence[str], episodes: int, frame: Frame,
             n_rotations: int, split: str = "unseen", first_seed: int = 0) -> dict[str, float]:
  """Ravens' score x100 and success % per task, and `score@<split>`, `success@<split>` their
  means over the tasks."""
  values, scores, successes = {}, [], []
  for name in task_names:
    runs = []
    for seed in range(first_seed, first_seed + episodes):
      ep = tasks_lib.Episode(name, split, seed, frame.workspace)
      try:
        while not ep.done:
          ep.step(policy(ep), n_rotations)
        runs.append((ep.total, ep.success))
      finally:
        ep.close()
    score = 100 * float(np.mean([r[0] for r in runs]))
    values[f"{name}_score@{split}"] = score
    values[f"{name}_success@{split}"] = 100 * float(np.mean([r[1] for r in runs]))
    scores.append(score)
    successes.append(values[f"{name}_success@{split}"])
  values[f"score@{split}"] = float(np.mean(scores))
  values[f"success@{split}"] = float(np.mean(successes))
  return values
