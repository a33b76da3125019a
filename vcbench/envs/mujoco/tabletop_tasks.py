"""Language-conditioned tabletop tasks in CLIPort's spirit, their goals, reward and oracle.

Each task lays out a scene from a seed, states its goal as a sequence of steps (one instruction
each) and scores an episode as Ravens does (`Episode.reward`): a step's objects each earn
`max_reward / len(objects)` when they match a target -- xy within `pos_eps` and, for objects
with a rotational symmetry, yaw within 15 degrees modulo it -- and the steps' rewards sum to 1
(the "score", reported x100). An episode succeeds when every step is complete.

Splits as CLIPort's: `seen` draws the task colours from CLIPort's training colours, `unseen`
from its evaluation colours (three of which are shared: blue, red, green); the two splits use
disjoint seed streams. Distractors take any colour the instruction does not name, as CLIPort's.

The oracle (`oracle_action`) is Ravens': for the current step, the unmatched object farthest
from its nearest target is picked at its centre and placed on that target, turned by the
smallest rotation its symmetry allows. Actions reach the simulator through pixels and one of
`n_rotations` angles (`Action.discretised`), as a learned affordance policy's do.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from vcbench.envs.mujoco import tabletop as tt
from vcbench.registry import Registry

# CLIPort's colours (its Tableau palette) and its training / evaluation colour lists.
COLOURS: dict[str, tuple[float, float, float]] = {
    "blue": (78, 121, 167), "red": (255, 87, 89), "green": (89, 169, 79),
    "orange": (242, 142, 43), "yellow": (237, 201, 72), "purple": (176, 122, 161),
    "pink": (255, 157, 167), "cyan": (118, 183, 178), "brown": (156, 117, 95),
    "white": (255, 255, 255), "gray": (186, 176, 172)}
COLOURS = {k: tuple(c / 255 for c in v) for k, v in COLOURS.items()}
SPLIT_COLOURS = {"seen": ("blue", "red", "green", "yellow", "brown", "gray", "cyan"),
                 "unseen": ("blue", "red", "green", "orange", "purple", "pink", "white")}
SPLITS = tuple(SPLIT_COLOURS)
ROT_EPS = math.radians(15)
N_ROTATIONS = 36


@dataclasses.dataclass(frozen=True)
class Action:
  """Pick at `pick` (xy), place at `place` (xy), turning the object by `rotation` (rad)."""
  pick: tuple[float, float]
  place: tuple[float, float]
  rotation: float

  def discretised(self, workspace: tt.Workspace, n_rotations: int = N_ROTATIONS
                  ) -> tuple[tuple[int, int], tuple[int, int], int]:
    """(pick pixel, place pixel, rotation bin) as an affordance policy outputs them."""
    k = round(self.rotation / (2 * math.pi / n_rotations)) % n_rotations
    return workspace.pixel(self.pick), workspace.pixel(self.place), k

  @classmethod
  def from_pixels(cls, workspace: tt.Workspace, pick, place, k: int,
                  n_rotations: int = N_ROTATIONS) -> "Action":
    return cls(tuple(workspace.position(pick)), tuple(workspace.position(place)),
               2 * math.pi * k / n_rotations)


@dataclasses.dataclass(frozen=True)
class Target:
  xy: tuple[float, float]
  yaw: float


@dataclasses.dataclass
class Goal:
  """One step of a task, as Ravens' goal tuples: objects, which targets each may take, the
  targets, and the step's share of the reward."""
  objects: tuple[str, ...]
  symmetry: tuple[float, ...]       # Per object; 0: rotation does not count.
  matches: np.ndarray               # bool [objects, targets]
  targets: tuple[Target, ...]
  instruction: str
  max_reward: float
  pos_eps: float = 0.01
  replace: bool = False
  zone: tuple[float, float] | None = None   # Half sizes: Ravens' zone metric, not poses.


@dataclasses.dataclass(frozen=True)
class Layout:
  parts: tuple[tt.Part, ...]
  goals: tuple[Goal, ...]
  max_steps: int
  done_instruction: str


@dataclasses.dataclass(frozen=True)
class Task:
  name: str
  layout: Callable[[np.random.Generator, tuple[str, ...], tt.Workspace], Layout]
  split_items: dict[str, tuple[str, ...]]    # What seen and unseen differ in (colours, shapes).


TASKS = Registry("tabletop task")


def _angle_diff(a: float, b: float, symmetry: float) -> float:
  if symmetry <= 0:
    return 0.0
  d = abs(a - b) % symmetry
  return min(d, symmetry - d)


def is_match(xy, yaw: float, target: Target, symmetry: float, pos_eps: float) -> bool:
  return (math.dist(xy[:2], target.xy) < pos_eps
          and _angle_diff(yaw, target.yaw, symmetry) < ROT_EPS)


class Episode:
  """A task instance: the simulator, the remaining goal steps and Ravens' reward bookkeeping."""

  def __init__(self, task: str, split: str, seed: int,
               workspace: tt.Workspace = tt.Workspace(), render: bool = True):
    if split not in SPLITS:
      raise ValueError(f"tabletop split {split!r}: expected one of {SPLITS}.")
    self.task, self.split, self.seed = TASKS.get(task), split, seed
    rng = np.random.default_rng([SPLITS.index(split), seed])
    layout = self.task.layout(rng, self.task.split_items[split], workspace)
    self.goals = list(layout.goals)
    self.max_steps, self.done_instruction = layout.max_steps, layout.done_instruction
    self.sim = tt.TabletopSim(layout.parts, workspace, render=render)
    self._points = {p.name: tt.flat_points(p) for p in layout.parts if p.movable}
    # Where the oracle's cup takes each object: its first geom (on top; a ring's centre is a hole).
    self.grasp = {p.name: np.array(p.geoms[0].pos[:2]) for p in layout.parts if p.movable}
    self.progress = 0.0     # Reward of the completed steps.
    self.total = 0.0        # Cumulative reward returned so far.
    self.steps = 0

  @property
  def workspace(self) -> tt.Workspace:
    return self.sim.workspace

  @property
  def instruction(self) -> str:
    return self.goals[0].instruction if self.goals else self.done_instruction

  @property
  def done(self) -> bool:
    return not self.goals or self.total > 0.99 or self.steps >= self.max_steps

  @property
  def success(self) -> bool:
    return not self.goals or self.total > 0.99

  def matched(self, goal: Goal) -> np.ndarray:
    """bool [objects]: each object sits on one of its allowed targets."""
    out = np.zeros(len(goal.objects), bool)
    for i, (name, sym) in enumerate(zip(goal.objects, goal.symmetry)):
      pos, yaw = self.sim.pose(name)
      out[i] = any(is_match(pos, yaw, goal.targets[j], sym, goal.pos_eps)
                   for j in np.flatnonzero(goal.matches[i]))
    return out

  def in_zone(self, goal: Goal) -> float:
    """Ravens' zone metric: the fraction of the objects' footprint points inside the zone
    (one target: its pose and half sizes)."""
    zone, inside, total = goal.targets[0], 0, 0
    for name in goal.objects:
      pos, yaw = self.sim.pose(name)
      pts = _rotate(self._points[name], yaw) + pos[:2] - np.asarray(zone.xy)
      local = _rotate(pts, -zone.yaw)
      inside += int(np.sum(np.all(np.abs(local) < goal.zone, axis=1)))
      total += len(local)
    return inside / total

  def reward(self) -> float:
    """The reward since the last call (Ravens' delta reward); advances a completed step."""
    if not self.goals:
      return 0.0
    goal = self.goals[0]
    fraction = (self.in_zone(goal) if goal.zone is not None
                else float(self.matched(goal).mean()))
    step_reward = goal.max_reward * fraction
    delta = self.progress + step_reward - self.total
    self.total = self.progress + step_reward
    if abs(goal.max_reward - step_reward) < 0.01:
      self.progress += goal.max_reward
      self.goals.pop(0)
    return delta

  def step(self, action: Action, n_rotations: int = N_ROTATIONS) -> float:
    """Executes `action` through its pixels and rotation bin; returns the delta reward."""
    pick, place, k = action.discretised(self.workspace, n_rotations)
    a = Action.from_pixels(self.workspace, pick, place, k, n_rotations)
    self.sim.pick_place(a.pick, a.place, a.rotation)
    self.steps += 1
    return self.reward()

  def close(self) -> None:
    self.sim.close()


def _rotate(xy: np.ndarray, angle: float) -> np.ndarray:
  c, s = math.cos(angle), math.sin(angle)
  return np.asarray(xy) @ np.array([[c, s], [-s, c]])


def oracle_action(ep: Episode) -> Action | None:
  """Ravens' oracle for the current step (None when nothing is left to move or visible)."""
  if not ep.goals:
    return None
  goal = ep.goals[0]
  matches = goal.matches.copy()
  if not goal.replace and goal.zone is None:
    for i in np.flatnonzero(ep.matched(goal)):
      pos, yaw = ep.sim.pose(goal.objects[i])
      taken = [j for j in np.flatnonzero(matches[i])
               if is_match(pos, yaw, goal.targets[j], goal.symmetry[i], goal.pos_eps)]
      matches[i, :] = False
      matches[:, taken] = False
  candidates = []
  for i, name in enumerate(goal.objects):
    pos, _ = ep.sim.pose(name)
    js = np.flatnonzero(matches[i])
    if len(js):
      d = [math.dist(pos[:2], goal.targets[j].xy) for j in js]
      candidates.append((min(d), i, js[int(np.argmin(d))]))
  for dist, i, j in sorted(candidates, reverse=True):
    if dist == 0.0:
      continue
    name, target = goal.objects[i], goal.targets[j]
    pos, yaw = ep.sim.pose(name)
    pick = pos[:2] + _rotate(ep.grasp[name], yaw)
    if ep.sim.part_at(pick)[0] != name:     # Covered: the cup would take what is on top.
      continue
    sym = goal.symmetry[i] or 2 * math.pi  # Ravens turns even a symmetric object to its target.
    rotation = (target.yaw - yaw) % sym
    rotation = rotation - sym if rotation > sym / 2 else rotation
    place = np.asarray(target.xy) - _rotate(pos[:2] - pick, rotation)
    return Action(tuple(map(float, pick)), tuple(map(float, place)), rotation % (2 * math.pi))
  return None


def run_episode(task: str, split: str, seed: int, policy=oracle_action,
                workspace: tt.Workspace = tt.Workspace(), n_rotations: int = N_ROTATIONS
                ) -> dict:
  """Runs `policy(episode) -> Action | None` to the end; Ravens' score and success."""
  ep = Episode(task, split, seed, workspace, render=False)
  try:
    while not ep.done:
      action = policy(ep)
      if action is None:
        break
      ep.step(action, n_rotations)
    return {"score": ep.total, "success": ep.success, "steps": ep.steps}
  finally:
    ep.close()


# ----------------------------------------------------------------------------- layouts
def free_xy(rng: np.random.Generator, placed: list, radius: float, ws: tt.Workspace,
            tries: int = 1000, required: bool = True) -> tuple[float, float] | None:
  """A table point at least `radius` inside the workspace and clear of `placed` (xy, r);
  None when there is no room and the object is not `required` (a distractor)."""
  for _ in range(tries):
    xy = (rng.uniform(ws.x[0] + radius, ws.x[1] - radius),
          rng.uniform(ws.y[0] + radius, ws.y[1] - radius))
    if all(math.dist(xy, p) > radius + r + 0.01 for p, r in placed):
      placed.append((xy, radius))
      return xy
  if not required:
    return None
  raise RuntimeError(f"no free spot of radius {radius} m on the table after {tries} tries.")


BLOCK_RADIUS, BOWL_RADIUS = 0.02 * math.sqrt(2), 0.065   # Footprints (m).


def _put_block_in_bowl(rng, colours, ws) -> Layout:
  n_bowls = int(rng.integers(1, 4))
  n_blocks = int(rng.integers(1, n_bowls + 1))
  pick_colour, place_colour = rng.choice(colours, 2, replace=False)
  placed, parts = [], []
  bowls = []
  for k in range(n_bowls):
    xy = free_xy(rng, placed, BOWL_RADIUS, ws)
    parts.append(tt.bowl(f"bowl{k}", COLOURS[place_colour], xy))
    bowls.append(Target(xy, 0.0))
  blocks = []
  for k in range(n_blocks):
    xy = free_xy(rng, placed, BLOCK_RADIUS, ws)
    parts.append(tt.block(f"block{k}", COLOURS[pick_colour], xy, rng.uniform(0, 2 * math.pi)))
    blocks.append(f"block{k}")
  others = [c for c in COLOURS if c not in (pick_colour, place_colour)]
  for k in range(6):
    is_block = rng.random() > 0.5
    colour = COLOURS[others[k % len(others)]]
    xy = free_xy(rng, placed, BLOCK_RADIUS if is_block else BOWL_RADIUS, ws, required=False)
    if xy is None:
      continue
    parts.append(tt.block(f"distractor{k}", colour, xy, rng.uniform(0, 2 * math.pi))
                 if is_block else tt.bowl(f"distractor{k}", colour, xy))
  goal = Goal(tuple(blocks), (0.0,) * n_blocks, np.ones((n_blocks, n_bowls), bool),
              tuple(bowls), f"put the {pick_colour} blocks in a {place_colour} bowl", 1.0,
              pos_eps=0.05)
  return Layout(tuple(parts), (goal,), n_blocks + 1, "done placing blocks in bowls.")


STAND_SHADES = (("lightest", 1.25), ("middle", 1.0), ("darkest", 0.75))
PYRAMID = ((0, -0.05), (0, 0), (0, 0.05), (0, -0.025), (0, 0.025), (0, 0))   # Stand frame.


def _stand(name: str, xy, yaw: float) -> tt.Part:
  """The pyramid's base: three 5 cm squares in three shades of brown along its y axis."""
  brown = np.array(COLOURS["brown"])
  geoms = tuple(tt.Geom("box", (0.025, 0.025, 0.0025), (0.0, dy, 0.0025),
                        rgb=tuple(np.clip(brown * shade, 0, 1)))
                for dy, (_, shade) in zip((-0.05, 0.0, 0.05), STAND_SHADES))
  return tt.Part(name, geoms, tuple(brown), False, (xy[0], xy[1], 0.0), yaw, "stand")


def _stack_block_pyramid_seq(rng, colours, ws) -> Layout:
  placed = []
  base_yaw = float(rng.uniform(0, 2 * math.pi))
  base_xy = free_xy(rng, placed, 0.16 / 2 * 1.1, ws)
  parts = [_stand("stand", base_xy, base_yaw)]
  names = list(rng.permutation(colours))[:6]
  c, s = math.cos(base_yaw), math.sin(base_yaw)
  targets = [Target((base_xy[0] + c * dx - s * dy, base_xy[1] + s * dx + c * dy), base_yaw)
             for dx, dy in PYRAMID]
  blocks = []
  for k, colour in enumerate(names):
    xy = free_xy(rng, placed, BLOCK_RADIUS, ws)
    parts.append(tt.block(f"block{k}", COLOURS[colour], xy, rng.uniform(0, 2 * math.pi)))
    blocks.append(f"block{k}")
  places = [f"the {shade} brown block" for shade, _ in STAND_SHADES] + [
      f"the {names[0]} and {names[1]} blocks", f"the {names[1]} and {names[2]} blocks",
      f"the {names[3]} and {names[4]} blocks"]
  goals = tuple(Goal((blocks[k],), (math.pi / 2,), np.ones((1, 1), bool), (targets[k],),
                     f"put the {names[k]} block on {places[k]}", 1 / 6) for k in range(6))
  return Layout(tuple(parts), goals, 12, "done stacking block pyramid.")


SHAPE_HALF_HEIGHT = 0.01


def _bar(cx, cy, hx, hy, yaw=0.0) -> tt.Geom:
  return tt.Geom("box", (hx, hy, SHAPE_HALF_HEIGHT), (cx, cy, 0.0), yaw)


def _disc(cx, cy, r) -> tt.Geom:
  return tt.Geom("cylinder", (r, SHAPE_HALF_HEIGHT), (cx, cy, 0.0))


def _ring(r: float, n: int = 10) -> tuple[tt.Geom, ...]:
  return tuple(_bar(r * math.cos(a), r * math.sin(a), 0.007, r * math.sin(math.pi / n) + 0.002,
                    a) for a in np.arange(n) * 2 * math.pi / n)


# Flat pieces (2 cm tall, <= 8 cm across) built from bars and discs, in the spirit of CLIPort's
# kitting shapes; the first geom is on top where the cup takes the piece.
SHAPES: dict[str, tuple[tt.Geom, ...]] = {
    "square": (_bar(0, 0, 0.03, 0.03),),
    "plus": (_bar(0, 0, 0.035, 0.01), _bar(0, 0, 0.01, 0.035)),
    "letter T": (_bar(0.025, 0, 0.01, 0.035), _bar(-0.01, 0, 0.025, 0.01)),
    "letter L": (_bar(0, -0.02, 0.035, 0.01), _bar(-0.025, 0.01, 0.01, 0.02)),
    "circle": (_disc(0, 0, 0.03),),
    "ring": _ring(0.03),
    "letter E": (_bar(0, -0.025, 0.035, 0.01), _bar(0.025, 0.005, 0.01, 0.02),
                 _bar(0, 0.005, 0.01, 0.02), _bar(-0.025, 0.005, 0.01, 0.02)),
    "hexagon": (_bar(0, 0, 0.026, 0.03), _bar(0, 0, 0.026, 0.03, math.pi / 3),
                _bar(0, 0, 0.026, 0.03, 2 * math.pi / 3)),
    "letter H": (_bar(0, 0, 0.008, 0.02), _bar(0, -0.025, 0.035, 0.008),
                 _bar(0, 0.025, 0.035, 0.008)),
    "letter U": (_bar(-0.025, 0, 0.008, 0.033), _bar(0.005, -0.025, 0.025, 0.008),
                 _bar(0.005, 0.025, 0.025, 0.008)),
    "star": (_disc(0, 0, 0.012), _bar(0, 0, 0.035, 0.006), _bar(0, 0, 0.035, 0.006, math.pi / 3),
             _bar(0, 0, 0.035, 0.006, 2 * math.pi / 3)),
    "letter Z": (_bar(0, 0, 0.008, 0.03, math.pi / 5), _bar(0.028, 0, 0.008, 0.03),
                 _bar(-0.028, 0, 0.008, 0.03)),
}
SPLIT_SHAPES = {"seen": ("square", "plus", "letter T", "letter L", "circle", "ring",
                         "letter E", "hexagon"),
                "unseen": ("letter H", "letter U", "star", "letter Z")}
SHAPE_RADIUS = 0.05   # Footprint (m).


def _packing_shapes(rng, split_shapes, ws) -> Layout:
  """CLIPort's packing-shapes: "pack the {shape} in the brown box" among four other pieces;
  seen and unseen splits differ in the shapes (`SPLIT_SHAPES`), not colours."""
  placed = []
  half = tuple(rng.uniform(0.065, 0.08, 2))
  yaw = float(rng.uniform(0, 2 * math.pi))
  xy = free_xy(rng, placed, math.hypot(*half) + 0.01, ws)
  parts = [tt.tray("box", COLOURS["brown"], xy, yaw, half)]
  names = list(rng.choice(split_shapes, min(5, len(split_shapes)), replace=False))
  colours = list(COLOURS)
  for k, shape in enumerate(names):
    parts.append(tt.Part(f"shape{k}", SHAPES[shape], COLOURS[colours[rng.integers(len(colours))]],
                         True, (*free_xy(rng, placed, SHAPE_RADIUS, ws), SHAPE_HALF_HEIGHT),
                         float(rng.uniform(0, 2 * math.pi)), "shape"))
  goal = Goal(("shape0",), (0.0,), np.ones((1, 1), bool), (Target(xy, yaw),),
              f"pack the {names[0]} in the brown box", 1.0, zone=half)
  return Layout(tuple(parts), (goal,), 2, "done packing shapes.")


def _register(name: str, layout, split_items=SPLIT_COLOURS) -> None:
  TASKS.register(name)(Task(name, layout, split_items))


_register("put_block_in_bowl", _put_block_in_bowl)
_register("stack_block_pyramid_seq", _stack_block_pyramid_seq)
_register("packing_shapes", _packing_shapes, SPLIT_SHAPES)
