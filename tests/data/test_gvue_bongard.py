"""Bongard problems from MetaWorld contacts: the contract, determinism, train/test tasks and
objects apart, and every frame's label recomputed from MuJoCo by code independent of the
generator's."""
import os

import numpy as np
import pytest

# MuJoCo picks its GL backend when first imported: headless rendering needs EGL by then.
os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("metaworld")

import mujoco  # noqa: E402

from vcbench.data.gvue import bongard  # noqa: E402
from vcbench.data.gvue import split as split_lib  # noqa: E402
from vcbench.envs.mujoco import metaworld as mw  # noqa: E402

SIZE, ROLLOUTS = 40, 4


@pytest.fixture(scope="module")
def test_split():
  return bongard.make_split("test", 3, seed=1, size=SIZE, rollouts=ROLLOUTS)


def _under(model, geom, roots):
  """Whether `geom` hangs below a body named in `roots` (walking the body tree up)."""
  body = model.geom_bodyid[geom]
  while body:
    if model.body(body).name in roots:
      return True
    body = model.body_parentid[body]
  return False


def _contact_between(model, data, side_a, side_b):
  for c in data.contact[:data.ncon]:
    a1, b1 = _under(model, c.geom1, side_a), _under(model, c.geom1, side_b)
    a2, b2 = _under(model, c.geom2, side_a), _under(model, c.geom2, side_b)
    if (a1 and b2) or (b1 and a2):
      return True
  return False


def _set_state(sim, problem, k):
  m, d = sim.env.model, sim.env.data
  m.body_pos[:], m.site_pos[:] = problem["body_pos"][k], problem["site_pos"][k]
  d.qpos[:], d.qvel[:] = problem["qpos"][k], problem["qvel"][k]
  d.mocap_pos[:], d.mocap_quat[:] = problem["mocap_pos"][k], problem["mocap_quat"][k]
  mujoco.mj_forward(m, d)


def test_contract(test_split):
  s = test_split
  assert split_lib.check(s) is s and s.task == "abstract_reasoning"
  assert s.images.shape == (3, 13, SIZE, SIZE, 3) and s.targets["label"].dtype == np.int32
  assert set(s.targets["label"].tolist()) <= {0, 1}
  assert all(scene.split("/")[1] in bongard.TEST_TASKS for scene in s.scene)
  assert s.images.reshape(-1, SIZE * SIZE * 3).std(1).min() > 5  # Real frames, none blank.


def test_every_frame_has_the_contact_its_side_says_recomputed_from_mujoco(test_split):
  shots = split_lib.BONGARD_SHOTS
  for problem, label, scene in zip(test_split.meta["problems"], test_split.targets["label"],
                                   test_split.scene):
    assert scene == f"metaworld/{problem['task']}"
    sim = mw.MetaWorldSim(problem["task"], None)
    try:
      side_a, side_b = problem["bodies"]
      touches = []
      for k in range(2 * shots + 1):
        _set_state(sim, problem, k)
        touches.append(_contact_between(sim.env.model, sim.env.data, side_a, side_b))
      assert touches[:shots] == [True] * shots, problem["concept"]
      assert touches[shots:2 * shots] == [False] * shots, problem["concept"]
      assert touches[-1] == bool(label)
    finally:
      sim.close()


def test_frames_are_renders_of_the_recorded_states(test_split):
  problem = test_split.meta["problems"][0]
  obj = bongard.TEST_TASKS[problem["task"]].obj
  camera = bongard.TaskCamera(problem["task"], obj, SIZE)
  try:
    for k in (0, 7, 12):
      state = bongard.State(**{f: problem[f][k] for f in bongard.STATE_FIELDS})
      np.testing.assert_array_equal(camera.render(state), test_split.images[0, k])
  finally:
    camera.close()


def test_same_seed_same_problems(test_split):
  again = bongard.make_split("test", 3, seed=1, size=SIZE, rollouts=ROLLOUTS)
  np.testing.assert_array_equal(again.images, test_split.images)
  np.testing.assert_array_equal(again.targets["label"], test_split.targets["label"])
  assert again.meta["concepts"] == test_split.meta["concepts"]
  for a, b in zip(again.meta["problems"], test_split.meta["problems"]):
    np.testing.assert_array_equal(a["qpos"], b["qpos"])


def test_train_and_test_share_no_task_object_or_receiver():
  assert not set(bongard.TRAIN_TASKS) & set(bongard.TEST_TASKS)

  def things(tasks):
    return {n for spec in tasks.values() for n in [spec.noun] + [r for r, _ in spec.receivers]}
  assert not things(bongard.TRAIN_TASKS) & things(bongard.TEST_TASKS)
  train = bongard.make_split("train", 1, seed=0, size=16, rollouts=ROLLOUTS)
  assert train.scene[0].split("/")[1] in bongard.TRAIN_TASKS
  problem = train.meta["problems"][0]
  assert problem["concept"] in [c.text for c in bongard.concepts(
      bongard.TRAIN_TASKS[problem["task"]])]


def test_negatives_are_near_misses_first_and_the_query_follows_the_label():
  groups = {"pos": np.arange(0, 10), "near": np.arange(10, 15), "clear": np.arange(20, 40)}
  labels = set()
  for seed in range(12):
    indices, label = bongard.pick_frames(groups, np.random.default_rng(seed))
    labels.add(label)
    assert len(set(indices.tolist())) == 13 and set(indices[:6]) <= set(groups["pos"])
    negatives = indices[6:12]
    assert sum(i in groups["near"] for i in negatives) == bongard.HARD
    assert not set(negatives) & set(groups["pos"])
    # A negative query comes from the near misses left over (five near misses, four used).
    assert (indices[12] in groups["pos"]) if label else (indices[12] in groups["near"])
  assert labels == {0, 1}


@pytest.mark.parametrize("kwargs, field", [
    (dict(split="val", num=1, seed=0, size=8), "split"),
    (dict(split="train", num=0, seed=0, size=8), "num"),
    (dict(split="train", num=1, seed=-1, size=8), "seed"),
    (dict(split="train", num=1, seed=0, size=8, rollouts=0), "rollouts")])
def test_bad_arguments_name_the_field(kwargs, field):
  with pytest.raises(split_lib.SplitError, match=field):
    bongard.make_split(**kwargs)
