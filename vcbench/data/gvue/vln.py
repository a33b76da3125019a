"""R2R-style vision-language navigation (G-VUE's navigation task) on vcbench-nav apartments.

R2R runs on MatterSim, which does not install here; this builds the same task on vcbench-nav:
the agent stands on a viewpoint graph (`viewpoints.build`) of an apartment, reads an English
instruction describing a shortest path, moves node to node and stops. Success: the stop node is
less than `radius` metres (R2R: 3 m) from the goal along the graph, as R2R's eval measures it;
SPL weights success by shortest / max(shortest, walked).

Splits (as R2R's): "train" and "val_seen" paths run in the nav generator's train apartments,
"val_unseen" in its val apartments and "test" in its test apartments, so unseen apartments are
never seen in training. val_seen's paths are new: each seen apartment's start/goal pairs are
split once, by a function of the apartment alone, so train and val_seen never share a pair.

Apartments are GRID_SIZE = 64 cells (16 m) across (the generator allows 16..128): a 32-cell
(8 m) flat lies within two 3 m success discs, and 48-cell flats leave 4% of their floor without a
node (viewpoints.py's measurements); 64-cell graphs have 55-88 nodes, edges 1.74 m on average.

Paths follow R2R's rule: shortest paths of 4-6 edges (5-7 viewpoints) and at least 5 m. On
val_unseen (11 apartments, 30 episodes each) they are 8.7 m long on average (5th-95th percentile
6.0-11.2 m) with 5.0 edges (R2R's average about 10 m). Trivial baselines there, radius 3 m:
stopping at the start succeeds 0% (every goal is 5 m or more away); a random walk of the
average path's 5 edges (never straight back unless at a dead end) 8.0% (SPL 0.069; mean of 10
walk seeds, standard deviation 1.1 points; seed 0: 6.7%). R2R's random agent: about 16%.

Instructions (3 per path, as R2R's): the path cut into legs between nodes; each leg's turn
relative to the current heading (the start heading for the first) is "straight" under 35
degrees, "around" over 145, else "left"/"right" (positive = right, the graph's frame);
consecutive straight legs merge. Each part names its turn, the room it enters ("into the
kitchen", "out of the bedroom"), and maybe a landmark (an object within LANDMARK_RADIUS of one
of its nodes and seen from there: no wall or other object on the segment from the node's cell
to one of the object's cells). A part with a destination in sight (a room it enters, or an
object seen from its last node: "walk towards the sofa") says its turn only with probability
TURN_WORD_SHARE, else only the destination: the agent must find it in the views, as R2R's
"walk into the kitchen" asks (with every turn spelled out, a blind agent that counts turns
succeeds as often as one that sees: 38.7% vs 36.7% SR on val_unseen at the quick budget). Then a
stop: next to an object near the goal, in the doorway of
a room on the path, or in the goal's room. Words come from nav_text (categories, rooms,
attributes), with synonyms and templates drawn by a seeded rng; `Facts` lists what an
instruction claims, for checking against the path.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import jax
import numpy as np

from vcbench.data.gvue import nav_text as tx
from vcbench.data.gvue import nav_views
from vcbench.data.gvue.nav_views import scene_name
from vcbench.envs import nav
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import viewpoints as vp

GRID_SIZE = 64
SUCCESS_RADIUS = 3.0      # metres along the graph (R2R's error margin).
MIN_EDGES, MAX_EDGES = 4, 6
MIN_LENGTH = 5.0          # metres.
LANDMARK_RADIUS = 1.5     # metres from a path node to an object's nearest cell centre.
DOORWAY_RADIUS = 1.0      # metres from the goal to a doorway cell, for "wait in the doorway".
STRAIGHT, AROUND = math.radians(35), math.radians(145)
TURN_WORD_SHARE = 0.25    # of the parts with a destination in sight that still say their turn.
VAL_SEEN_SHARE = 0.15     # of each seen apartment's start/goal pairs.
INSTRUCTIONS = 3
GENERATOR_VERSION = 2     # part of cache keys: bump it when the episodes made here change.
SOURCE = {"train": "train", "val_seen": "train", "val_unseen": "val", "test": "test"}
_PARTITION = 7919         # spawn key of the rng that splits a seen apartment's pairs.

# nav_text's names first, then synonyms.
ROOM_WORDS = {k: (name, *more) for k, (name, more) in enumerate(zip(tx.ROOM, (
    ("lounge",), (), (), ("restroom",), ("hallway", "hall"), ("study",))))}
CATEGORY_WORDS = {k: (tx.CATEGORY[k], *more) for k, more in (
    (1, ()), (2, ()), (3, ("potted plant",)), (4, ()), (5, ("television",)), (6, ("couch",)))}
TURN_WORDS = {"left": ("turn left", "take a left", "go left", "make a left"),
              "right": ("turn right", "take a right", "go right", "make a right"),
              "around": ("turn around", "turn back", "face the other way"),
              "straight": ("walk straight ahead", "go straight", "walk forward", "head forward")}
MOVES = ("walk", "go", "head", "continue")
STOPS = {"object": ("stop next to the {}", "wait by the {}", "stop beside the {}"),
         "doorway": ("wait in the doorway of the {}", "stop in the doorway of the {}"),
         "room": ("stop in the {}", "wait in the {}", "stop once you are in the {}")}


@dataclasses.dataclass(frozen=True, eq=False)
class Episodes:
  """One split: per episode its apartment, path, start heading and instructions.

  apartment:    int32 [N] index into graphs / scans.
  path:         int32 [N, max_len] node indices, padded with -1.
  heading:      float32 [N] start heading, radians in the graph's frame.
  instructions: N tuples of INSTRUCTIONS strings.
  path_id:      int64 [N] unique path ids (R2R's, or apartment seed * 100000 + start * 300 +
                goal here).
  graphs, scans: per apartment its viewpoint graph and name; seeds: its nav generator seed
                (-1 for Matterport scans); grid_size: the apartments' grid (0 for Matterport).
  """
  split: str
  apartment: np.ndarray
  path: np.ndarray
  heading: np.ndarray
  instructions: tuple[tuple[str, ...], ...]
  path_id: np.ndarray
  graphs: tuple[vp.Graph, ...]
  scans: tuple[str, ...]
  seeds: tuple[int, ...]
  grid_size: int

  def __len__(self) -> int:
    return len(self.apartment)

  def nodes(self, i: int) -> list[int]:
    return [int(n) for n in self.path[i] if n >= 0]

  def graph(self, i: int) -> vp.Graph:
    return self.graphs[int(self.apartment[i])]


@dataclasses.dataclass(frozen=True)
class Facts:
  """What one instruction claims. rooms: (path node, room type) for each room it names;
  landmarks: (path node, instance) for each object it names; turns: (leg, word) for each turn
  it names; by_sight: the first leg of each part given by its destination alone (the room it
  enters or an object seen from its last node) instead of a turn word; stop: (kind, path node,
  room type or instance)."""
  rooms: tuple[tuple[int, int], ...]
  landmarks: tuple[tuple[int, int], ...]
  turns: tuple[tuple[int, str], ...]
  by_sight: tuple[int, ...]
  stop: tuple[str, int, int]


def turn_word(angle: float) -> str:
  a = (angle + math.pi) % (2 * math.pi) - math.pi
  return ("straight" if abs(a) < STRAIGHT else "around" if abs(a) > AROUND
          else "right" if a > 0 else "left")


def leg_turns(graph: vp.Graph, path: list[int], heading: float) -> list[str]:
  """The turn word of each leg of `path` (the first relative to the start heading)."""
  headings = [heading] + [graph.heading(a, b) for a, b in zip(path[:-1], path[1:])]
  return [turn_word(h1 - h0) for h0, h1 in zip(headings[:-1], headings[1:])]


class Scenery:
  """What instructions may mention in one apartment: room types, objects seen near each node,
  the nodes next to a doorway (and the doorway's rooms)."""

  def __init__(self, scene: sc.Scene, graph: vp.Graph):
    scene = jax.tree.map(np.asarray, scene)
    self.room_type = scene.room_type
    self.category, self.material = scene.inst_cat, scene.inst_mat
    cells = np.floor(graph.pos[:, ::-1] / sc.CELL).astype(int)
    self.near = [self._seen_objects(scene, c) for c in cells]
    doors = [(d, set(scene.room[d[:, 0], d[:, 1]].tolist())) for d in vp.doorways(scene)]
    self.doorway = [tuple(sorted(set().union(*[rooms for d, rooms in doors if
                                               np.linalg.norm(d - c, axis=1).min() * sc.CELL
                                               <= DOORWAY_RADIUS]))) for c in cells]

  @staticmethod
  def _seen_objects(scene, cell) -> list[int]:
    out = []
    for inst in np.flatnonzero(scene.inst_cat > 0):
      foot = np.argwhere(scene.obj_inst == inst)
      close = np.linalg.norm(foot - cell, axis=1) * sc.CELL <= LANDMARK_RADIUS
      see = (scene.wall == 0) & ((scene.obj_inst < 0) | (scene.obj_inst == inst))
      starts = np.repeat(cell[None], close.sum(), 0)
      if close.any() and vp.segment_clear(see, starts, foot[close]).any():
        out.append(int(inst))
    return out


def instruction(rng: np.random.Generator, graph: vp.Graph, scenery: Scenery, path: list[int],
                heading: float) -> tuple[str, Facts]:
  """One instruction for `path` from `heading`, and the facts it states."""
  turns = leg_turns(graph, path, heading)
  starts = [0] + [k for k in range(1, len(turns)) if turns[k] != "straight"]
  pick = lambda options: options[int(rng.integers(len(options)))]
  room_of = lambda node: int(scenery.room_type[graph.room[node]])
  rooms, landmarks, said, sentences, named, goals = [], [], set(), [], [], []

  def landmark(node) -> str:
    inst = _landmark(rng, scenery, node, said)
    if inst < 0:
      return ""
    landmarks.append((node, inst))
    return _object_words(rng, scenery, inst)

  for s, e in zip(starts, starts[1:] + [len(turns)]):
    enters = graph.room[path[e]] != graph.room[path[s]]
    ahead = "" if enters or rng.random() < TURN_WORD_SHARE else landmark(path[e])
    by_sight = ahead or (enters and rng.random() >= TURN_WORD_SHARE)
    if by_sight:          # the direction is only in what the agent sees: no turn word.
      goals.append(s)
      text = pick(MOVES)
    else:
      named.append((s, turns[s]))
      text = pick(TURN_WORDS[turns[s]])
      if s > 0 and rng.random() < 0.5 and (thing := landmark(path[s])):
        text += f" at the {thing}"
      if turns[s] != "straight":
        text += f" and {pick(MOVES)}"
    if ahead:
      text += f" towards the {ahead}"
    elif enters:
      same = room_of(path[e]) == room_of(path[s])   # "into another bedroom", not "out of".
      if not same and rng.random() < 0.4:
        rooms.append((path[s], room_of(path[s])))
        text += f" out of the {pick(ROOM_WORDS[room_of(path[s])])}"
      rooms.append((path[e], room_of(path[e])))
      text += f" into {'another' if same else 'the'} {pick(ROOM_WORDS[room_of(path[e])])}"
    elif turns[s] != "straight":
      text += " " + pick(("forward", "ahead", "on"))
    inner = [n for n in path[s + 1:e] if scenery.near[n]]
    if inner and rng.random() < 0.7 and (thing := landmark(pick(inner))):
      text += f" past the {thing}"
    sentences.append(text)
  stop, words = _stop(rng, graph, scenery, path, said)
  (rooms if stop[0] != "object" else landmarks).append(stop[1:])
  sentences.append(words)
  text = " ".join(tx.capitalised(s) + "." for s in sentences)
  return text, Facts(rooms=tuple(rooms), landmarks=tuple(landmarks),
                     turns=tuple(named), by_sight=tuple(goals), stop=stop)


def _landmark(rng, scenery: Scenery, node: int, said: set) -> int:
  """An object seen near `node` not yet named, -1 if none (so each is named once)."""
  options = [i for i in scenery.near[node] if i not in said]
  if not options:
    return -1
  inst = options[int(rng.integers(len(options)))]
  said.add(inst)
  return inst


def _object_words(rng, scenery: Scenery, inst: int) -> str:
  cat, mat = int(scenery.category[inst]), int(scenery.material[inst])
  noun = CATEGORY_WORDS[cat][int(rng.integers(len(CATEGORY_WORDS[cat])))]
  return f"{tx.ATTRIBUTES[mat]} {noun}" if mat in tx.ATTRIBUTES and rng.random() < 0.4 else noun


def _stop(rng, graph, scenery, path, said) -> tuple[tuple[str, int, int], str]:
  """The stop fact and its words: by an object seen from the goal, in the doorway of a path room
  near the goal, or in the goal's room (objects and doorways twice as likely where there)."""
  goal = path[-1]
  kinds = ["room"]
  on_path = {int(graph.room[n]) for n in path}
  door_rooms = [r for r in scenery.doorway[goal] if r in on_path]
  kinds += ["doorway"] * 2 * bool(door_rooms) + ["object"] * 2 * bool(scenery.near[goal])
  kind = kinds[int(rng.integers(len(kinds)))]
  template = STOPS[kind][int(rng.integers(len(STOPS[kind])))]
  if kind == "object":
    inst = _landmark(rng, scenery, goal, said)
    if inst >= 0:
      return ("object", goal, inst), template.format(_object_words(rng, scenery, inst))
    kind, template = "room", STOPS["room"][0]
  if kind == "doorway":
    room = door_rooms[int(rng.integers(len(door_rooms)))]
    node = next(n for n in path if graph.room[n] == room)
  else:
    room, node = int(graph.room[goal]), goal
  room_type = int(scenery.room_type[room])
  words = ROOM_WORDS[room_type][int(rng.integers(len(ROOM_WORDS[room_type])))]
  return (kind, node, room_type), template.format(words)


def instructions(rng, graph, scenery, path, heading, count: int = INSTRUCTIONS):
  """`count` differently worded instructions and their facts (redrawn until they differ)."""
  out = {}
  for _ in range(20 * count):
    text, facts = instruction(rng, graph, scenery, path, heading)
    out.setdefault(text, facts)
    if len(out) == count:
      break
  if len(out) < count:
    raise ValueError(f"instructions: only {len(out)} distinct wordings of path {path}.")
  return list(out.items())


# ---------------------------------------------------------------------------------------------
# Splits.

def candidate_pairs(graph: vp.Graph, min_edges=MIN_EDGES, max_edges=MAX_EDGES,
                    min_length=MIN_LENGTH) -> list[tuple[int, int]]:
  """Unordered node pairs (a < b) whose shortest path meets the path rule."""
  out = []
  for a, b in zip(*np.nonzero(np.triu(graph.dist >= min_length, 1))):
    edges = len(vp.shortest_path(graph, int(a), int(b))) - 1
    if min_edges <= edges <= max_edges:
      out.append((int(a), int(b)))
  return out


def _pairs_of_split(split, graph, seed_of_apartment) -> list[tuple[int, int]]:
  pairs = candidate_pairs(graph)
  rng = np.random.default_rng(np.random.SeedSequence(seed_of_apartment, spawn_key=(_PARTITION,)))
  held = rng.random(len(pairs)) < VAL_SEEN_SHARE
  if split == "val_seen":
    return [p for p, h in zip(pairs, held) if h]
  return [p for p, h in zip(pairs, held) if not h] if split == "train" else pairs


def make_split(split: str, num_apartments: int, episodes_per_apartment: int, seed: int = 0,
               grid_size: int = GRID_SIZE) -> Episodes:
  """`episodes_per_apartment` episodes in each of the first `num_apartments` apartments of the
  split's source (see the module docstring); a function of its arguments."""
  if split not in SOURCE:
    raise ValueError(f"make_split: unknown split {split!r}; valid: {sorted(SOURCE)}.")
  scenes = nav.scene_pool(SOURCE[split], num_apartments, grid_size, nav_views.OBJECTS)
  seeds = [int(s) for s in nav.scene_gen.split_seeds(SOURCE[split], num_apartments)]
  graphs, rows = [], []
  for a, apartment_seed in enumerate(seeds):
    scene = jax.tree.map(lambda x: x[a], scenes)
    graph = vp.build(scene)
    graphs.append(graph)
    scenery = Scenery(scene, graph)
    pairs = _pairs_of_split(split, graph, apartment_seed)
    if len(pairs) < episodes_per_apartment:
      raise ValueError(f"make_split: apartment {apartment_seed} has {len(pairs)} {split} paths, "
                       f"{episodes_per_apartment} asked for.")
    rng = np.random.default_rng(np.random.SeedSequence([seed, apartment_seed]))
    for k in rng.permutation(len(pairs))[:episodes_per_apartment]:
      start, goal = pairs[k] if rng.random() < 0.5 else pairs[k][::-1]
      path = vp.shortest_path(graph, start, goal)
      heading, said = _episode(seed, apartment_seed, graph, scenery, path)
      rows.append((a, path, heading, tuple(t for t, _ in said),
                   apartment_seed * 100_000 + start * 300 + goal))
  width = MAX_EDGES + 1
  return Episodes(
      split=split, apartment=np.array([r[0] for r in rows], np.int32),
      path=np.array([r[1] + [-1] * (width - len(r[1])) for r in rows], np.int32),
      heading=np.array([r[2] for r in rows], np.float32),
      instructions=tuple(r[3] for r in rows), path_id=np.array([r[4] for r in rows], np.int64),
      graphs=tuple(graphs), scans=tuple(scene_name(s) for s in seeds), seeds=tuple(seeds),
      grid_size=grid_size)


def _episode(seed, apartment_seed, graph, scenery, path):
  """The start heading and the (instruction, facts) of a path, from an rng of its own."""
  rng = np.random.default_rng(np.random.SeedSequence([seed, apartment_seed, path[0], path[-1]]))
  heading = float(np.float32(rng.uniform(-math.pi, math.pi)))
  return heading, instructions(rng, graph, scenery, path, heading)


def facts(episodes: Episodes, i: int, seed: int = 0) -> list[Facts]:
  """The facts of episode i's instructions (of a split made with `seed`), by regenerating them
  from the apartment's seed."""
  a = int(episodes.apartment[i])
  scene = nav.scene_gen.generate(episodes.seeds[a], episodes.grid_size, nav_views.OBJECTS)
  graph = episodes.graphs[a]
  heading, said = _episode(seed, episodes.seeds[a], graph, Scenery(scene, graph),
                           episodes.nodes(i))
  if tuple(t for t, _ in said) != episodes.instructions[i] or heading != episodes.heading[i]:
    raise ValueError(f"facts: episode {i} was not made with seed {seed}.")
  return [f for _, f in said]


# ---------------------------------------------------------------------------------------------
# Metrics and trivial baselines.

def evaluate(episodes: Episodes, trajectories, radius: float = SUCCESS_RADIUS) -> dict:
  """R2R's metrics of one trajectory (node list from the start) per episode: success rate,
  SPL, navigation error (m), oracle success rate, length walked (m)."""
  if len(trajectories) != len(episodes):
    raise ValueError(f"evaluate: {len(trajectories)} trajectories for {len(episodes)} episodes.")
  rows = []
  for i, walk in enumerate(trajectories):
    g, path = episodes.graph(i), episodes.nodes(i)
    if int(walk[0]) != path[0]:
      raise ValueError(f"evaluate: trajectory {i} starts at {walk[0]}, not at {path[0]}.")
    error = float(g.dist[int(walk[-1]), path[-1]])
    shortest = float(g.dist[path[0], path[-1]])
    walked = vp.path_length(g, walk)
    success = error < radius
    rows.append((success, success * shortest / max(shortest, walked), error,
                 min(float(g.dist[int(n), path[-1]]) for n in walk) < radius, walked))
  sr, spl, ne, osr, length = np.mean(np.array(rows, np.float64), axis=0)
  return dict(success_rate=sr, spl=spl, nav_error=ne, oracle_success_rate=osr, length=length)


def stop_trajectories(episodes: Episodes) -> list[list[int]]:
  return [[episodes.nodes(i)[0]] for i in range(len(episodes))]


def random_walk_trajectories(episodes: Episodes, steps: Optional[int] = None,
                             seed: int = 0) -> list[list[int]]:
  """Random walks of `steps` edges (default: the split's average path), never straight back
  unless at a dead end."""
  if steps is None:
    steps = int(round(np.mean([len(episodes.nodes(i)) - 1 for i in range(len(episodes))])))
  rng = np.random.default_rng(seed)
  out = []
  for i in range(len(episodes)):
    g, walk = episodes.graph(i), [episodes.nodes(i)[0]]
    for _ in range(steps):
      options = [int(n) for n in g.neighbours(walk[-1]) if len(walk) < 2 or n != walk[-2]]
      options = options or [walk[-2]]
      walk.append(options[int(rng.integers(len(options)))])
    out.append(walk)
  return out
