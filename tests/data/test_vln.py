"""R2R-style episodes on vcbench-nav: what each instruction claims is checked against the
apartment regenerated from its seed (rooms, objects, doorways) and against the path's geometry
by plain vector arithmetic; splits, determinism, the path rule and the trivial baselines."""
import functools
import math

import numpy as np
import pytest

from vcbench.data.gvue import vln
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import scenes
from vcbench.envs.nav import viewpoints as vp

APARTMENTS, PER_APARTMENT = 2, 4


@functools.lru_cache(maxsize=None)
def split_of(split, seed=0, apartments=APARTMENTS, per=PER_APARTMENT):
  return vln.make_split(split, apartments, per, seed=seed)


@functools.lru_cache(maxsize=None)
def apartment(seed):
  return scenes.generate(seed, vln.GRID_SIZE)


def cell(pos):
  return tuple(np.floor(np.asarray(pos)[::-1] / sc.CELL).astype(int))


def room_type_at(scene, pos):
  return int(scene.room_type[scene.room[cell(pos)]])


def sees(scene, pos, inst):
  """Whether some cell of `inst` within LANDMARK_RADIUS is seen from pos: 2 mm steps along the
  segment to its centre cross no wall and no other object."""
  for r, c in np.argwhere(scene.obj_inst == inst):
    target = (np.array([c, r]) + 0.5) * sc.CELL
    if np.linalg.norm(target - pos) > vln.LANDMARK_RADIUS + 1e-6:
      continue
    n = int(np.linalg.norm(target - pos) / 0.002) + 2
    pts = pos[None] + np.linspace(0, 1, n)[:, None] * (target - pos)[None]
    rc = np.floor(pts[:, ::-1] / sc.CELL).astype(int)
    inst_on = scene.obj_inst[rc[:, 0], rc[:, 1]]
    if (scene.wall[rc[:, 0], rc[:, 1]] == 0).all() and ((inst_on < 0) | (inst_on == inst)).all():
      return True
  return False


def geometric_turns(graph, path, heading):
  """Turn words from cross and dot products of consecutive directions ((x, y), y down the rows:
  a positive cross product turns clockwise on the map, to the agent's right)."""
  before = np.array([math.cos(heading), math.sin(heading)])
  words = []
  for a, b in zip(path[:-1], path[1:]):
    after = (graph.pos[b] - graph.pos[a]).astype(float)
    after /= np.linalg.norm(after)
    angle = math.degrees(math.atan2(before[0] * after[1] - before[1] * after[0], before @ after))
    words.append("straight" if abs(angle) < 35 else "around" if abs(angle) > 145
                 else "right" if angle > 0 else "left")
    before = after
  return words


def mentions(text, options):
  return any(o.lower() in text.lower() for o in options)


def assert_true_of_path(scene, g, path, heading, text, facts):
  turns = geometric_turns(g, path, heading)
  for node, room_type in facts.rooms:
    assert node in path and room_type_at(scene, g.pos[node]) == room_type
    assert mentions(text, vln.ROOM_WORDS[room_type])
  for node, inst in facts.landmarks:
    assert node in path and sees(scene, g.pos[node].astype(float), inst), (text, node, inst)
    assert mentions(text, vln.CATEGORY_WORDS[int(scene.inst_cat[inst])])
  named = dict(facts.turns)
  assert {k for k, w in enumerate(turns) if w != "straight"} <= set(named) | set(facts.by_sight)
  assert not set(named) & set(facts.by_sight)
  for leg in facts.by_sight:       # a part without its turn word names where it goes.
    end = next((k for k in sorted(set(named) | set(facts.by_sight)) if k > leg), len(turns))
    assert any(node == path[end] for node, _ in facts.rooms + facts.landmarks), (text, leg)
  for leg, word in named.items():
    assert turns[leg] == word
    assert mentions(text, vln.TURN_WORDS[word])
  kind, node, what = facts.stop
  if kind == "object":
    assert node == path[-1] and (node, what) in facts.landmarks
  elif kind == "doorway":
    doors = [d for d in vp.doorways(scene)
             if scene.room[cell(g.pos[node])] in scene.room[d[:, 0], d[:, 1]]]
    near = min(np.linalg.norm((d[:, ::-1] + 0.5) * sc.CELL - g.pos[path[-1]], axis=1).min()
               for d in doors)
    assert node in path and near <= vln.DOORWAY_RADIUS + 1e-6
    assert (node, what) in facts.rooms
  else:
    assert node == path[-1] and room_type_at(scene, g.pos[node]) == what


@pytest.mark.parametrize("split", ["train", "val_unseen"])
def test_instruction_facts_are_true_of_the_path(split):
  episodes = split_of(split)
  for i in range(len(episodes)):
    scene = apartment(episodes.seeds[int(episodes.apartment[i])])
    for text, facts in zip(episodes.instructions[i], vln.facts(episodes, i)):
      assert_true_of_path(scene, episodes.graph(i), episodes.nodes(i),
                          float(episodes.heading[i]), text, facts)


def test_every_kind_of_stop_is_true_of_the_path():
  episodes = split_of("val_unseen")
  seed = episodes.seeds[0]
  scene, g = apartment(seed), episodes.graphs[0]
  scenery = vln.Scenery(scene, g)
  rng = np.random.default_rng(0)
  kinds = set()
  for a, b in vln.candidate_pairs(g)[::7]:
    path = vp.shortest_path(g, a, b)
    heading = float(rng.uniform(-math.pi, math.pi))
    for text, facts in vln.instructions(rng, g, scenery, path, heading):
      assert_true_of_path(scene, g, path, heading, text, facts)
      kinds.add(facts.stop[0])
  assert kinds == {"room", "doorway", "object"}


def test_three_instructions_per_path_all_different():
  for split in ("train", "val_unseen"):
    episodes = split_of(split)
    for texts in episodes.instructions:
      assert len(texts) == 3 and len(set(texts)) == 3


def test_turn_words_follow_the_angle_thresholds():
  assert vln.turn_word(math.radians(20)) == "straight"
  assert vln.turn_word(math.radians(60)) == "right"
  assert vln.turn_word(math.radians(-60)) == "left"
  assert vln.turn_word(math.radians(170)) == vln.turn_word(math.radians(-170)) == "around"
  assert vln.turn_word(math.radians(350)) == "straight"


def test_seen_and_unseen_apartments_are_disjoint_and_val_seen_paths_new():
  train, seen, unseen = split_of("train"), split_of("val_seen"), split_of("val_unseen")
  assert train.seeds == seen.seeds
  assert not set(train.seeds) & set(unseen.seeds)
  assert not set(train.scans) & set(unseen.scans)
  pair = lambda e, i: (e.seeds[int(e.apartment[i])], frozenset(e.nodes(i)[::len(e.nodes(i)) - 1]))
  assert not {pair(train, i) for i in range(len(train))} & {pair(seen, i)
                                                            for i in range(len(seen))}
  for a in range(APARTMENTS):   # the partition of each apartment's pairs is exhaustive.
    graph = train.graphs[a]
    assert (set(vln._pairs_of_split("train", graph, train.seeds[a]))
            | set(vln._pairs_of_split("val_seen", graph, train.seeds[a]))
            == set(vln.candidate_pairs(graph)))


def test_splits_are_deterministic_from_the_seed():
  again = vln.make_split("val_unseen", APARTMENTS, PER_APARTMENT, seed=0)
  first = split_of("val_unseen")
  np.testing.assert_array_equal(again.path, first.path)
  np.testing.assert_array_equal(again.heading, first.heading)
  assert again.instructions == first.instructions
  other = split_of("val_unseen", seed=1)
  assert other.instructions != first.instructions
  with pytest.raises(ValueError, match="seed 1"):
    vln.facts(first, 0, seed=1)


def test_paths_are_shortest_paths_under_the_path_rule():
  for split in ("train", "val_seen", "val_unseen"):
    episodes = split_of(split)
    assert episodes.path.shape == (APARTMENTS * PER_APARTMENT, vln.MAX_EDGES + 1)
    assert len(set(episodes.path_id.tolist())) == len(episodes)
    for i in range(len(episodes)):
      g, path = episodes.graph(i), episodes.nodes(i)
      assert (episodes.path[i, len(path):] == -1).all()
      assert vln.MIN_EDGES <= len(path) - 1 <= vln.MAX_EDGES
      assert all(g.adj[a, b] for a, b in zip(path[:-1], path[1:]))
      walked = sum(np.linalg.norm(g.pos[a] - g.pos[b]) for a, b in zip(path[:-1], path[1:]))
      assert walked == pytest.approx(float(g.dist[path[0], path[-1]]), rel=1e-5)
      assert walked >= vln.MIN_LENGTH
      assert -math.pi <= episodes.heading[i] <= math.pi


def test_trivial_baselines_and_the_oracle():
  episodes = split_of("val_unseen")
  assert vln.evaluate(episodes, vln.stop_trajectories(episodes))["success_rate"] == 0.0
  oracle = vln.evaluate(episodes, [episodes.nodes(i) for i in range(len(episodes))])
  assert oracle["success_rate"] == 1.0 and oracle["spl"] == pytest.approx(1.0)
  walks = vln.random_walk_trajectories(episodes, seed=0)
  for i, walk in enumerate(walks):
    g = episodes.graph(i)
    assert walk[0] == episodes.nodes(i)[0] and len(walk) == 6   # 5 edges: the mean path.
    assert all(g.adj[a, b] for a, b in zip(walk[:-1], walk[1:]))
  result = vln.evaluate(episodes, walks, radius=100.0)
  assert result["success_rate"] == 1.0 and 0 < result["spl"] < 1
  with pytest.raises(ValueError, match="starts at"):
    vln.evaluate(episodes, [[episodes.nodes(i)[-1]] for i in range(len(episodes))])


def test_reported_baselines_on_val_unseen():
  """The module docstring's numbers: 11 val_unseen apartments, 30 episodes each (6 s)."""
  episodes = vln.make_split("val_unseen", 11, 30)
  lengths = [vp.path_length(episodes.graph(i), episodes.nodes(i)) for i in range(len(episodes))]
  assert np.mean(lengths) == pytest.approx(8.7, abs=0.05)
  assert vln.evaluate(episodes, vln.stop_trajectories(episodes))["success_rate"] == 0.0
  walks = [vln.evaluate(episodes, vln.random_walk_trajectories(episodes, seed=s))
           for s in range(10)]
  assert walks[0]["success_rate"] == pytest.approx(0.067, abs=5e-4)
  assert np.mean([w["success_rate"] for w in walks]) == pytest.approx(0.080, abs=5e-4)
  assert np.mean([w["spl"] for w in walks]) == pytest.approx(0.069, abs=5e-4)
