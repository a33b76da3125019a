"""The MuJoCo tabletop: the camera's geometry, the suction primitive, Ravens' reward and the
oracle on every task and split."""
import math

import numpy as np
import pytest

from vcbench.envs.mujoco import tabletop as tt
from vcbench.envs.mujoco import tabletop_tasks as T

pytest.importorskip("mujoco")
WS = tt.Workspace(pix_size=0.00625)


def test_workspace_is_ravens_and_pixels_round_trip():
  assert tt.Workspace().shape == (160, 320)
  assert WS.shape == (80, 160)
  for xy in [(0.3, -0.41), (0.7, 0.45), (0.5, 0.0)]:
    back = WS.position(WS.pixel(xy))
    assert np.all(np.abs(back - xy) <= WS.pix_size / 2 + 1e-12)
  assert WS.pixel((0.0, -9.0)) == (0, 0)           # Clipped into the image.
  assert WS.pixel((9.0, 9.0)) == (79, 159)


def test_render_puts_a_block_at_its_pixel_with_its_height():
  sim = tt.TabletopSim([tt.block("b", (1.0, 0.0, 0.0), (0.6, -0.3), 0.0)], WS)
  try:
    obs = sim.render()
  finally:
    sim.close()
  assert obs["rgb"].shape == (80, 160, 3) and obs["rgb"].dtype == np.uint8
  r, c = WS.pixel((0.6, -0.3))
  assert obs["rgb"][r, c, 0] > 150 and obs["rgb"][r, c, 1] < 100
  assert obs["height"][r, c] == pytest.approx(0.04, abs=2e-3)
  tr, tc = WS.pixel((0.3, 0.3))
  assert abs(obs["height"][tr, tc]) < 2e-3
  ys, xs = np.nonzero(obs["height"] > 0.02)        # The 4 cm block: ~6.4 px square.
  assert 5 <= ys.max() - ys.min() + 1 <= 8 and 5 <= xs.max() - xs.min() + 1 <= 8
  assert abs(ys.mean() - r) <= 1 and abs(xs.mean() - c) <= 1


def _sim():
  return tt.TabletopSim([tt.block("b", (1, 0, 0), (0.4, -0.2), 0.3),
                         tt.bowl("w", (0, 0, 1), (0.6, 0.2)),
                         tt.block("c", (0, 1, 0), (0.6, -0.1), 0.0)], WS, render=False)


def test_pick_place_carries_turns_and_stacks():
  sim = _sim()
  pos, yaw = sim.pose("b")
  assert sim.pick_place((0.4, -0.2), (0.6, 0.2), 0.5)
  pos, yaw = sim.pose("b")
  assert np.allclose(pos[:2], (0.6, 0.2), atol=2e-3) and pos[2] < 0.03   # In the bowl.
  assert yaw == pytest.approx(0.8, abs=0.02)
  assert sim.pick_place((0.6, -0.1), (0.6, 0.2), 0.0)                   # Onto the block.
  top, _ = sim.pose("c")
  assert np.allclose(top[:2], (0.6, 0.2), atol=3e-3)
  assert top[2] == pytest.approx(pos[2] + 0.04, abs=3e-3)


def test_pick_off_centre_keeps_the_grasp_offset():
  sim = _sim()
  assert sim.pick_place((0.41, -0.2), (0.5, 0.0), 0.0)
  pos, _ = sim.pose("b")
  assert np.allclose(pos[:2], (0.49, 0.0), atol=2e-3)


def test_nothing_movable_under_the_cup_is_a_no_op():
  sim = _sim()
  before = sim.data.qpos.copy()
  assert not sim.pick_place((0.3, 0.4), (0.4, -0.2), 0.0)   # Bare table.
  assert not sim.pick_place((0.6, 0.2), (0.4, 0.0), 0.0)    # A fixed bowl.
  assert np.allclose(sim.data.qpos, before)


@pytest.mark.parametrize("task", T.TASKS.names())
@pytest.mark.parametrize("split", T.SPLITS)
def test_oracle_completes_every_task(task, split):
  for seed in range(3):
    out = T.run_episode(task, split, seed, workspace=WS)
    assert out["success"] and out["score"] == pytest.approx(1.0), (task, split, seed, out)


def test_layouts_are_deterministic_and_splits_differ():
  a = T.Episode("put_block_in_bowl", "seen", 4, WS, render=False)
  b = T.Episode("put_block_in_bowl", "seen", 4, WS, render=False)
  c = T.Episode("put_block_in_bowl", "unseen", 4, WS, render=False)
  assert a.sim.parts == b.sim.parts and a.instruction == b.instruction
  assert a.sim.parts != c.sim.parts


def test_instructions_name_split_colours_and_shapes():
  for seed in range(10):
    for split in T.SPLITS:
      ep = T.Episode("put_block_in_bowl", split, seed, WS, render=False)
      words = ep.instruction.split()
      assert words[2] in T.SPLIT_COLOURS[split] and words[-2] in T.SPLIT_COLOURS[split]
      block = ep.sim.parts[[p.name for p in ep.sim.parts].index(ep.goals[0].objects[0])]
      assert block.rgb == T.COLOURS[words[2]]
      ep = T.Episode("packing_shapes", split, seed, WS, render=False)
      shape = ep.instruction[len("pack the "):-len(" in the brown box")]
      assert shape in T.SPLIT_SHAPES[split]
      assert ep.sim.parts[1].geoms == T.SHAPES[shape]


def test_pyramid_reward_is_ravens_sequential_and_partial():
  ep = T.Episode("stack_block_pyramid_seq", "seen", 0, WS, render=False)
  assert ep.instruction.endswith("on the lightest brown block")
  r = ep.step(T.oracle_action(ep))
  assert r == pytest.approx(1 / 6) and len(ep.goals) == 5
  assert "middle brown block" in ep.instruction
  # A wrong move (the next block to an empty corner) earns nothing and keeps the step.
  name = ep.goals[0].objects[0]
  pos, _ = ep.sim.pose(name)
  assert ep.step(T.Action(tuple(pos[:2]), (0.3, -0.45), 0.0)) == 0.0
  assert len(ep.goals) == 5 and ep.total == pytest.approx(1 / 6)


def test_zone_metric_counts_the_footprint_inside_the_box():
  ep = T.Episode("packing_shapes", "seen", 1, WS, render=False)
  goal = ep.goals[0]
  assert ep.in_zone(goal) == 0.0
  box = goal.targets[0]
  name = goal.objects[0]
  pos, yaw = ep.sim.pose(name)
  pick = pos[:2] + T._rotate(ep.grasp[name], yaw)
  # Centre the piece on the box's wall: part of it inside, part outside.
  edge = np.asarray(box.xy) + T._rotate(np.array([goal.zone[0], 0.0]), box.yaw)
  ep.sim.pick_place(pick, edge - (pos[:2] - pick), 0.0)
  assert 0.0 < ep.in_zone(goal) < 1.0


def test_flat_points_cover_the_footprint():
  pts = tt.flat_points(tt.Part("p", T.SHAPES["square"], (1, 1, 1), True, (0, 0, 0)))
  assert len(pts) == 144 and np.abs(pts).max() < 0.03     # 6 cm at 5 mm spacing.
  ring = tt.flat_points(tt.Part("r", T.SHAPES["ring"], (1, 1, 1), True, (0, 0, 0)))
  radii = np.linalg.norm(ring, axis=1)
  assert radii.min() > 0.015                            # A ring has a hole.


def test_discretised_actions_round_trip():
  a = T.Action((0.4, -0.2), (0.6, 0.25), math.radians(95))
  pick, place, k = a.discretised(WS)
  assert k == 10                                        # 95 degrees -> the 100-degree bin.
  b = T.Action.from_pixels(WS, pick, place, k)
  assert np.allclose(b.pick, a.pick, atol=WS.pix_size) and b.rotation == pytest.approx(
      math.radians(100))


@pytest.mark.slow
def test_oracle_succeeds_on_95_of_100_seeds():
  for task in T.TASKS.names():
    for split in T.SPLITS:
      wins = sum(T.run_episode(task, split, s, workspace=WS)["success"] for s in range(100))
      assert wins >= 95, (task, split, wins)
