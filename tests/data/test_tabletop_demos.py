"""Oracle demos for G-VUE's manipulation task: the image/grid geometry, the demos' labels, the
split contract and the cached `tabletop` source."""
import numpy as np
import pytest

from vcbench.data.gvue import sources
from vcbench.data.gvue import tabletop_demos as gm
from vcbench.envs.mujoco import tabletop_tasks as T

pytest.importorskip("mujoco")


def test_frame_geometry_round_trips():
  frame = gm.Frame.make(224, 56)
  assert frame.workspace.shape == (112, 224) and frame.pad == 56
  assert frame.cell == pytest.approx(4 / 224)
  for xy in [(0.3, -0.4), (0.61, 0.22)]:
    assert np.allclose(frame.to_table(frame.to_grid(xy)), xy)
  valid = frame.valid()
  assert valid[:, 0].sum() == 30 and valid[13:43, :].all() and not valid[:13].any()
  assert frame.image(np.full((112, 224, 3), 7, np.uint8))[56:168].min() == 7


def test_demos_label_the_oracle_pick_on_the_object():
  frame = gm.Frame.make(64, 16)
  d = gm.collect_demos(["put_block_in_bowl"], 1, frame, 36)
  ep = T.Episode("put_block_in_bowl", "seen", 0, frame.workspace, render=False)
  first = ep.goals[0].objects
  picked = frame.to_table(d["pick"][0])
  assert any(np.allclose(ep.sim.pose(o)[0][:2], picked, atol=frame.workspace.pix_size)
             for o in first)
  assert d["image"].shape[1:] == (64, 64, 3) and d["instruction"][0].startswith("put the ")
  assert len(d["image"]) == len(d["pick"]) == len(d["rotation"]) >= 1


def test_demos_round_trip_through_the_split_contract_and_its_cache(tmp_path):
  args = dict(task="manipulation", source="tabletop", split="train", num=1, seed=0, size=64,
              tasks=("put_block_in_bowl",), n_rotations=8)
  made = sources.load_or_make(str(tmp_path), **args)
  assert made.meta["tasks"] == ["put_block_in_bowl"] and len(made) >= 1
  cached = sources.load_or_make(str(tmp_path), **args)
  a, b = gm.from_split(made), gm.from_split(cached)
  for key in ("image", "pick", "place", "rotation", "task"):
    np.testing.assert_array_equal(a[key], b[key])
  assert a["instruction"] == b["instruction"]
  with pytest.raises(Exception, match="closed-loop"):
    sources.load_or_make(str(tmp_path), **{**args, "split": "test"})
