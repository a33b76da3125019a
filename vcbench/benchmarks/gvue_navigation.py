"""G-VUE's navigation task: R2R-style vision-language navigation with a frozen PVR.

Data: `data/gvue/vln.py`'s episodes on vcbench-nav viewpoint graphs (or R2R's own, through
`data/gvue/r2r.py`). The agent (`models/vln_agent.py`) sees each node's panorama as one vector
per view: the 12 level views rendered once per node (`viewpoints.panoramas`) and encoded by the
frozen PVR, its last-layer tokens mean-pooled, stored as float16 (`data/gvue/vln_features.py`,
which also makes and caches the splits).

World: every apartment the splits use (each once, by scan name: val_seen shares train's) is
padded to V nodes and K neighbour slots and stacked as device arrays (`make_world` ->
`vln_agent.World`), where the environment is array code, so a whole rollout of `max_steps`
decisions is one `lax.scan` (`vln_agent.rollout`) inside the jitted training epoch.

Training (imitation, as R2R's agents): the label at every step is the first move of a shortest
path from the agent's node to the goal (ties: the lowest-numbered neighbour, as
`viewpoints.shortest_path`), STOP at the goal. Each minibatch runs two rollouts, as EnvDrop and
Recurrent-VLN-BERT do (a teacher-forced one and a sampled one per iteration): teacher forcing
(the agent takes the label) and student forcing (it takes its own sampled action, or argmax;
`student_feedback`), and minimises teacher_weight * CE(teacher) + student_weight * CE(student),
each the mean over the steps taken before STOP. Where R2R's agents train the sampled rollout
by A2C, here it is imitation of the shortest-path label from wherever the sample led
(speaker-follower's student forcing): no RL. Every (path, instruction) pair is an example, as
R2R's. Optimiser: the decoders' AdamW recipe (`algos/decoder.py`), epochs as one jitted scan
with the state donated, run by `algos/runner.py`.

Evaluation: greedy (argmax) rollouts until STOP or `max_steps` moves, then `vln.evaluate`
(success within 3 m along the graph, SPL) for each of the 3 instructions, averaged, on val_unseen
("@unseen", scored by G-VUE) and val_seen ("@seen"), in percent.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from vcbench.algos import bc
from vcbench.algos import decoder as decoder_lib
from vcbench.algos import runner
from vcbench.data.gvue import vln
from vcbench.envs.nav import viewpoints as vp
from vcbench.models import vln_agent

SPLITS = {"unseen": "val_unseen", "seen": "val_seen"}   # metric suffix -> vln split.


def default_config(budget: str = "full") -> ml_collections.ConfigDict:
  """The task's settings. budget: "full" about R2R's scale (60 train apartments, 3600 paths, as
  R2R's 61 scans and 4675 paths; 770 unseen paths, R2R's 783), G-VUE's 224 px; "quick" 40 train
  apartments (1200 paths), 330 unseen paths, 64 px views, feature dropout 0.5 (with 20
  apartments and 0.3 the agent memorised its apartments: 91.7% train vs 29.5% unseen SR for
  in1k_mobilenetv2; the README has the measured times); "tiny" the smallest run, for tests."""
  c = ml_collections.ConfigDict()
  c.source = "generated"      # or "r2r": R2R's JSON, connectivity and the user's view features.
  c.r2r = ml_collections.ConfigDict({"data_dir": "", "connectivity_dir": "",
                                     "features": ""})   # features: a path with "{pvr}" in it.
  c.apartments = ml_collections.ConfigDict({"train": 60, "val_seen": 60, "val_unseen": 11})
  c.episodes = ml_collections.ConfigDict({"train": 60, "val_seen": 6, "val_unseen": 70})
  c.split_seed = 0
  c.grid_size = vln.GRID_SIZE
  c.image_size = 224          # G-VUE's input size.
  c.headings = 12
  c.max_len = 64              # instruction words (vln's are at most ~51).
  c.max_steps = 15            # decisions per episode, STOP included.
  c.model = ml_collections.ConfigDict(
      {"width": 256, "heads": 4, "text_layers": 1, "feature_dropout": 0.3})
  c.teacher_weight = 1.0
  c.student_weight = 1.0
  c.student_feedback = "sample"   # or "argmax"
  c.optim = decoder_lib.default_config()
  c.optim.update(lr=1e-3, epochs=30, batch_size=64)
  c.eval_batch = 256
  if budget == "quick":
    c.apartments.update(train=40, val_seen=40, val_unseen=11)
    c.episodes.update(train=30, val_seen=5, val_unseen=30)
    c.image_size = 64
    c.model.update(width=64, heads=2, feature_dropout=0.5)
    c.optim.update(epochs=10, batch_size=32)
  elif budget == "tiny":
    c.apartments.update(train=2, val_seen=2, val_unseen=1)
    c.episodes.update(train=8, val_seen=2, val_unseen=4)
    c.grid_size = 48            # 25-45 nodes: cheaper to render than 64-cell flats
    c.image_size = 32
    c.model.update(width=32, heads=2, feature_dropout=0.0)
    c.optim.update(epochs=2, batch_size=8)
    c.eval_batch = 32
  elif budget != "full":
    raise ValueError(f"gvue_navigation: unknown budget {budget!r}; one of full, quick, tiny.")
  return c


def make_world(graphs, views: list[np.ndarray]) -> vln_agent.World:
  """Graphs and their [V_a, H, C] view features, padded and stacked."""
  v, heads = max(len(g) for g in graphs), views[0].shape[1]
  k = max(int(g.adj.sum(1).max()) for g in graphs)
  a = len(graphs)
  nbrs, cand, head = np.full((a, v, k), -1, np.int32), np.zeros((a, v, k), np.int32), \
      np.zeros((a, v, k), np.float32)
  dist = np.full((a, v, v), np.inf, np.float32)
  for i, g in enumerate(graphs):
    dist[i, :len(g), :len(g)] = g.dist
    for n in range(len(g)):
      ids, view = vp.candidate_views(g, n, heads)
      nbrs[i, n, :len(ids)], cand[i, n, :len(ids)] = ids, view
      head[i, n, :len(ids)] = [g.heading(n, int(b)) for b in ids]
  feats = np.zeros((a, v, heads, views[0].shape[-1]), np.float16)
  for i, x in enumerate(views):
    feats[i, :len(x)] = x
  return vln_agent.World(*(jnp.asarray(x) for x in (feats, nbrs, cand, head, dist)))


# ---------------------------------------------------------------------------------------------
# Examples, training, evaluation.

def examples(episodes: vln.Episodes, apartment_index: np.ndarray, text_encoder,
             max_len: int) -> dict[str, np.ndarray]:
  """One row per (instruction k, path i), k-major: row k * N + i. apartment_index maps the
  split's apartments to the world's."""
  n, k = len(episodes), len(episodes.instructions[0])
  last = (episodes.path >= 0).sum(1) - 1
  tokens, mask = text_encoder.encode([t[j] for j in range(k) for t in episodes.instructions],
                                     max_len)
  tile = lambda x: np.tile(np.asarray(x), k)
  return {"apartment": tile(apartment_index[episodes.apartment]).astype(np.int32),
          "start": tile(episodes.path[:, 0]).astype(np.int32),
          "goal": tile(episodes.path[np.arange(n), last]).astype(np.int32),
          "heading": tile(episodes.heading).astype(np.float32),
          "text": np.asarray(tokens, np.float16), "text_mask": np.asarray(mask)}


@dataclasses.dataclass(frozen=True)
class Recipe:
  """What a training epoch computes, hashable: a static argument of the jitted epochs, so runs
  with the same recipe and shapes (the job's seeds) compile once."""
  max_steps: int
  teacher_steps: int          # decisions of the teacher-forced rollout: the longest path + STOP
  teacher_weight: float
  student_weight: float
  student_feedback: str
  num_samples: int
  total_steps: int
  optim: tuple                # decoder_lib's optimiser settings, as sorted (key, value) pairs

  @classmethod
  def of(cls, config, num_samples: int, teacher_steps: int) -> "Recipe":
    total = int(config.optim.epochs) * decoder_lib.steps_per_epoch(num_samples,
                                                                   config.optim.batch_size)
    return cls(int(config.max_steps), int(teacher_steps), float(config.teacher_weight),
               float(config.student_weight), str(config.student_feedback), int(num_samples),
               total, tuple(sorted(config.optim.to_dict().items())))

  def optimizer(self) -> optax.GradientTransformation:
    return decoder_lib.optimizer(ml_collections.ConfigDict(dict(self.optim)), self.total_steps)


def imitation_objective(recipe: Recipe, model, params, world, batch, key) -> jax.Array:
  """teacher_weight * CE(teacher-forced rollout) + student_weight * CE(student rollout), the
  instruction encoded once for both."""
  k_teacher, k_student = jax.random.split(key)
  variables = {"params": params}
  encoded = vln_agent.encode(model, variables, batch, train=True)
  teacher = vln_agent.rollout(model, variables, world, batch, k_teacher, recipe.teacher_steps,
                              "teacher", True, encoded)
  student = vln_agent.rollout(model, variables, world, batch, k_student, recipe.max_steps,
                              recipe.student_feedback, True, encoded)
  return (recipe.teacher_weight * vln_agent.imitation_loss(teacher)
          + recipe.student_weight * vln_agent.imitation_loss(student))


@functools.partial(jax.jit, static_argnums=(0, 1, 5), donate_argnums=2)
def _train_epochs(recipe: Recipe, model, state, world, data: dict, num_epochs: int):
  tx = recipe.optimizer()

  def sgd_step(state, idx):
    key = jax.random.fold_in(state.key, state.step)
    batch = {k: v[idx] for k, v in data.items()}
    value, grads = jax.value_and_grad(
        lambda p: imitation_objective(recipe, model, p, world, batch, key))(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates),
                         opt_state=opt_state, step=state.step + 1), value

  key, k = jax.random.split(state.key)
  state, losses = bc.run_epochs(sgd_step, state.replace(key=key), k, num_epochs,
                                recipe.num_samples, dict(recipe.optim)["batch_size"])
  return state, {"loss": losses}


@functools.partial(jax.jit, static_argnums=0)
def _init_params(model, key, world, batch: dict):
  obs = vln_agent.observe(world, batch["apartment"], batch["start"], batch["heading"])
  return model.init(key, batch["text"], batch["text_mask"], *obs)["params"]


class Trainer(bc.EpochTrainer):
  """The `runner` contract, one update = one epoch over `data` (`examples`) in `world`."""

  def __init__(self, config, model, world: vln_agent.World, data: dict, teacher_steps: int):
    self.config, self.model, self.world = config, model, world
    self.data = {k: jnp.asarray(v) for k, v in data.items()}
    self.recipe = Recipe.of(config, len(data["start"]), teacher_steps)
    self.num_updates = int(config.optim.epochs)

  def init(self, key) -> decoder_lib.TrainState:
    key, init_key = jax.random.split(key)
    params = _init_params(self.model, init_key, self.world,
                          {k: v[:2] for k, v in self.data.items()})
    return decoder_lib.TrainState(params=params, mutable={},
                                  opt_state=self.recipe.optimizer().init(params),
                                  step=jnp.zeros((), jnp.int32), key=key)

  def train_chunk(self, state, num_epochs: int):
    return _train_epochs(self.recipe, self.model, state, self.world, self.data, int(num_epochs))


@functools.lru_cache(maxsize=8)
def greedy_policy(model, max_steps: int) -> Callable:
  """The jitted greedy rollout `(variables, world, batch) -> rollout`'s outputs."""
  return jax.jit(lambda variables, world, batch: vln_agent.rollout(
      model, variables, world, batch, jax.random.key(0), max_steps, "argmax"))


def greedy_walks(policy: Callable, variables, world: vln_agent.World, data: dict,
                 batch_size: int) -> list[list[int]]:
  """Each example's node list from its start: `policy`'s (`greedy_policy`) decisions until STOP
  or its max_steps (the last batch padded by repeats: one compiled shape)."""
  n, walks = len(data["start"]), []
  for start in range(0, n, batch_size):
    idx = np.minimum(np.arange(start, start + batch_size), n - 1)
    batch = {k: jnp.asarray(v[idx]) for k, v in data.items()}
    out = jax.device_get(policy(variables, world, batch))
    for b in range(min(batch_size, n - start)):
      moves = out["node"][:, b][out["moved"][:, b]]
      walks.append([int(data["start"][idx[b]]), *map(int, moves)])
  return walks


def evaluate(walks: list[list[int]], episodes: vln.Episodes) -> dict[str, float]:
  """vln.evaluate of each instruction's walks (k-major rows), averaged over the instructions."""
  n = len(episodes)
  runs = [vln.evaluate(episodes, walks[k * n:(k + 1) * n]) for k in range(len(walks) // n)]
  return {m: float(np.mean([r[m] for r in runs])) for m in runs[0]}


def fit_and_evaluate(config, features_by_split: Mapping[str, dict],
                     episodes_by_split: Mapping[str, vln.Episodes], text_encoder, seed: int,
                     extra_splits: Mapping[str, str] | None = None) -> dict:
  """Trains on "train" and evaluates greedily on val_unseen, val_seen and `extra_splits`
  ({suffix: split}) -> {suffix: vln.evaluate's metrics}, with "train_loss" (per epoch)."""
  names = ["train", *SPLITS.values()]
  graphs, views, index = [], [], {}
  for s in names:                      # each apartment once: val_seen shares train's
    feats, eps = features_by_split[s], episodes_by_split[s]
    for a, scan in enumerate(eps.scans):
      if scan not in index:
        index[scan] = len(graphs)
        graphs.append(eps.graphs[a])
        views.append(np.asarray(feats["views"][a, :len(eps.graphs[a])]))
  world = make_world(graphs, views)
  data = {s: examples(episodes_by_split[s], np.array([index[x] for x in
                                                      episodes_by_split[s].scans]),
                      text_encoder, config.max_len) for s in names}
  model = vln_agent.VLNAgent(**config.model)
  # The teacher walks the longest path, then says STOP: as many decisions as its nodes.
  trainer = Trainer(config, model, world, data["train"], episodes_by_split["train"].path.shape[1])
  state, logs = runner.run(trainer, None, 1, key=jax.random.key(seed))
  variables = {"params": state.params}
  results = {"train_loss": np.asarray(logs["loss"])}
  policy = greedy_policy(model, config.max_steps)
  for suffix, split in {**SPLITS, **(extra_splits or {})}.items():
    walks = greedy_walks(policy, variables, world, data[split], config.eval_batch)
    results[suffix] = evaluate(walks, episodes_by_split[split])
  return results


def fit_and_score(config, features_by_split: Mapping[str, dict],
                  episodes_by_split: Mapping[str, vln.Episodes], text_encoder,
                  seed: int) -> dict[str, float]:
  """One seed of the task -> {"success@unseen", "spl@unseen", "success@seen", "spl@seen"} in
  percent. features_by_split / episodes_by_split: "train", "val_seen", "val_unseen"."""
  results = fit_and_evaluate(config, features_by_split, episodes_by_split, text_encoder, seed)
  return {f"{m}@{suffix}": 100.0 * results[suffix][key] for suffix in SPLITS
          for m, key in (("success", "success_rate"), ("spl", "spl"))}
