"""G-VUE's abstract reasoning task (Bongard-HOI) as Bongard problems about contact in MetaWorld.

Bongard-HOI shows six images of a human-object interaction (positives), six of the same object
without it (hard negatives) and asks whether a query image shows it. Its photos cannot be
downloaded here, so vcbench poses the same kind of problem about a physical relation it can
label exactly: contact, read from MuJoCo's contact list.

Concepts (`concepts`, per task of `TRAIN_TASKS` / `TEST_TASKS`): for a MetaWorld task's
manipulated object, "the gripper touches the <object>" (a contact between either finger's geoms
and the object's), "the <object> touches the table", and "the <object> touches the <receiver>"
(bin, nail, hoop, peg, ...) where the task's expert makes that contact happen. A body's geoms
are those of its subtree.

Construction, per task used in a call (`task_pool`):
- frames: `rollouts` episodes of `STEPS` steps from seeded random initial positions, acting with
  MetaWorld's scripted expert plus Gaussian action noise whose scale cycles through
  `NOISE` (from clean grasps and placements to random flailing that misses); every `STRIDE`-th
  state is kept (`State`: joint positions and velocities, the hand's mocap pose, and where the
  episode's reset put the fixed bodies and goal markers);
- labels: each kept state is restored and `mj_forward` run; a concept holds when MuJoCo's contact
  list has a contact between its two bodies. A state without one is a near miss when the
  closest geoms of the two bodies are `NEAR_MISS` apart (1-5 cm, `mj_geomDistance`), a clear
  negative when farther; states closer than 1 cm without contact are ambiguous in pixels and
  used for neither side.
A problem picks a task of the split, then one of its concepts with enough frames, then six
positives, six negatives (up to `HARD` near misses, the rest clear), and a query that is a
seventh positive or (with probability 1/2) another negative, near miss first; `label` is 1 when
the query is a positive.

Frames: each state is rendered at most once per call, by MetaWorld's renderer in its fast CPU
profile (`metaworld.make_renderer`) through a free camera `VIEW` aimed at the manipulated
object: from CortexBench's `top_cap2` the whole table is in view, a puck is a few pixels wide
and the shelf or the coffee machine hides the object, so a 1-cm gap would not show.

Train and test use different tasks and objects (`TRAIN_TASKS`, `TEST_TASKS`): no object
or receiver of a test concept appears in a train problem (the red puck, grey and blue cubes,
hammer, balls and mug train; the nut and peg, green peg and box, stick and thermos test).
`scene` is the problem's task; `meta["problems"]` keeps each problem's concept, bodies and the
13 states, so anyone can restore a frame and check its label.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from vcbench.data.gvue.split import BONGARD_SHOTS, Split, SplitError, check
from vcbench.envs.mujoco import metaworld as mw

STEPS = 150          # Environment steps per rollout (the experts grasp and place within ~100).
STRIDE = 2           # Keep every STRIDE-th state: consecutive ones look alike.
NOISE = (0.0, 0.3, 0.6, 1.2)  # Action noise std per rollout, cycled.
NEAR_MISS = (0.01, 0.05)      # Gap (m) of a near miss; below it, too close to tell in pixels.
HARD = 4             # Near misses among a problem's six negatives (when the pool has them).
# (distance m, azimuth, elevation in degrees) of the free camera that looks at the object.
VIEW = (0.7, 150.0, -35.0)
GRIPPER = ("rightclaw", "leftclaw")
TABLE = ("tablelink",)


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  obj: str                        # Root body of the manipulated object.
  noun: str                       # What the concept text calls it.
  receivers: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (noun, root bodies).
  table: bool = True              # "the <object> touches the table" is a concept of this task.


TRAIN_TASKS = {
    "pick-place": TaskSpec("obj", "puck"),
    "push": TaskSpec("obj", "puck"),
    "pick-out-of-hole": TaskSpec("obj", "puck"),
    "sweep-into": TaskSpec("obj", "cube"),
    "bin-picking": TaskSpec("obj", "cube", (("bin", ("bin_start", "bin_goal")),), table=False),
    # Its block touches the shelf only inside it, hidden by the side panels: no shelf concept.
    "shelf-place": TaskSpec("obj", "block"),
    "hammer": TaskSpec("hammerbody", "hammer", (("nail", ("nail_link",)),)),
    "basketball": TaskSpec("bsktball", "ball", (("hoop", ("basket_goal",)),)),
    "soccer": TaskSpec("soccer_ball", "ball", (("goal", ("goal_whole",)),)),
    "coffee-push": TaskSpec("mug", "mug"),
}
TEST_TASKS = {
    "assembly": TaskSpec("RoundNut", "nut", (("peg", ("peg",)),)),
    "disassemble": TaskSpec("RoundNut", "nut", (("peg", ("peg",)),)),
    "peg-insert-side": TaskSpec("peg", "peg", (("box", ("box",)),)),
    "stick-pull": TaskSpec("stick", "stick", (("thermos", ("object",)),)),
}
SPLITS = {"train": TRAIN_TASKS, "test": TEST_TASKS}


@dataclasses.dataclass(frozen=True)
class Concept:
  text: str
  bodies: tuple[tuple[str, ...], tuple[str, ...]]  # Root bodies of the two sides.


def concepts(spec: TaskSpec) -> tuple[Concept, ...]:
  out = [Concept(f"the gripper touches the {spec.noun}", (GRIPPER, (spec.obj,)))]
  if spec.table:
    out.append(Concept(f"the {spec.noun} touches the table", ((spec.obj,), TABLE)))
  out += [Concept(f"the {spec.noun} touches the {noun}", ((spec.obj,), roots))
          for noun, roots in spec.receivers]
  return tuple(out)


def subtree_geoms(model, roots) -> np.ndarray:
  """Ids of the colliding geoms on the bodies below (and at) the `roots` bodies."""
  ids = {model.body(r).id for r in roots}
  found = []
  for g in range(model.ngeom):
    body = int(model.geom_bodyid[g])
    while body and body not in ids:
      body = int(model.body_parentid[body])
    if body in ids and (model.geom_contype[g] or model.geom_conaffinity[g]):
      found.append(g)
  return np.array(found, np.int64)


def touching(data, a: np.ndarray, b: np.ndarray) -> bool:
  """Whether MuJoCo's current contact list pairs a geom of `a` with one of `b`."""
  g1, g2 = data.contact.geom1[:data.ncon], data.contact.geom2[:data.ncon]
  return bool(np.any((np.isin(g1, a) & np.isin(g2, b)) | (np.isin(g1, b) & np.isin(g2, a))))


def gap(model, data, a: np.ndarray, b: np.ndarray) -> float:
  """Distance between the closest geoms of `a` and `b` (capped just above the near-miss band)."""
  import mujoco  # noqa: PLC0415 - optional dependency (vcbench[mujoco]).
  far, fromto = 2 * NEAR_MISS[1], np.zeros(6)
  return min(mujoco.mj_geomDistance(model, data, int(i), int(j), far, fromto) for i in a for j in b)


# What a frame needs restored: the joint state and the hand's mocap target, and the model fields
# MetaWorld's resets move (fixed receivers such as the peg or the bins are placed through
# `body_pos`, goal markers through `site_pos`), shared by all states of an episode.
STATE_FIELDS = ("qpos", "qvel", "mocap_pos", "mocap_quat", "body_pos", "site_pos")


@dataclasses.dataclass(frozen=True)
class State:
  qpos: np.ndarray
  qvel: np.ndarray
  mocap_pos: np.ndarray
  mocap_quat: np.ndarray
  body_pos: np.ndarray
  site_pos: np.ndarray


def restore(model, data, state: State) -> None:
  """Puts the simulator in `state` and recomputes positions and contacts."""
  import mujoco  # noqa: PLC0415
  model.body_pos[:], model.site_pos[:] = state.body_pos, state.site_pos
  data.qpos[:], data.qvel[:] = state.qpos, state.qvel
  data.mocap_pos[:], data.mocap_quat[:] = state.mocap_pos, state.mocap_quat
  mujoco.mj_forward(model, data)


def _snapshot(data, layout: tuple[np.ndarray, np.ndarray]) -> State:
  return State(data.qpos.copy(), data.qvel.copy(), data.mocap_pos.copy(), data.mocap_quat.copy(),
               *layout)


def rollout_states(sim, policy, env_seed: int, noise: float, rng) -> list[State]:
  """Every STRIDE-th state of one noisy expert episode of `sim` (a MetaWorldSim)."""
  sim.reset(env_seed)
  model = sim.env.model
  layout = (model.body_pos.copy(), model.site_pos.copy())
  states = []
  for step in range(STEPS):
    action = sim.expert_action(policy) + noise * rng.standard_normal(mw.MetaWorldSim.action_dim)
    sim.step(action)
    if step % STRIDE == STRIDE - 1:
      states.append(_snapshot(sim.env.data, layout))
  return states


@dataclasses.dataclass
class Pool:
  """A task's frames and, per concept, which of them are positives, near misses, clear."""
  task: str
  obj: str                                   # Root body of the manipulated object.
  states: list[State]
  groups: dict[str, dict[str, np.ndarray]]   # concept text -> {"pos", "near", "clear"} indices.
  concepts: tuple[Concept, ...]


def label_states(model, data, states, concept_list) -> dict[str, dict[str, np.ndarray]]:
  """Per concept text, the indices of `states` that are positives, near misses and clear."""
  pairs = [(c, subtree_geoms(model, c.bodies[0]), subtree_geoms(model, c.bodies[1]))
           for c in concept_list]
  for c, a, b in pairs:
    if not len(a) or not len(b):
      raise ValueError(f"Bongard concept {c.text!r}: bodies {c.bodies} have no colliding geoms "
                       f"({len(a)} and {len(b)}); fix its TaskSpec.")
  kinds = {c.text: {"pos": [], "near": [], "clear": []} for c in concept_list}
  for i, state in enumerate(states):
    restore(model, data, state)
    for c, a, b in pairs:
      if touching(data, a, b):
        kinds[c.text]["pos"].append(i)
        continue
      distance = gap(model, data, a, b)
      if distance >= NEAR_MISS[1]:
        kinds[c.text]["clear"].append(i)
      elif distance >= NEAR_MISS[0]:
        kinds[c.text]["near"].append(i)
  return {t: {k: np.array(v, np.int64) for k, v in d.items()} for t, d in kinds.items()}


def task_pool(task: str, spec: TaskSpec, seed: int, rollouts: int) -> Pool:
  """Frames of `task` from `rollouts` noisy expert episodes seeded by (seed, task), labelled."""
  sim = mw.MetaWorldSim(task, render=None)
  try:
    policy = mw.expert_policy(task)
    key = [seed, *task.encode()]
    rng = np.random.default_rng(key)
    env_seeds = np.random.default_rng([*key, 1]).integers(0, 2**31 - 1, rollouts)
    states = [s for r in range(rollouts) for s in rollout_states(
        sim, policy, int(env_seeds[r]), NOISE[r % len(NOISE)], rng)]
    concept_list = concepts(spec)
    groups = label_states(sim.env.model, sim.env.data, states, concept_list)
    return Pool(task, spec.obj, states, groups, concept_list)
  finally:
    sim.close()


def usable(pool: Pool) -> list[Concept]:
  """Concepts of `pool` with enough frames for a problem (seven positives, seven negatives)."""
  need = BONGARD_SHOTS + 1
  return [c for c in pool.concepts if len(pool.groups[c.text]["pos"]) >= need
          and len(pool.groups[c.text]["near"]) + len(pool.groups[c.text]["clear"]) >= need]


def pick_frames(groups: dict[str, np.ndarray], rng) -> tuple[np.ndarray, int]:
  """(13 state indices: six positives, six negatives, the query; label) of one problem."""
  shots = BONGARD_SHOTS
  pos = rng.permutation(groups["pos"])
  near, clear = rng.permutation(groups["near"]), rng.permutation(groups["clear"])
  hard = min(HARD, len(near))
  negatives = np.concatenate([near[:hard], clear, near[hard:]])  # Near misses, then clear.
  chosen_neg, spare = negatives[:shots], negatives[shots:]
  label = int(rng.random() < 0.5)
  # A negative query is a near miss when any is left, so the query is as hard as the shots.
  near_set = set(near.tolist())
  spare_near = [i for i in spare if i in near_set]
  query = pos[shots] if label else (spare_near[0] if spare_near else spare[0])
  return np.concatenate([pos[:shots], chosen_neg, [query]]).astype(np.int64), label


class TaskCamera:
  """Frames of one task's states: the task's MetaWorld env, MetaWorld's renderer in its fast CPU
  profile, and a free camera `VIEW` aimed at the manipulated object in each state."""

  def __init__(self, task: str, obj: str, size: int):
    import mujoco  # noqa: PLC0415
    self.sim = mw.MetaWorldSim(task, None)
    self.model, self.data = self.sim.env.model, self.sim.env.data
    self.renderer, _, _ = mw.make_renderer(self.model, mw.RenderConfig(size=size))
    self.camera = mujoco.MjvCamera()
    self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    self.camera.distance, self.camera.azimuth, self.camera.elevation = VIEW
    self.body = self.model.body(obj).id

  def render(self, state: State) -> np.ndarray:
    restore(self.model, self.data, state)
    self.camera.lookat[:] = self.data.xpos[self.body]
    self.renderer.update_scene(self.data, camera=self.camera)
    return self.renderer.render().copy()

  def close(self):
    self.renderer.close()
    self.sim.close()


class FrameCache:
  """Renders states on demand, each at most once, one `TaskCamera` per task."""

  def __init__(self, size: int):
    self.size, self.cameras, self.frames = size, {}, {}

  def frame(self, pool: Pool, index: int) -> np.ndarray:
    key = (pool.task, index)
    if key not in self.frames:
      if pool.task not in self.cameras:
        self.cameras[pool.task] = TaskCamera(pool.task, pool.obj, self.size)
      self.frames[key] = self.cameras[pool.task].render(pool.states[index])
    return self.frames[key]

  def close(self):
    for camera in self.cameras.values():
      camera.close()
    self.cameras = {}


def _check_args(split, num, seed, size, rollouts) -> None:
  if split not in SPLITS:
    raise SplitError(f"Bongard: split must be one of {sorted(SPLITS)}, got {split!r}.")
  for name, value, low in (("num", num, 1), ("seed", seed, 0), ("size", size, 1),
                          ("rollouts", rollouts, 1)):
    if not isinstance(value, (int, np.integer)) or value < low:
      raise SplitError(f"Bongard: {name} must be an int >= {low}, got {value!r}.")


def make_split(split: str, num: int, seed: int, size: int, rollouts: int = 8) -> Split:
  """`num` Bongard problems on `split`'s tasks, drawn by `seed`; frames of side `size`."""
  _check_args(split, num, seed, size, rollouts)
  specs = SPLITS[split]
  rng = np.random.default_rng([seed, 7])
  tasks = [sorted(specs)[i] for i in rng.integers(0, len(specs), num)]
  pools = {t: task_pool(t, specs[t], seed, rollouts) for t in sorted(set(tasks))}
  cache = FrameCache(size)
  images = np.zeros((num, 2 * BONGARD_SHOTS + 1, size, size, 3), np.uint8)
  labels, problems = np.zeros(num, np.int32), []
  try:
    for k, task in enumerate(tasks):
      pool = pools[task]
      options = usable(pool)
      if not options:
        raise SplitError(f"Bongard {split}: {rollouts} rollouts of {task} gave no concept seven "
                         "positives and seven negatives; use more rollouts.")
      concept = options[int(rng.integers(len(options)))]
      indices, labels[k] = pick_frames(pool.groups[concept.text], rng)
      images[k] = np.stack([cache.frame(pool, int(i)) for i in indices])
      problems.append(_problem_record(pool, concept, indices))
  finally:
    cache.close()
  return check(Split(
      task="abstract_reasoning", images=images, targets={"label": labels},
      scene=tuple(f"metaworld/{t}" for t in tasks),
      meta={"problems": tuple(problems), "concepts": tuple(p["concept"] for p in problems),
            "split": split, "seed": seed, "rollouts": rollouts},
      source=f"vcbench bongard {split} (seed {seed}, {num} problems)"))


def _problem_record(pool: Pool, concept: Concept, indices) -> dict:
  states = [pool.states[i] for i in indices]
  return {"task": pool.task, "concept": concept.text, "bodies": concept.bodies,
          **{f: np.stack([getattr(s, f) for s in states]) for f in STATE_FIELDS}}
