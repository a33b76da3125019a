"""G-VUE's single-view 3-D reconstruction task on meshes that ship with installed packages,
rendered with MuJoCo and voxelised by vcbench.

G-VUE reads ShapeNet models in DISN's file lists, one of the 24 ShapeNetRendering views per
model in, the object's shape out; its target is an AutoSDF SDF: the decoder predicts the latent
codes of a frozen, pretrained AutoSDF model that decodes them into the SDF. ShapeNet and that
prior cannot be downloaded here, so vcbench keeps the task's form -- one rendered view in, the
object's 3-D shape out, objects unseen in training at test time -- and predicts a solid
occupancy grid directly (`occupancy` bool [R, R, R], axes x, y, z of the normalised object
frame; see `meshes.voxelise`).

The objects (`catalog`):
- pybullet's 1,000 procedurally generated "random_urdfs" objects (unions of convex pieces);
- a hand-picked list of pybullet_data's other meshes (`PYBULLET_OBJECTS`: duck, bunny, teddy,
  mug, lego brick, torus, toys, and the links of the robots it ships), leaving out its
  collision, low-resolution and mirrored copies of the same shapes;
- MetaWorld's object meshes (assets/objects/meshes/<object>/*.stl), without the collision
  stand-ins (`*_col*`).
A mesh's `group` is the object it belongs to (a robot's links, a MetaWorld object's parts);
train/test assignment is by group, so no object's parts straddle the split. It depends on the
group's name only (a hash), not on the seed: every seed's test split holds the same objects.

An example is one (mesh, view) pair drawn by the seed from the split's meshes x `VIEWS`. Each
mesh is normalised into the unit cube (`meshes.normalise`) and voxelised at `resolution`, and
rendered by MuJoCo (offscreen, `MUJOCO_GL=egl` on a headless machine): the mesh as one grey
geom at the origin, a directional light plus MuJoCo's headlight, a white background, a free
camera looking at the origin from `VIEWS[v]` at the distance that keeps the mesh's bounding
sphere inside the 45-degree field of view. The 24 views (as many as ShapeNetRendering's) are
a fixed ring: azimuth every 15 degrees, the camera alternately 20 and 35 degrees above the
horizon. The 1,000 random objects are missing one (`BROKEN`). Meshes are rendered in batches of
`BATCH` geoms in one model, all but the current one hidden (MuJoCo leaves geoms with zero alpha
out of the scene), so one GL context serves many meshes.
"""
from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import math
import os

import numpy as np

from vcbench.data.gvue import meshes
from vcbench.data.gvue.split import Split, SplitError, check

VIEWS = tuple((15.0 * k, 20.0 if k % 2 == 0 else 35.0) for k in range(24))  # (azimuth, elevation)
FOVY = 45.0
BATCH = 64          # Meshes per MuJoCo model (one GL context each).
TEST_SHARE = 5      # One object group in TEST_SHARE is a test object.
COLOUR = (0.72, 0.72, 0.76, 1.0)

# pybullet_data meshes besides random_urdfs, by object group: one copy of each distinct shape.
PYBULLET_OBJECTS = {
    "duck": ("duck.obj",), "bunny": ("bunny.obj",), "teddy": ("teddy2_VHACD_CHs.obj",),
    "mug": ("objects/mug.obj",), "lego": ("lego/lego.obj",), "jenga": ("jenga/jenga.obj",),
    "domino": ("domino/domino.obj",), "torus": ("torus/torus_textured.obj",),
    "soccerball": ("soccerball.obj",), "sphere": ("sphere_smooth.obj",), "cube": ("cube.obj",),
    "toys": ("toys/concave_box.obj", "toys/cylinder.obj", "toys/prism.obj",
             "toys/shape_sorter.obj", "toys/cube.obj"),
    "tray": ("tray/tray_textured.obj", "tray/tray_textured2.obj"),
    "racecar": ("racecar/meshes/cone.obj", "racecar/meshes/hokuyo.obj",
                "racecar/meshes/left_front_wheel.obj"),
    "franka_panda": tuple(f"franka_panda/meshes/visual/{n}.obj" for n in
                          ("finger", "hand", "link1", "link2", "link3", "link4", "link5", "link6")),
    "kuka_iiwa": tuple(f"kuka_iiwa/meshes/link_{i}.obj" for i in range(8)) + (
        "kuka_iiwa/meshes/finger_base_left.stl", "kuka_iiwa/meshes/finger_tip_left.stl"),
    "xarm": ("xarm/xarm_description/meshes/xarm6/visual/base.stl",) + tuple(
        f"xarm/xarm_description/meshes/xarm6/visual/link{i}.stl" for i in range(1, 7)),
    "a1": tuple(f"a1/meshes/{n}.obj" for n in ("calf", "hip", "thigh", "trunk")),
    "aliengo": tuple(f"aliengo/meshes/{n}.obj" for n in ("calf", "hip", "thigh", "trunk")),
    "laikago": ("laikago/chassis.obj", "laikago/hip_motor.obj", "laikago/upper_leg_left.obj",
                "laikago/lower_leg3.obj"),
    "mini_cheetah": tuple(f"mini_cheetah/meshes/mini_{n}.obj" for n in
                          ("abad", "body", "lower_link", "upper_link")),
    "microtaur": tuple(f"quadruped/microtaur/{n}.stl" for n in
                       ("channel", "channel_4inch", "d435i", "fr12_h101", "fr13_s102", "plate",
                        "xavier", "xm430w210")) + ("quadruped/tmotor3.obj",),
    "husky": tuple(f"husky/meshes/{n}.stl" for n in
                   ("base_link", "bumper", "top_plate", "user_rail", "wheel")),
    "bicycle": tuple(f"bicycle/files/{n}.stl" for n in
                     ("all_pedal_parts", "bike_rack", "frame_scaled", "handlebar_scaled",
                      "wheel_axels", "wheel_scaled")),
    "differential": tuple(f"differential/diff_{n}.stl" for n in
                          ("arm", "carrier", "carrier_cover", "leftshaft", "motor_cover",
                           "pinion", "ring", "side", "spider", "spider_shaft", "stand")),
    "wsg50_gripper": tuple(f"gripper/meshes/{n}.stl" for n in
                           ("GUIDE_WSG50_110", "WSG-FMF", "WSG50_110", "l_gripper_tip_scaled")),
    "pr2_gripper": ("l_finger.stl", "l_finger_tip.stl"),
    "kiva_shelf": ("kiva_shelf/meshes/pod_lowres.stl",),
}

BROKEN = ("pybullet/random/168",)  # Its OBJ file holds only NaN vertices.


@dataclasses.dataclass(frozen=True)
class MeshEntry:
  name: str     # "<package>/<group>/<file stem>": the example's scene.
  group: str    # The object the mesh belongs to: the unit of the train/test split.
  path: str


def _data_dirs() -> tuple[str, str]:
  try:
    import metaworld  # noqa: PLC0415 - optional dependencies (vcbench[mujoco], trifinger).
    import pybullet_data  # noqa: PLC0415
  except ImportError as e:
    raise ImportError(f"3-D reconstruction needs the meshes of pybullet_data and MetaWorld: "
                      f"{e.name} is not installed (vcbench[mujoco] and trifinger-simulation "
                      f"install them).") from e
  return (pybullet_data.getDataPath(),
          os.path.join(os.path.dirname(metaworld.__file__), "assets", "objects", "meshes"))


@functools.lru_cache(maxsize=None)
def catalog() -> tuple[MeshEntry, ...]:
  """Every mesh of the task, sorted by name."""
  pybullet, metaworld = _data_dirs()
  entries = []
  for path in glob.glob(os.path.join(pybullet, "random_urdfs", "*", "*.obj")):
    stem = os.path.splitext(os.path.basename(path))[0]
    entries.append(MeshEntry(f"pybullet/random/{stem}", f"pybullet/random/{stem}", path))
  for group, files in PYBULLET_OBJECTS.items():
    for rel in files:
      stem = os.path.splitext(os.path.basename(rel))[0]
      entries.append(MeshEntry(f"pybullet/{group}/{stem}", f"pybullet/{group}",
                               os.path.join(pybullet, rel)))
  for path in glob.glob(os.path.join(metaworld, "*", "*.stl")):
    group = os.path.basename(os.path.dirname(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    if "_col" not in stem:
      entries.append(MeshEntry(f"metaworld/{group}/{stem}", f"metaworld/{group}", path))
  missing = [e.path for e in entries if not os.path.isfile(e.path)]
  if missing:
    raise FileNotFoundError(f"3-D reconstruction: {len(missing)} listed meshes are missing, e.g. "
                            f"{missing[:3]}; reinstall pybullet / metaworld==3.1.1.")
  return tuple(sorted((e for e in entries if e.name not in BROKEN), key=lambda e: e.name))


def split_of(group: str) -> str:
  """"train" or "test" for an object group, fixed by its name."""
  digest = int(hashlib.sha1(group.encode()).hexdigest()[:8], 16)
  return "test" if digest % TEST_SHARE == 0 else "train"


def split_meshes(split: str) -> tuple[MeshEntry, ...]:
  if split not in ("train", "test"):
    raise SplitError(f"3-D reconstruction: split must be 'train' or 'test', got {split!r}.")
  return tuple(e for e in catalog() if split_of(e.group) == split)


@functools.lru_cache(maxsize=256)
def load(path: str) -> tuple[np.ndarray, np.ndarray]:
  """(vertices in the unit cube, triangles) of the mesh file at `path`."""
  vertices, faces = meshes.read_mesh(path)
  return meshes.normalise(vertices), faces


def camera_distance(vertices: np.ndarray) -> float:
  """How far the camera stands from the origin so the mesh's bounding sphere (about the
  origin) fits the field of view from any direction, with a 5% margin."""
  radius = float(np.linalg.norm(vertices, axis=1).max())
  return 1.05 * radius / math.sin(math.radians(FOVY / 2))


def _build_model(shapes, size: int):
  """A MuJoCo model holding each (vertices, faces) of `shapes` as a hidden geom at the origin."""
  import mujoco  # noqa: PLC0415 - optional dependency (vcbench[mujoco]).
  spec = mujoco.MjSpec()
  spec.visual.global_.offwidth = spec.visual.global_.offheight = size
  spec.visual.global_.fovy = FOVY
  spec.visual.quality.offsamples = 0   # The CPU render profile: no MSAA.
  spec.add_texture(name="background", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                   builtin=mujoco.mjtBuiltin.mjBUILTIN_FLAT, rgb1=[1, 1, 1], rgb2=[1, 1, 1],
                   width=8, height=8)
  spec.worldbody.add_light(pos=[0.3, -0.5, 3.0], dir=[-0.1, 0.17, -1.0], directional=True,
                           diffuse=[0.55, 0.55, 0.55], castshadow=False)
  for i, (vertices, faces) in enumerate(shapes):
    mesh = spec.add_mesh(name=f"shape{i}")
    mesh.uservert = vertices.astype(np.float32).ravel().tolist()
    mesh.userface = faces.astype(np.int32).ravel().tolist()
    # Shell inertia accepts open and thin meshes, whose enclosed volume may be zero.
    mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
    spec.worldbody.add_geom(name=f"shape{i}", type=mujoco.mjtGeom.mjGEOM_MESH,
                            meshname=f"shape{i}", rgba=[*COLOUR[:3], 0.0], contype=0,
                            conaffinity=0)
  return spec.compile()


def render_views(shapes, views, size: int) -> list[np.ndarray]:
  """Per shape i, uint8 [len(views[i]), size, size, 3]: the shape seen from each `VIEWS` index
  in views[i]."""
  import mujoco  # noqa: PLC0415
  model = _build_model(shapes, size)
  data = mujoco.MjData(model)
  mujoco.mj_forward(model, data)
  renderer = mujoco.Renderer(model, size, size)
  try:
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
      renderer.scene.flags[flag] = 0
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.lookat[:] = 0.0
    out = []
    for i, (vertices, _) in enumerate(shapes):
      model.geom_rgba[i, 3] = 1.0
      camera.distance = camera_distance(vertices)
      frames = []
      for v in views[i]:
        # MuJoCo's elevation is negative when the camera looks down.
        camera.azimuth, camera.elevation = VIEWS[v][0], -VIEWS[v][1]
        renderer.update_scene(data, camera=camera)
        frames.append(renderer.render().copy())
      model.geom_rgba[i, 3] = 0.0
      out.append(np.stack(frames) if frames else np.zeros((0, size, size, 3), np.uint8))
    return out
  finally:
    renderer.close()


def _check_args(num, seed, size, resolution) -> None:
  for name, value, low in (("num", num, 1), ("seed", seed, 0), ("size", size, 1),
                           ("resolution", resolution, 2)):
    if not isinstance(value, (int, np.integer)) or value < low:
      raise SplitError(f"3-D reconstruction: {name} must be an int >= {low}, got {value!r}.")


def draw_examples(pool: int, num: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(mesh index, view index) of `num` examples drawn by `seed` from `pool` meshes x the views,
  without repeats while the pairs last."""
  total = pool * len(VIEWS)
  pairs = np.random.default_rng(seed).choice(total, num, replace=num > total)
  return pairs // len(VIEWS), pairs % len(VIEWS)


def make_split(split: str, num: int, seed: int, size: int, resolution: int = 32) -> Split:
  """`num` (mesh, view) examples of `split` ("train" or "test") drawn by `seed`: images of side
  `size`, occupancy grids of side `resolution`."""
  _check_args(num, seed, size, resolution)
  entries = split_meshes(split)
  mesh_index, view_index = draw_examples(len(entries), num, seed)
  used = np.unique(mesh_index)
  images = np.zeros((num, size, size, 3), np.uint8)
  occupancy = np.zeros((num, resolution, resolution, resolution), bool)
  for start in range(0, len(used), BATCH):
    batch = used[start:start + BATCH]
    shapes = [load(entries[m].path) for m in batch]
    rows = [np.flatnonzero(mesh_index == m) for m in batch]
    frames = render_views(shapes, [view_index[r] for r in rows], size)
    for shape, r, shape_frames in zip(shapes, rows, frames):
      images[r] = shape_frames
      occupancy[r] = meshes.voxelise(*shape, resolution)
  return check(Split(
      task="reconstruction_3d", images=images, targets={"occupancy": occupancy},
      scene=tuple(entries[m].name for m in mesh_index),
      meta={"view": view_index.astype(np.int32), "views": VIEWS, "fovy": FOVY,
            "resolution": resolution, "split": split, "seed": seed,
            "groups": tuple(entries[m].group for m in mesh_index)},
      source=f"vcbench shapes3d {split} (seed {seed}, {num} examples)"))
