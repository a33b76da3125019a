"""CLIPort's demo layout: an oracle episode on the MuJoCo tabletop, recorded through Ravens'
three RealSense cameras and written as CLIPort writes it, reads back as vcbench's own renderer
and demos see it; the reader's errors name the file, step and what was expected."""
import math
import pickle

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from vcbench.data.gvue import cliport  # noqa: E402
from vcbench.data.gvue.formats_io import FormatError, MissingFile  # noqa: E402
from vcbench.data.gvue.tabletop_demos import Frame, collect_demos  # noqa: E402
from vcbench.envs.mujoco import tabletop as tt  # noqa: E402
from vcbench.envs.mujoco import tabletop_tasks as T  # noqa: E402

TASK, SEED, N_ROT = "put_block_in_bowl", 0, 36
CLIPORT_TASK = "put-block-in-bowl-seen-colors"
FRAME = Frame.make(128, 32)


# ----------------------------------------------------------------------------- fixture writer
def mujoco_camera(name: str, cam: cliport.Camera) -> str:
  """MJCF of a perspective camera that records what Ravens' `cam` does. Ravens' (OpenCV)
  camera looks down its +z with image y pointing down; MuJoCo's looks down its -z with y up.
  Negating y and z keeps x: MuJoCo's x and y axes are Ravens' x and -y. MuJoCo's fovy is the
  vertical view of the image height at focal length fy (fx == fy, square pixels); its frustum
  is centred on the image, where Ravens' principal point (W/2, H/2) also is."""
  r = cliport.rotation_matrix(cam.rotation)
  axes = " ".join(f"{v:.9f}" for v in (*r[:, 0], *-r[:, 1]))
  fovy = math.degrees(2 * math.atan(cam.image_size[0] / 2 / cam.intrinsics[4]))
  pos = " ".join(f"{v:.9f}" for v in cam.position)
  return f'<camera name="{name}" pos="{pos}" xyaxes="{axes}" fovy="{fovy:.9f}"/>'


class Recorder:
  """Ravens' cameras and vcbench's orthographic camera on copies of an episode's scene."""

  def __init__(self, parts, cameras=cliport.D415):
    cams = "".join(mujoco_camera(f"ravens{i}", c) for i, c in enumerate(cameras))
    xml = tt.scene_xml(parts, tt.Workspace()).replace("</worldbody>", cams + "</worldbody>")
    self.model = mujoco.MjModel.from_xml_string(xml)
    h, w = cameras[0].image_size
    self.model.vis.global_.offheight, self.model.vis.global_.offwidth = h, w
    self.data = mujoco.MjData(self.model)
    self.renderer = mujoco.Renderer(self.model, h, w)
    # vcbench's orthographic renders: at Ravens' 3.125 mm, and at the frame's pixel size.
    self.sims = (tt.TabletopSim(parts, tt.Workspace()), tt.TabletopSim(parts, FRAME.workspace))
    self.n = len(cameras)
    for model in (self.model, *(sim.model for sim in self.sims)):
      flat_lighting(model)

  def record(self, qpos):
    """Ravens' observation (colours, depths in metres) and vcbench's renders of state `qpos`."""
    for model, data in ((self.model, self.data), *((s.model, s.data) for s in self.sims)):
      data.qpos[:] = qpos
      mujoco.mj_forward(model, data)
    colors, depths = [], []
    for i in range(self.n):
      self.renderer.update_scene(self.data, f"ravens{i}")
      colors.append(self.renderer.render().copy())
      self.renderer.enable_depth_rendering()
      self.renderer.update_scene(self.data, f"ravens{i}")
      depths.append(self.renderer.render().copy())   # Distance along the optical axis, as Ravens'.
      self.renderer.disable_depth_rendering()
    return np.stack(colors), np.stack(depths), *(sim.render() for sim in self.sims)

  def close(self):
    self.renderer.close()
    for sim in self.sims:
      sim.close()


def flat_lighting(model) -> None:
  """Every surface at its own colour, whatever the view: the headlight ambient only. The
  tabletop's lights shade a face by its angle to the camera, and a top-down and an oblique
  camera would see different colours for reasons that have nothing to do with the reader."""
  model.vis.headlight.ambient[:] = 1.0
  model.vis.headlight.diffuse[:] = 0.0
  model.vis.headlight.specular[:] = 0.0
  model.light_active[:] = 0


def quat_z(angle: float) -> np.ndarray:
  return np.array([0.0, 0.0, math.sin(angle / 2), math.cos(angle / 2)])


def write_episode(folder, name, colors, depths, actions, infos):
  """CLIPort's files of one episode: a pickled per-step list in each field folder."""
  fields = {"color": np.uint8(colors), "depth": np.float32(depths), "action": list(actions),
            "info": list(infos), "reward": [0.0] * len(actions)}
  for key, value in fields.items():
    (folder / key).mkdir(parents=True, exist_ok=True)
    with open(folder / key / name, "wb") as f:
      pickle.dump(value, f)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
  """The oracle's episode as CLIPort records it (an observation and action per step, the final
  observation with action None), and vcbench's orthographic render of each observed state."""
  root = tmp_path_factory.mktemp("cliport")
  ep = T.Episode(TASK, "seen", SEED, FRAME.workspace, render=False)
  rec = Recorder(ep.sim.parts)
  colors, depths, truth, small, actions, infos = [], [], [], [], [], []
  try:
    while True:
      action = None if ep.done else T.oracle_action(ep)
      c, d, render, render_small = rec.record(ep.sim.data.qpos)
      colors.append(c), depths.append(d), truth.append(render), small.append(render_small)
      infos.append({"lang_goal": ep.instruction})
      if action is None:
        actions.append(None)
        break
      # Ravens' oracle: the cup picks unturned (pose0's identity quaternion) and places turned
      # counter-clockwise by the object's turn to its target, as vcbench's Action.rotation.
      actions.append({"pose0": (np.array([*action.pick, 0.02]), quat_z(0.0)),
                      "pose1": (np.array([*action.place, 0.02]), quat_z(action.rotation))})
      ep.step(action, N_ROT)
    assert ep.success
  finally:
    rec.close()
    ep.close()
  write_episode(root / f"{CLIPORT_TASK}-train", f"000000-{SEED}.pkl", colors, depths, actions,
                infos)
  return {"root": root, "colors": colors, "depths": depths, "truth": truth, "small": small}


# ----------------------------------------------------------------------------- parity
def test_cameras_are_ravens_d415():
  rotation = pytest.importorskip("scipy.spatial.transform").Rotation
  eulers = [(math.pi / 4, math.pi, -math.pi / 2), (math.pi / 4.5, math.pi, math.pi / 4),
            (math.pi / 4.5, math.pi, 3 * math.pi / 4)]
  for cam, euler in zip(cliport.D415, eulers):
    # pybullet's Euler angles: roll about x, then pitch about y, then yaw about z (extrinsic).
    assert np.allclose(cam.rotation, rotation.from_euler("xyz", euler).as_quat())
  for q in rotation.random(4, random_state=0):
    assert cliport.yaw(q.as_quat()) == pytest.approx(q.as_euler("zxy")[0])
    assert np.allclose(cliport.rotation_matrix(q.as_quat()), q.as_matrix())


def test_heightmap_matches_the_orthographic_render(recorded):
  for colors, depths, truth in zip(recorded["colors"], recorded["depths"], recorded["truth"]):
    rgb, height = cliport.heightmap(colors, depths)
    assert rgb.shape == truth["rgb"].shape == (160, 320, 3) and height.shape == (160, 320)
    seen = rgb.sum(-1) > 0
    assert seen.mean() > 0.98          # The three views cover the workspace but for occlusions.
    objects = seen & (truth["height"] > 0.01)
    table = seen & (truth["height"] < 0.001)
    assert objects.sum() > 1000
    # Ravens backprojects pixel indices where the render's optical axis is half a pixel off,
    # which lifts points by ~0.8 mm: well under the 3.125 mm pixel.
    err = np.abs(height - truth["height"])
    assert np.median(err[objects]) < 0.002 and np.median(err[table]) < 0.002
    colour_err = np.abs(rgb.astype(int) - truth["rgb"]).max(-1)
    assert np.median(colour_err[objects]) <= 2 and np.median(colour_err[table]) <= 2
    assert np.mean(colour_err[seen] > 30) < 0.03      # Disagreements only along edges.


def test_loaded_demos_match_the_oracle_demos(recorded):
  loaded = cliport.load_demos(recorded["root"], FRAME, N_ROT, [CLIPORT_TASK])
  ref = collect_demos([TASK], 1, FRAME, N_ROT, first_seed=SEED)
  assert set(loaded) == set(ref) and loaded["instruction"] == ref["instruction"]
  for key in ("pick", "place", "rotation", "task"):
    assert loaded[key].dtype == ref[key].dtype
    np.testing.assert_array_equal(loaded[key], ref[key])
  assert (ref["rotation"] != 0).all()            # The angle's sign is tested, not just zero.
  # The images: collect_demos' are lit by the tabletop's lights, so compare with the same
  # frame-sized orthographic render under the fixture's flat lighting.
  assert loaded["image"].shape == ref["image"].shape and loaded["image"].dtype == np.uint8
  flat = np.stack([FRAME.image(r["rgb"]) for r in recorded["small"][:-1]])
  err = np.abs(loaded["image"].astype(int) - flat).max(-1)
  pad = FRAME.pad
  assert not loaded["image"][:, :pad].any() and not loaded["image"][:, -pad:].any()
  assert np.median(err[:, pad:-pad]) <= 2 and np.mean(err[:, pad:-pad] > 30) < 0.05


# ----------------------------------------------------------------------------- small fixtures
# A 4 x 8 camera 1 m above the workspace centre looking straight down (a half turn about x):
# image columns along world +x, rows along world -y.
TOP = cliport.Camera((4, 8), (16.0, 0.0, 3.5, 0.0, 16.0, 1.5, 0.0, 0.0, 1.0), (0.5, 0.0, 1.0),
                     (1.0, 0.0, 0.0, 0.0))
DEPTH = 0.95                             # Every pixel sees a surface 5 cm above the table.


def test_heightmap_rows_run_along_x_and_columns_along_y():
  colors = np.zeros((1, 4, 8, 3), np.uint8)
  colors[0, 0, 7] = (200, 10, 10)        # Top-right pixel: the farthest +x, the farthest +y.
  rgb, height = cliport.heightmap(colors, np.full((1, 4, 8), DEPTH), [TOP])
  x, y = 0.5 + 3.5 * DEPTH / 16, 1.5 * DEPTH / 16
  row, col = int((x - 0.25) / cliport.PIXEL_SIZE), int((y + 0.5) / cliport.PIXEL_SIZE)
  assert np.argwhere(rgb.any(-1)).tolist() == [[row, col]]
  assert rgb[row, col].tolist() == [200, 10, 10]
  assert (height > 0).sum() == 32 and height[row, col] == pytest.approx(0.05, abs=1e-6)


def test_heightmap_keeps_each_cells_top_and_fuses_the_cameras():
  # A narrow camera whose pixel (1, 3) looks straight down at (0.5, 0), a cell's corner; its
  # neighbour (1, 4) lands 2.4 mm along x at 0.95 m, in the same cell.
  narrow = cliport.Camera((4, 8), (400.0, 0.0, 3.0, 0.0, 400.0, 1.0, 0.0, 0.0, 1.0),
                          (0.5, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0))
  colors = np.zeros((2, 4, 8, 3), np.uint8)
  depths = np.full((2, 4, 8), 2.0)            # Below the table: outside the bounds, dropped.
  colors[0, 1, 3], depths[0, 1, 3] = (200, 0, 0), 0.90
  colors[0, 1, 4], depths[0, 1, 4] = (0, 200, 0), 0.95
  colors[1, 1, 3], depths[1, 1, 3] = (0, 0, 100), 0.95
  rgb, height = cliport.heightmap(colors, depths, [narrow, narrow])
  cell = (80, 160)
  assert np.argwhere(height > 0).tolist() == [list(cell)]
  # Each camera keeps its highest point (the first camera's red, not its green); the cameras
  # fuse to the highest height and the mean colour of those that saw the cell.
  assert height[cell] == pytest.approx(0.1) and rgb[cell].tolist() == [100, 0, 50]


def small_episode(steps: int = 3, seed: int = 0):
  """(colors, depths, actions, infos) of an episode of `steps` observations on the TOP camera;
  the last has no action, as CLIPort records it."""
  colors = np.random.default_rng(seed).integers(1, 255, (steps, 1, 4, 8, 3), dtype=np.uint8)
  depths = np.full((steps, 1, 4, 8), DEPTH, np.float32)
  actions = [{"pose0": ((0.3 + 0.1 * i, -0.2, 0.0), quat_z(0.3)),
              "pose1": ((0.6, 0.1 * i, 0.0), quat_z(0.3 + 2 * math.pi / 8))}
             for i in range(steps - 1)] + [None]
  infos = [{"lang_goal": f"step {i}"} for i in range(steps)]
  return colors, depths, actions, infos


@pytest.fixture
def small_root(tmp_path):
  """Tasks a (two episodes) and b (one) in mode train, and b in mode val."""
  for folder, n in (("a-train", 2), ("b-train", 1), ("b-val", 1)):
    for episode in range(n):
      write_episode(tmp_path / folder, f"{episode:06d}-{episode + 7}.pkl",
                    *small_episode(seed=episode))
  return tmp_path


def load_small(root, **kwargs):
  return cliport.load_demos(root, FRAME, 8, cameras=[TOP], **kwargs)


def test_tasks_limit_and_single_folders(small_root):
  assert cliport.task_names(small_root) == ["a", "b"]
  assert cliport.task_names(small_root, "val") == ["b"]
  d = load_small(small_root)
  assert d["task"].tolist() == [0, 0, 0, 0, 1, 1]            # Last steps (no action) skipped.
  assert d["instruction"] == ["step 0", "step 1"] * 3
  assert d["rotation"].tolist() == [1] * 6                   # One eighth turn, counter-clockwise.
  np.testing.assert_allclose(d["pick"][1], FRAME.to_grid(FRAME.workspace.position(
      FRAME.workspace.pixel((0.4, -0.2)))))
  assert load_small(small_root, limit=1)["task"].tolist() == [0, 0, 1, 1]
  with pytest.raises(FormatError, match="limit must be None or a positive int, got 0"):
    load_small(small_root, limit=0)
  assert load_small(small_root, tasks=["b", "a"])["task"].tolist() == [0, 0, 1, 1, 1, 1]
  assert load_small(small_root / "a-train", tasks=["b", "a"])["task"].tolist() == [1] * 4
  assert load_small(small_root / "b-val")["task"].tolist() == [0, 0]
  assert d["image"].shape == (6, 128, 128, 3)


def test_missing_folders_and_files_are_named(small_root):
  with pytest.raises(MissingFile, match=r"c-train: task folder not found; .* \['a', 'b'\]"):
    load_small(small_root, tasks=["a", "c"])
  with pytest.raises(FormatError, match="holds task 'a', not one of tasks"):
    load_small(small_root / "a-train", tasks=["b"])
  (small_root / "a-train" / "depth" / "000001-8.pkl").unlink()
  with pytest.raises(MissingFile, match=r"a-train/depth/000001-8.pkl: not found"):
    load_small(small_root)
  with pytest.raises(MissingFile, match="no CLIPort task folder"):
    load_small(small_root / "a-train" / "color")


def test_bad_episodes_name_the_file_step_and_expectation(tmp_path):
  colors, depths, actions, infos = small_episode()
  folder = tmp_path / "a-train"
  write_episode(folder, "000000-0.pkl", colors, depths, actions, infos[:2])
  with pytest.raises(FormatError, match=r"episode 000000-0.pkl has steps \{'action': 3, "
                                        r"'color': 3, 'depth': 3, 'info': 2\}"):
    load_small(folder)
  write_episode(folder, "000000-0.pkl", colors[:, :, :, :7], depths, actions, infos)
  with pytest.raises(FormatError, match=r"color/000000-0.pkl: step 0 has shape \(1, 4, 7, 3\), "
                                        r"expected \(1, 4, 8, 3\)"):
    load_small(folder)
  write_episode(folder, "000000-0.pkl", colors, depths, [{"pose0": 1}] + actions[1:], infos)
  with pytest.raises(FormatError, match=r"action/000000-0.pkl: step 0\['pose0'\]: expected "
                                        r"\(xyz, quaternion xyzw\), got 1"):
    load_small(folder)
  write_episode(folder, "000000-0.pkl", colors, depths,
                [{"pose0": actions[0]["pose0"]}] + actions[1:], infos)
  with pytest.raises(FormatError, match=r"action/000000-0.pkl: step 0: expected a dict with "
                                        r"'pose1'"):
    load_small(folder)
  write_episode(folder, "000000-0.pkl", colors, depths, actions, [{}] + infos[1:])
  with pytest.raises(FormatError, match=r"info/000000-0.pkl: step 0 has no 'lang_goal'"):
    load_small(folder)
  (folder / "info" / "000000-0.pkl").write_bytes(b"not a pickle")
  with pytest.raises(FormatError, match=r"info/000000-0.pkl: not a readable pickle"):
    load_small(folder)


def test_the_real_source_reads_cliport_demos_into_the_manipulation_split(recorded, tmp_path):
  from vcbench.data.gvue import sources
  from vcbench.data.gvue import tabletop_demos
  split = sources.load_or_make(
      str(tmp_path), "manipulation", "real", "train", 0, 0, FRAME.image_size, n_rotations=N_ROT,
      real_paths={"manipulation": {"root": str(recorded["root"])}})
  assert split.meta["tasks"] == [CLIPORT_TASK]
  direct = cliport.load_demos(recorded["root"], FRAME, N_ROT)
  loaded = tabletop_demos.from_split(split)
  for key in ("pick", "place", "rotation", "task"):
    np.testing.assert_array_equal(loaded[key], direct[key])
