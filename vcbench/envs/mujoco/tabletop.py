"""A MuJoCo tabletop for language-conditioned pick-and-place (G-VUE's manipulation task).

CLIPort (Shridhar et al., 2021) on Ravens (Zeng et al., 2020) acts through one primitive: a
suction cup picks at a point seen in a top-down orthographic RGB-D image and places the held
object at another point, rotated about the vertical. This module is that world in MuJoCo:
- the workspace of Ravens: x in [0.25, 0.75] m, y in [-0.5, 0.5] m, table at z = 0, images with
  rows along +x and columns along +y (`Workspace.pixel` / `Workspace.position`), 3.125 mm per
  pixel at Ravens' 160 x 320 (a coarser `pix_size` for CPU runs);
- objects as primitives: free blocks and shapes, fixed bowls, stands and boxes (`Part`s);
- `TabletopSim.pick_place`: the suction primitive. The cup descends at the pick point until it
  touches something (a downward ray, Ravens' "move until contact"); a movable object there is
  held rigidly, lifted to Ravens' 0.32 m, carried and turned to the place point, lowered until
  it touches something and released; physics runs throughout (the held object is driven
  kinematically, other objects react) and the scene settles after the release;
- `TabletopSim.render`: the orthographic colour image and heightmap (metres above the table)
  from one MuJoCo orthographic camera, so no point-cloud fusion is needed.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

LIFT = 0.32            # Ravens' pre-pick / post-place height of the cup (m).
CARRY_SPEED = 1.0      # m/s while carrying at the lift height.
DESCEND_SPEED = 0.25   # m/s while lowering onto the place point.
SETTLE_STEPS = 300     # Physics steps (0.6 s) for the scene to settle after a release.
TIMESTEP = 0.002
CAMERA = "top_ortho"
CAMERA_HEIGHT = 1.0


@dataclasses.dataclass(frozen=True)
class Workspace:
  """The table area the camera sees and the actions address (Ravens' bounds)."""
  x: tuple[float, float] = (0.25, 0.75)
  y: tuple[float, float] = (-0.5, 0.5)
  pix_size: float = 0.003125

  @property
  def shape(self) -> tuple[int, int]:
    return (round((self.x[1] - self.x[0]) / self.pix_size),
            round((self.y[1] - self.y[0]) / self.pix_size))

  @property
  def center(self) -> tuple[float, float]:
    return (sum(self.x) / 2, sum(self.y) / 2)

  def pixel(self, xy: Sequence[float]) -> tuple[int, int]:
    """(row, col) of the pixel containing the table point `xy`, clipped to the image."""
    h, w = self.shape
    r = int(math.floor((xy[0] - self.x[0]) / self.pix_size))
    c = int(math.floor((xy[1] - self.y[0]) / self.pix_size))
    return min(max(r, 0), h - 1), min(max(c, 0), w - 1)

  def position(self, pixel: Sequence[int]) -> np.ndarray:
    """The table point at the centre of pixel (row, col)."""
    return np.array([self.x[0] + (pixel[0] + 0.5) * self.pix_size,
                     self.y[0] + (pixel[1] + 0.5) * self.pix_size])


@dataclasses.dataclass(frozen=True)
class Geom:
  """A box or cylinder of a part, in the part's frame (half sizes as MuJoCo's)."""
  kind: str                       # box | cylinder
  size: tuple[float, ...]
  pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
  yaw: float = 0.0
  rgb: tuple[float, float, float] | None = None   # None: the part's colour.


@dataclasses.dataclass(frozen=True)
class Part:
  """An object on the table: geoms rigidly joined; movable parts get a free joint."""
  name: str
  geoms: tuple[Geom, ...]
  rgb: tuple[float, float, float]
  movable: bool
  pos: tuple[float, float, float]
  yaw: float = 0.0
  kind: str = ""                  # What the task calls it (block, bowl, ...), for masks.


def block(name: str, rgb, pos, yaw: float, half: float = 0.02) -> Part:
  return Part(name, (Geom("box", (half, half, half)),), tuple(rgb), True,
              (pos[0], pos[1], half), yaw, "block")


def bowl(name: str, rgb, pos, radius: float = 0.06, height: float = 0.03,
         walls: int = 16) -> Part:
  """A fixed bowl: a disc and a ring of wall slabs (Ravens' bowls are fixed too)."""
  wall_half = (0.004, radius * math.sin(math.pi / walls) + 0.002, height / 2)
  geoms = [Geom("cylinder", (radius, 0.0025), (0.0, 0.0, 0.0025))]
  for k in range(walls):
    a = 2 * math.pi * k / walls
    geoms.append(Geom("box", wall_half, ((radius - 0.004) * math.cos(a),
                                         (radius - 0.004) * math.sin(a), height / 2), a))
  return Part(name, tuple(geoms), tuple(rgb), False, (pos[0], pos[1], 0.0), 0.0, "bowl")


def tray(name: str, rgb, pos, yaw: float, half: tuple[float, float],
         height: float = 0.03) -> Part:
  """A fixed open box (Ravens' packing zones): a floor and four walls around `half` (m)."""
  t = 0.0025
  hx, hy = half
  geoms = (Geom("box", (hx + 2 * t, hy + 2 * t, t / 2), (0.0, 0.0, t / 2)),
           Geom("box", (t, hy + 2 * t, height / 2), (hx + t, 0.0, height / 2)),
           Geom("box", (t, hy + 2 * t, height / 2), (-hx - t, 0.0, height / 2)),
           Geom("box", (hx, t, height / 2), (0.0, hy + t, height / 2)),
           Geom("box", (hx, t, height / 2), (0.0, -hy - t, height / 2)))
  return Part(name, geoms, tuple(rgb), False, (pos[0], pos[1], 0.0), yaw, "tray")


def flat_points(part: Part, spacing: float = 0.005) -> np.ndarray:
  """[N, 2] points covering a part's footprint in its own frame (Ravens' object points for
  its zone metric, here from the geoms instead of a bounding box)."""
  pts = []
  for g in part.geoms:
    c, s = math.cos(g.yaw), math.sin(g.yaw)
    if g.kind == "box":
      u = np.arange(-g.size[0] + spacing / 2, g.size[0], spacing)
      v = np.arange(-g.size[1] + spacing / 2, g.size[1], spacing)
    else:
      u = v = np.arange(-g.size[0] + spacing / 2, g.size[0], spacing)
    uu, vv = [a.ravel() for a in np.meshgrid(u, v)]
    if g.kind == "cylinder":
      keep = uu ** 2 + vv ** 2 <= g.size[0] ** 2
      uu, vv = uu[keep], vv[keep]
    pts.append(np.stack([g.pos[0] + c * uu - s * vv, g.pos[1] + s * uu + c * vv], -1))
  return np.concatenate(pts)


def _geom_xml(g: Geom, rgb, part: Part, index: int) -> str:
  rgba = " ".join(f"{v:.4f}" for v in (g.rgb or rgb)) + " 1"
  size = " ".join(f"{v:.5f}" for v in g.size)
  pos = " ".join(f"{v:.5f}" for v in g.pos)
  quat = f"{math.cos(g.yaw / 2):.6f} 0 0 {math.sin(g.yaw / 2):.6f}"
  return (f'<geom name="{part.name}/{index}" type="{g.kind}" size="{size}" pos="{pos}" '
          f'quat="{quat}" rgba="{rgba}" friction="0.8 0.01 0.001" density="600"/>')


def scene_xml(parts: Sequence[Part], workspace: Workspace) -> str:
  """MJCF of the table, the orthographic camera and `parts`."""
  h, w = workspace.shape
  cx, cy = workspace.center
  bodies = []
  for p in parts:
    geoms = "".join(_geom_xml(g, p.rgb, p, i) for i, g in enumerate(p.geoms))
    joint = f'<freejoint name="{p.name}"/>' if p.movable else ""
    quat = f"{math.cos(p.yaw / 2):.6f} 0 0 {math.sin(p.yaw / 2):.6f}"
    pos = " ".join(f"{v:.5f}" for v in p.pos)
    bodies.append(f'<body name="{p.name}" pos="{pos}" quat="{quat}">{joint}{geoms}</body>')
  extent = workspace.x[1] - workspace.x[0]
  return f"""<mujoco model="vcbench_tabletop">
  <option timestep="{TIMESTEP}" cone="elliptic" impratio="5"/>
  <statistic extent="1" center="{cx} {cy} 0"/>
  <visual><global offwidth="{w}" offheight="{h}"/><quality shadowsize="0"/>
    <map znear="0.1" zfar="2"/><headlight ambient="0.45 0.45 0.45" diffuse="0.5 0.5 0.5"/>
  </visual>
  <worldbody>
    <light pos="{cx} {cy} 2" dir="0 0 -1" castshadow="false" diffuse="0.3 0.3 0.3"/>
    <geom name="table" type="plane" size="2 2 0.01" rgba="0.32 0.32 0.3 1"
          friction="0.8 0.01 0.001"/>
    <camera name="{CAMERA}" pos="{cx} {cy} {CAMERA_HEIGHT}" xyaxes="0 1 0 -1 0 0"
            orthographic="true" fovy="{extent}"/>
    {''.join(bodies)}
  </worldbody>
</mujoco>"""


def _yaw_quat(yaw: float) -> np.ndarray:
  return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def _quat_yaw(q: np.ndarray) -> float:
  w, x, y, z = q
  return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


class TabletopSim:
  """One episode's scene: MuJoCo model and data, the suction primitive and the camera."""

  def __init__(self, parts: Sequence[Part], workspace: Workspace = Workspace(),
               render: bool = True):
    import mujoco
    self._mj = mujoco
    self.workspace, self.parts = workspace, tuple(parts)
    self.model = mujoco.MjModel.from_xml_string(scene_xml(parts, workspace))
    self.data = mujoco.MjData(self.model)
    self.body = {p.name: self.model.body(p.name).id for p in parts}
    self._qadr = {p.name: self.model.jnt_qposadr[self.model.joint(p.name).id]
                  for p in parts if p.movable}
    self._dadr = {p.name: self.model.jnt_dofadr[self.model.joint(p.name).id]
                  for p in parts if p.movable}
    mujoco.mj_forward(self.model, self.data)
    self.settle()
    self._renderer = None
    if render:
      h, w = workspace.shape
      self._renderer = mujoco.Renderer(self.model, h, w)

  # ----- state -----
  def pose(self, name: str) -> tuple[np.ndarray, float]:
    """(position xyz, yaw) of a part's body."""
    b = self.body[name]
    return self.data.xpos[b].copy(), _quat_yaw(self.data.xquat[b])

  def part_at(self, xy: Sequence[float]) -> tuple[str | None, float]:
    """The part (None: the table) the cup touches descending at `xy`, and the touch height:
    a downward ray from above the lift height."""
    geomid = np.array([-1], np.int32)
    start = np.array([xy[0], xy[1], LIFT + 0.1])
    dist = self._mj.mj_ray(self.model, self.data, start, np.array([0.0, 0.0, -1.0]), None, 1,
                           -1, geomid)
    if geomid[0] < 0:
      return None, 0.0
    body = self.model.geom_bodyid[geomid[0]]
    name = self.model.body(body).name if body != 0 else None
    return name, float(start[2] - dist)

  # ----- the primitive -----
  def pick_place(self, pick_xy: Sequence[float], place_xy: Sequence[float],
                 rotation: float) -> bool:
    """Ravens' suction pick-and-place; True when something movable was picked. `rotation`
    turns the held object about the vertical through the cup (radians, counter-clockwise)."""
    name, touch = self.part_at(pick_xy)
    if name is None or name not in self._qadr:
      return False
    pos, yaw = self.pose(name)
    cup = np.array([pick_xy[0], pick_xy[1], touch])
    offset = pos - cup                       # Object centre relative to the cup, world frame.
    self._carry(name, cup, offset, yaw, np.array([*pick_xy, LIFT]), 0.0, CARRY_SPEED)
    target = np.array([place_xy[0], place_xy[1], LIFT])
    cup = self._carry(name, np.array([*pick_xy, LIFT]), offset, yaw, target, rotation,
                      CARRY_SPEED)
    self._lower(name, cup, offset, yaw, rotation)
    self.settle()
    return True

  @staticmethod
  def _held_pose(cup, offset, yaw, turn):
    c, s = math.cos(turn), math.sin(turn)
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    return cup + rot @ offset, yaw + turn

  def _drive(self, name, cup, offset, yaw, turn, velocity):
    """Sets the held object's pose and velocity, then steps physics once."""
    pos, new_yaw = self._held_pose(cup, offset, yaw, turn)
    q, v = self._qadr[name], self._dadr[name]
    self.data.qpos[q:q + 3] = pos
    self.data.qpos[q + 3:q + 7] = _yaw_quat(new_yaw)
    self.data.qvel[v:v + 3] = velocity
    self.data.qvel[v + 3:v + 6] = 0.0
    self._mj.mj_step(self.model, self.data)

  def _carry(self, name, start, offset, yaw, end, rotation, speed) -> np.ndarray:
    """Moves the cup in a straight line from `start` to `end` while turning from 0 to
    `rotation`; returns the cup's final position."""
    dist = float(np.linalg.norm(end - start))
    n = max(1, int(math.ceil(dist / (speed * TIMESTEP))))
    vel = (end - start) / (n * TIMESTEP)
    for k in range(1, n + 1):
      self._drive(name, start + (end - start) * k / n, offset, yaw, rotation * k / n, vel)
    return end

  def _lower(self, name, cup, offset, yaw, rotation) -> None:
    """Lowers the held object until it touches another geom or the cup reaches the table."""
    step = DESCEND_SPEED * TIMESTEP
    vel = np.array([0.0, 0.0, -DESCEND_SPEED])
    cup = cup.copy()
    while cup[2] > 0.0 and not self._touching(name):
      cup[2] -= step
      self._drive(name, cup, offset, yaw, rotation, vel)
    v = self._dadr[name]
    self.data.qvel[v:v + 6] = 0.0

  def _touching(self, name: str) -> bool:
    b = self.body[name]
    d, m = self.data, self.model
    for i in range(d.ncon):
      g1, g2 = d.contact.geom1[i], d.contact.geom2[i]
      if (m.geom_bodyid[g1] == b) != (m.geom_bodyid[g2] == b):
        return True
    return False

  def settle(self, steps: int = SETTLE_STEPS) -> None:
    for _ in range(steps):
      self._mj.mj_step(self.model, self.data)

  # ----- observation -----
  def render(self) -> dict[str, np.ndarray]:
    """`rgb` uint8 [H, W, 3] and `height` float32 [H, W] (m above the table), top-down
    orthographic over the workspace."""
    if self._renderer is None:
      raise RuntimeError("TabletopSim was built with render=False.")
    r = self._renderer
    r.update_scene(self.data, CAMERA)
    rgb = r.render().copy()
    r.enable_depth_rendering()
    r.update_scene(self.data, CAMERA)
    depth = r.render().copy()
    r.disable_depth_rendering()
    return {"rgb": rgb, "height": (CAMERA_HEIGHT - self._orthographic_depth(depth))
            .astype(np.float32)}

  def _orthographic_depth(self, depth: np.ndarray) -> np.ndarray:
    """`mujoco.Renderer` linearises the depth buffer as a perspective one; an orthographic
    buffer is linear in distance, so undo its formula and apply the orthographic one."""
    m = self.model
    near, far = m.vis.map.znear * m.stat.extent, m.vis.map.zfar * m.stat.extent
    z = (1.0 - near / depth) / (1.0 - near / far)
    return near + z * (far - near)

  def close(self) -> None:
    if self._renderer is not None:
      self._renderer.close()
      self._renderer = None
