"""The Colosseum scene of a MetaWorld task: its MJCF recompiled with MjSpec, plus an index of
what each perturbation factor acts on.

MetaWorld's own XML is extended, never edited by hand, with what the factors need:
- three fixed cameras (`CAMERAS`, Colosseum's front and two shoulder views): `CAMERA` at the
  pose of vcbench's `top_cap2` free camera (metaworld.CAMERAS), the others looking at the same
  work area from either side, so camera poses are model fields (`cam_pos`, `cam_quat`) that a
  factor can change;
- a texture bank (`TEXTURES`, 126; the banks live in `scene_assets`): the image textures
  MetaWorld and labmaze (a dm_control dependency) ship, decoded once and resized to
  `TEXTURE_SIZE`, and procedural MuJoCo builtins in Colosseum's colours, one material each;
- a pool of distractor objects (`DISTRACTORS`, 70: 63 made of the object meshes MetaWorld
  ships, most scaled to ~10 cm, and 7 primitive ones), parked out of view at `PARK` and
  transparent (MuJoCo skips alpha-0 geoms, so a parked pool costs the renderer nothing); the
  Distractor factor moves some of them onto the table and shows them. They are static and do
  not collide (contype = conaffinity = 0): the factor measures what the camera sees, and the
  arm's path stays the expert's (Colosseum spawns its distractors away from the task objects).
- object scaling (`scales`: root body -> factor): every body, geom, site, joint and inertial
  frame of the subtree is scaled about the root, meshes through their `scale`; sites (the
  task's targets and grasp points) move with the object -- MetaWorld's analogue of Colosseum
  rescaling its waypoints with the object. Masses are kept.
The clean scene renders the same pixels as the plain MetaWorld task through `top_cap2` (test).
`TASKS` says, per MetaWorld task, which bodies are its manipulation object (MO) and receiver
object (RO) and how far each may be scaled.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Mapping

import numpy as np

from vcbench.envs.mujoco.scene_assets import (  # noqa: F401 - the scene's banks, re-exported.
    COLOURS, DISTRACTORS, TEXTURES, Part, Texture)

CAMERA = "colosseum_front"
# The scene's cameras (front = top_cap2's pose), as MuJoCo free-camera parameters; each is a
# fixed camera of the model, which Camera_Pose perturbs.
CAMERAS: dict[str, tuple[tuple[float, float, float], float, float, float]] = {
    CAMERA: ((0.0, 0.62, 0.1), 1.35, -90.0, -50.0),
    "colosseum_left": ((0.0, 0.62, 0.1), 1.2, -140.0, -40.0),
    "colosseum_right": ((0.0, 0.62, 0.1), 1.2, -40.0, -40.0),
}
TEXTURE_SIZE = 128
PARK = (0.0, -3.0, -3.0)  # Behind the camera, below the floor: never in view.
TEXTURE_PREFIX, DISTRACTOR_PREFIX = "vcb_tex_", "vcb_distractor_"


# ---------------------------------------------------------------------------------------------
# What the object factors act on, per MetaWorld task.


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """Which objects of a MetaWorld task the object factors act on, and their ranges.

  Attributes:
    primitive: the Colosseum task primitive this task stands for.
    mo: names of the manipulation object's root bodies (the factors act on their subtrees).
    ro: names of the receiver object's root bodies; () when the task has none.
    mo_size: MO scale range, or None when the MO cannot be scaled (reason in `notes`).
    ro_size: RO scale range, or None.
    notes: factor -> why it does not apply to this task (the paper's '-').
  """
  primitive: str
  mo: tuple[str, ...]
  ro: tuple[str, ...] = ()
  mo_size: tuple[float, float] | None = (0.75, 1.25)
  ro_size: tuple[float, float] | None = (0.75, 1.25)
  notes: Mapping[str, str] = dataclasses.field(default_factory=dict)


TASKS: dict[str, TaskSpec] = {
    # The five CortexBench MetaWorld tasks.
    "assembly": TaskSpec("insert", mo=("RoundNut",), ro=("peg",), mo_size=(0.9, 1.1),
                         ro_size=(0.9, 1.1)),
    "bin-picking": TaskSpec("pick-and-place", mo=("obj",), ro=("bin_goal",),
                            mo_size=(0.85, 1.15), ro_size=(0.9, 1.1)),
    "button-press-topdown": TaskSpec(
        "press", mo=("button",), ro=("box",), mo_size=None, ro_size=(0.85, 1.15),
        notes={"MO_Size": "the button is a part of the button box (scale the box: RO_Size)"}),
    "drawer-open": TaskSpec("open", mo=("drawer",), ro=(), mo_size=(0.75, 1.0),
                            ro_size=None),
    "hammer": TaskSpec("hit", mo=("hammerbody",), ro=("box",), mo_size=(0.9, 1.1),
                       ro_size=(0.9, 1.1)),
    # Five more, one per remaining Colosseum primitive.
    "door-open": TaskSpec("open", mo=("door",), ro=(), mo_size=(0.85, 1.15), ro_size=None),
    "faucet-open": TaskSpec("turn", mo=("faucetBase",), ro=(), mo_size=(0.75, 1.25),
                            ro_size=None),
    "push": TaskSpec("slide to target", mo=("obj",), ro=(), mo_size=(0.75, 1.25),
                     ro_size=None),
    "pick-place": TaskSpec("pick-and-place", mo=("obj",), ro=(), mo_size=(0.75, 1.25),
                           ro_size=None),
    "peg-insert-side": TaskSpec("insert", mo=("peg",), ro=("box",), mo_size=(0.9, 1.1),
                                ro_size=(0.9, 1.1)),
}


def task_spec(task: str) -> TaskSpec:
  try:
    return TASKS[task]
  except KeyError:
    raise KeyError(f"no Colosseum task spec for MetaWorld task {task!r}; tasks with one: "
                   f"{sorted(TASKS)}") from None


def _assets_dir() -> str:
  import metaworld  # noqa: PLC0415 - optional dependency.
  return os.path.join(os.path.dirname(metaworld.__file__), "assets")


def _package_dir(package: str) -> str:
  if package == "metaworld":
    return _assets_dir()
  import labmaze  # noqa: PLC0415 - installed with dm_control.
  return os.path.dirname(labmaze.__file__)


@functools.lru_cache(maxsize=None)
def _image(package: str, file: str) -> np.ndarray:
  """A texture image decoded once per process, RGB uint8 at TEXTURE_SIZE²."""
  from PIL import Image  # noqa: PLC0415
  path = os.path.join(_package_dir(package), file)
  with Image.open(path) as im:
    im = im.convert("RGB").resize((TEXTURE_SIZE, TEXTURE_SIZE), Image.BILINEAR)
    return np.ascontiguousarray(np.asarray(im, np.uint8))


@functools.lru_cache(maxsize=None)
def _mesh_bounds(path: str) -> tuple[np.ndarray, np.ndarray]:
  """(min, max) corners of a binary STL file's vertices."""
  with open(path, "rb") as f:
    data = f.read()
  n = int(np.frombuffer(data[80:84], "<u4")[0]) if len(data) >= 84 else -1
  if n < 1 or len(data) != 84 + 50 * n:
    raise ValueError(f"{path}: not a binary STL file (a distractor mesh with `fit` needs one)")
  tri = np.frombuffer(data[84:], np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)),
                                            ("a", "<u2")]))
  v = tri["v"].reshape(-1, 3).astype(np.float64)
  return v.min(0), v.max(0)


def _fitted(path: str, fit: float, pos) -> tuple[float, np.ndarray]:
  """(scale, geom pos) that make a mesh's largest extent `fit` and set it on the table.
  MuJoCo centres a mesh on its centre of mass; the bounding box's centre stands in for it."""
  lo, hi = _mesh_bounds(path)
  s = fit / float(np.max(hi - lo))
  return s, np.asarray(pos, float) + np.array([0.0, 0.0, s * (hi[2] - lo[2]) / 2])


def _camera_pose(lookat, distance, azimuth, elevation):
  """pos and quat (w, x, y, z) of a fixed camera that sees what a MuJoCo free camera sees."""
  az, el = math.radians(azimuth), math.radians(elevation)
  forward = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
  pos = np.asarray(lookat, float) - distance * forward
  right = np.cross(forward, [0.0, 0.0, 1.0])
  right /= np.linalg.norm(right)
  up = np.cross(right, forward)
  rot = np.stack([right, up, -forward], axis=1)  # Camera x, y, z axes as columns.
  quat = np.zeros(4)
  import mujoco  # noqa: PLC0415
  mujoco.mju_mat2Quat(quat, rot.reshape(-1))
  return pos, quat


def _add_textures(spec) -> None:
  import mujoco  # noqa: PLC0415
  builtins = {"checker": mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
              "gradient": mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
              "flat": mujoco.mjtBuiltin.mjBUILTIN_FLAT}
  marks = {"none": mujoco.mjtMark.mjMARK_NONE, "edge": mujoco.mjtMark.mjMARK_EDGE,
           "cross": mujoco.mjtMark.mjMARK_CROSS, "random": mujoco.mjtMark.mjMARK_RANDOM}
  for tex in TEXTURES:
    name = TEXTURE_PREFIX + tex.name
    t = spec.add_texture(name=name, type=mujoco.mjtTexture.mjTEXTURE_2D,
                         width=TEXTURE_SIZE, height=TEXTURE_SIZE)
    if tex.file:
      t.nchannel = 3
      t.data = _image(tex.package, tex.file).tobytes()
    else:
      t.builtin = builtins[tex.builtin]
      t.rgb1, t.rgb2 = COLOURS[tex.rgb1], COLOURS[tex.rgb2]
      t.mark, t.markrgb = marks[tex.mark], COLOURS[tex.rgb2]
      t.random = 0.2 if tex.mark == "random" else 0.0
    textures = [""] * int(mujoco.mjtTextureRole.mjNTEXROLE)
    textures[int(mujoco.mjtTextureRole.mjTEXROLE_RGB)] = name
    spec.add_material(name=name, textures=textures, texuniform=True, texrepeat=(8.0, 8.0))


def _add_distractors(spec) -> None:
  import mujoco  # noqa: PLC0415
  kinds = {"box": mujoco.mjtGeom.mjGEOM_BOX, "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
           "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER, "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
           "ellipsoid": mujoco.mjtGeom.mjGEOM_ELLIPSOID, "mesh": mujoco.mjtGeom.mjGEOM_MESH}
  meshes = os.path.join(_assets_dir(), "objects", "meshes")
  for name, parts in DISTRACTORS.items():
    body = spec.worldbody.add_body(name=DISTRACTOR_PREFIX + name, pos=PARK)
    for i, part in enumerate(parts):
      # Transparent while parked: the renderer skips alpha-0 geoms; the factor shows them.
      geom = body.add_geom(name=f"{DISTRACTOR_PREFIX}{name}_{i}", type=kinds[part.kind],
                           pos=part.pos, rgba=(*COLOURS[part.colour], 0.0), contype=0,
                           conaffinity=0, group=1)
      if part.kind == "mesh":
        mesh_name = f"{DISTRACTOR_PREFIX}{name}_{i}"
        path = os.path.join(meshes, part.mesh)
        scale = 1.0
        if part.fit > 0:
          scale, geom.pos = _fitted(path, part.fit, part.pos)
        spec.add_mesh(name=mesh_name, file=path, scale=(scale,) * 3)
        geom.meshname = mesh_name
      else:
        size = np.zeros(3)
        size[:len(part.size)] = part.size
        geom.size = size


def _subtree(body):
  yield body
  for child in body.bodies:
    yield from _subtree(child)


def _scaled_mesh(spec, name: str, s: float, tag: str) -> str:
  """A copy of mesh `name` scaled by `s` (the original may be shared with other objects, as
  bin-picking's two bins share one)."""
  old = spec.mesh(name)
  new = spec.add_mesh(name=f"{name}_{tag}", file=old.file, scale=np.asarray(old.scale) * s,
                      refpos=old.refpos, refquat=old.refquat, inertia=old.inertia,
                      maxhullvert=old.maxhullvert, smoothnormal=old.smoothnormal)
  if len(old.uservert):  # MuJoCo scales user vertices too; copy them.
    new.uservert, new.userface = old.uservert, old.userface
  return new.name


def _scale_subtree(spec, root_name: str, s: float) -> None:
  """Scales the subtree of `root_name` by `s` about the root body's frame."""
  root = spec.body(root_name)
  if root is None:
    raise ValueError(f"no body {root_name!r} to scale in {spec.modelname!r}")
  meshes: dict[str, str] = {}
  for b in _subtree(root):
    if b is not root:
      b.pos = np.asarray(b.pos) * s
    b.ipos = np.asarray(b.ipos) * s
    b.inertia = np.asarray(b.inertia) * s * s  # Same mass, geometry scaled by s.
    for g in b.geoms:
      g.pos = np.asarray(g.pos) * s
      if math.isnan(g.mass):  # Mass from volume x density: keep the mass (inertia ~ s²).
        g.density = g.density / s**3
      if not math.isnan(g.fromto[0]):
        g.fromto = np.asarray(g.fromto) * s
      if g.meshname:
        if g.meshname not in meshes:
          meshes[g.meshname] = _scaled_mesh(spec, g.meshname, s, f"x{root_name}")
        g.meshname = meshes[g.meshname]
      else:
        g.size = np.asarray(g.size) * s
    for site in b.sites:
      site.pos = np.asarray(site.pos) * s
      site.size = np.asarray(site.size) * s
    for j in b.joints:
      j.pos = np.asarray(j.pos) * s


def build_spec(xml_path: str, scales: dict[str, float] | None = None):
  """The MjSpec of the Colosseum scene for a MetaWorld model file."""
  import mujoco  # noqa: PLC0415
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415
  spec = mujoco.MjSpec.from_file(xml_path)
  c = mw.CAMERAS["top_cap2"]
  assert CAMERAS[CAMERA] == (c.lookat, c.distance, c.azimuth, c.elevation)
  for name, pose in CAMERAS.items():
    pos, quat = _camera_pose(*pose)
    spec.worldbody.add_camera(name=name, pos=pos, quat=quat, fovy=45.0)
  _add_textures(spec)
  _add_distractors(spec)
  for root, s in (scales or {}).items():
    if s != 1.0:
      _scale_subtree(spec, root, float(s))
  return spec


def compile_scene(xml_path: str, scales: dict[str, float] | None = None):
  """The compiled Colosseum scene (an `mujoco.MjModel`)."""
  return build_spec(xml_path, scales).compile()


@dataclasses.dataclass(frozen=True)
class SceneIndex:
  """Model indices a factor acts on (numpy int arrays), found by name in a compiled scene.

  mo_geoms/ro_geoms are the *visible* geoms (render groups 0-2) of the objects' subtrees, the
  ones colour and texture change; mo_geoms_all/ro_geoms_all are every geom (friction);
  mo_bodies are the subtree bodies (mass).
  """
  mo_bodies: np.ndarray
  mo_geoms: np.ndarray
  mo_geoms_all: np.ndarray
  ro_geoms: np.ndarray
  table_geoms: np.ndarray
  floor_geom: np.ndarray
  cameras: np.ndarray       # The scene's cameras, in CAMERAS order (CAMERA first).
  materials: np.ndarray     # The texture bank's material ids, in TEXTURES order.
  distractors: np.ndarray   # The distractor pool's body ids, in DISTRACTORS order.
  distractor_geoms: np.ndarray  # Every geom of the pool ...
  distractor_of: np.ndarray     # ... and which pool entry (index into `distractors`) it is of.
  num_lights: int


def _subtree_ids(model, roots) -> list[int]:
  import mujoco  # noqa: PLC0415
  ids = []
  for name in roots:
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if root < 0:
      raise ValueError(f"the scene has no body {name!r}; bodies: "
                       f"{[model.body(i).name for i in range(model.nbody)]}")
    ids += [b for b in range(model.nbody)
            if b == root or _is_descendant(model.body_parentid, b, root)]
  return sorted(set(ids))


def _is_descendant(parent, body: int, root: int) -> bool:
  while body > 0:
    body = int(parent[body])
    if body == root:
      return True
  return False


def _geoms_of(model, bodies, visible_only: bool) -> np.ndarray:
  mask = np.isin(model.geom_bodyid, bodies)
  if visible_only:
    mask &= model.geom_group <= 2
  return np.flatnonzero(mask).astype(np.int32)


def index(model, mo: tuple[str, ...], ro: tuple[str, ...]) -> SceneIndex:
  """The `SceneIndex` of a compiled scene for a task's MO and RO root bodies."""
  import mujoco  # noqa: PLC0415
  name2id = lambda kind, n: mujoco.mj_name2id(model, kind, n)  # noqa: E731
  mo_bodies = _subtree_ids(model, mo)
  # An RO may hold the MO (button-press-topdown's box holds the button): the MO's geoms are
  # not the RO's.
  ro_bodies = [b for b in _subtree_ids(model, ro) if b not in set(mo_bodies)]
  table = _subtree_ids(model, ("tablelink",))
  pool = np.asarray([name2id(mujoco.mjtObj.mjOBJ_BODY, DISTRACTOR_PREFIX + n)
                     for n in DISTRACTORS], np.int32)
  return SceneIndex(
      mo_bodies=np.asarray(mo_bodies, np.int32),
      mo_geoms=_geoms_of(model, mo_bodies, True),
      mo_geoms_all=_geoms_of(model, mo_bodies, False),
      ro_geoms=_geoms_of(model, ro_bodies, True),
      table_geoms=_geoms_of(model, table, True),
      floor_geom=np.asarray([name2id(mujoco.mjtObj.mjOBJ_GEOM, "floor")], np.int32),
      cameras=np.asarray([name2id(mujoco.mjtObj.mjOBJ_CAMERA, c) for c in CAMERAS], np.int32),
      materials=np.asarray([name2id(mujoco.mjtObj.mjOBJ_MATERIAL, TEXTURE_PREFIX + t.name)
                            for t in TEXTURES], np.int32),
      distractors=pool,
      distractor_geoms=np.flatnonzero(np.isin(model.geom_bodyid, pool)).astype(np.int32),
      distractor_of=np.asarray([list(pool).index(b) for b in model.geom_bodyid
                                if b in set(pool)], np.int32),
      num_lights=int(model.nlight))
