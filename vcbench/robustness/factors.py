"""The Colosseum's perturbation factors as pure, seeded functions on MuJoCo model fields.

A factor is `fn(key, fields, target, params) -> updates`, registered under its name and a stable
integer id that keys its random draws (`episode_key`): it reads model fields (a mapping
field name -> array) and returns, for each field it declares (`Factor.fields`), the entries it
sets and their new values, `{field: (index, values)}`, only ever the entries of its targets
(`target`: the scene's `SceneIndex`, integer arrays of MO/RO/table/floor geoms, bodies, camera,
texture materials, distractor pool). Untouched entries are never rewritten, so a float64
MjModel keeps them bit-exact. It is written in jax.numpy, so one function serves both
simulators:

- `apply(name, key, model, target, params)` on a `mujoco.MjModel` returns a perturbed copy
  (CPU rendering: `vcbench.robustness.perturbed` copies the fields into its live model);
- on an `mjx.Model` it returns `model.replace(...)`: jittable and vmappable over keys, so a
  batch of perturbed scenes is one call. Fields MJX does not have (lights) are refused with
  the reason.

MO_Size and RO_Size change meshes, which only a recompile can do: they are `recompile`
factors whose function returns the scale per root body, and `scene.compile_scene` builds the
model from it (refused on a compiled model with that reason). Object_Position is not a model
field either but MetaWorld's own placement of objects and goals: a `reset` factor whose
function returns how much wider than MetaWorld's the box they are drawn from is
(`perturbed.PerturbedSim` applies it at the episode's reset).

Parameters are data (`Params`): Colosseum's defaults (docs/design.md; robot-colosseum's
`assets/configs/*.yaml`), overridable per task. Friction and mass are relative (a factor on
the model's own value), since MetaWorld's objects span 0.01-11 kg; Colosseum samples absolute
values from per-task ranges.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.envs.mujoco import scene as scene_lib
from vcbench.registry import Registry

Updates = dict[str, tuple[Any, jax.Array]]  # field -> (index into the field, new values)
Box = tuple[tuple[float, float, float], tuple[float, float, float]]


@dataclasses.dataclass(frozen=True)
class Params:
  """Every factor's parameters (Colosseum's defaults)."""
  light_range: Box = ((0.0, 0.0, 0.0), (0.5, 0.5, 0.5))
  table_colour_range: Box = ((0.25, 0.25, 0.25), (1.0, 1.0, 1.0))
  camera_position: float = 0.1      # Uniform delta per axis (m).
  camera_euler: float = 0.05        # Uniform delta per Euler angle (rad).
  num_distractors: int = 2
  # Spawn boundaries on the table top (xyz boxes), left and right of MetaWorld's workspace
  # (objects and goals live in x in [-0.3, 0.3]).
  spawn: tuple[Box, ...] = (((0.33, 0.45, 0.0), (0.5, 0.85, 0.0)),
                            ((-0.5, 0.45, 0.0), (-0.33, 0.85, 0.0)))
  friction_range: tuple[float, float] = (0.5, 1.5)   # Factor on the MO's sliding friction.
  mass_range: tuple[float, float] = (0.5, 2.0)       # Factor on the MO's masses and inertias.
  mo_size: tuple[float, float] = (0.75, 1.25)
  ro_size: tuple[float, float] = (0.75, 1.25)
  # Object_Position: MetaWorld's object and goal placement boxes, this many times as wide
  # about their centres (positions outside the training demos' range).
  position_spread: float = 1.5


@dataclasses.dataclass(frozen=True)
class Factor:
  """A registered factor: its function, the model fields it writes, where it runs, and its
  stable `id`, which its random draws are keyed by (`episode_key`)."""
  name: str
  fn: Callable[..., Any]
  fields: tuple[str, ...]
  id: int
  recompile: bool = False
  reset: bool = False

  @property
  def on_model(self) -> bool:
    """Whether it writes fields of a compiled model (neither a recompile nor a reset)."""
    return not (self.recompile or self.reset)


FACTORS = Registry("perturbation factor")


def register(name: str, fields: tuple[str, ...], *, id: int, recompile: bool = False,  # pylint: disable=redefined-builtin
             reset: bool = False):
  """Registers `fn(key, fields, target, params)` as factor `name`.

  `id` is the factor's for good: draws are keyed by it, so a factor added later (any unused id)
  changes no other factor's draws. Ids are never reused."""
  taken = {f.id: f.name for f in FACTORS.values()}
  if not isinstance(id, int) or id < 0 or id in taken:
    raise ValueError(f"factor {name!r}: id {id!r} must be a new int >= 0 (taken: {taken})")

  def decorator(fn):
    FACTORS.register(name)(Factor(name, fn, tuple(fields), id, recompile, reset))
    return fn
  return decorator


def get(name: str) -> Factor:
  return FACTORS.get(name)


def episode_key(base_seed: int, seed: int, name: str) -> jax.Array:
  """The key factor `name` is drawn with in episode `seed`: the same whichever test set the
  episode belongs to, so "all perturbations" draws each factor as its own test set does."""
  key = jax.random.fold_in(jax.random.key(base_seed), seed)
  return jax.random.fold_in(key, get(name).id)


COLOURS = jnp.asarray(list(scene_lib.COLOURS.values()), jnp.float32)
_WHITE = jnp.ones(4, jnp.float32)


def _rows(rows) -> np.ndarray:
  return np.asarray(rows, np.int64).reshape(-1)


def _look(geoms, rgba, matid) -> Updates:
  """Every geom in `geoms` gets colour `rgba` and material `matid` (-1: none)."""
  g = _rows(geoms)
  return {"geom_rgba": (g, jnp.broadcast_to(rgba, (len(g), 4))),
          "geom_matid": (g, jnp.broadcast_to(matid, (len(g),)))}


def _colour(key, geoms, target) -> Updates:
  del target
  rgb = COLOURS[jax.random.randint(key, (), 0, COLOURS.shape[0])]
  return _look(geoms, jnp.append(rgb, 1.0), -1)


def _texture(key, geoms, target) -> Updates:
  mat = jnp.asarray(target.materials)[jax.random.randint(key, (), 0, len(target.materials))]
  return _look(geoms, _WHITE, mat)


def _on_geoms(key, fields, target, params, *, geoms: str, look) -> Updates:
  del fields, params
  return look(key, getattr(target, geoms), target)


_LOOKS = ("geom_rgba", "geom_matid")
# The floor around the table is the background of every MetaWorld view (Colosseum changes the
# walls of its room).
for _name, _id, _geoms, _fn in (("MO_Color", 0, "mo_geoms", _colour),
                                ("RO_Color", 1, "ro_geoms", _colour),
                                ("MO_Texture", 2, "mo_geoms", _texture),
                                ("RO_Texture", 3, "ro_geoms", _texture),
                                ("Table_Texture", 8, "table_geoms", _texture),
                                ("Background_Texture", 10, "floor_geom", _texture)):
  register(_name, _LOOKS, id=_id)(functools.partial(_on_geoms, geoms=_geoms, look=_fn))


@register("Table_Color", _LOOKS, id=7)
def table_colour(key, fields, target, params):
  del fields
  lo, hi = (jnp.asarray(b, jnp.float32) for b in params.table_colour_range)
  rgb = jax.random.uniform(key, (3,), minval=lo, maxval=hi)
  return _look(target.table_geoms, jnp.append(rgb, 1.0), -1)


@register("Light_Color", ("light_diffuse",), id=6)
def light_colour(key, fields, target, params):
  """One colour for every light, as Colosseum's three directional lights."""
  lo, hi = (jnp.asarray(b, jnp.float32) for b in params.light_range)
  rgb = jax.random.uniform(key, (3,), minval=lo, maxval=hi)
  lights = np.arange(target.num_lights)
  del fields
  return {"light_diffuse": (lights, jnp.broadcast_to(rgb, (len(lights), 3)))}


def euler_to_quat(euler: jax.Array) -> jax.Array:
  """(w, x, y, z) of the rotation R = Rz(c) Ry(b) Rx(a) for Euler angles (a, b, c)."""
  h = euler / 2
  (ca, cb, cc), (sa, sb, sc) = jnp.cos(h), jnp.sin(h)
  return jnp.stack([ca * cb * cc + sa * sb * sc, sa * cb * cc - ca * sb * sc,
                    ca * sb * cc + sa * cb * sc, ca * cb * sc - sa * sb * cc])


def quat_mul(p: jax.Array, q: jax.Array) -> jax.Array:
  w1, x1, y1, z1 = p
  w2, x2, y2, z2 = q
  return jnp.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                    w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


@register("Camera_Pose", ("cam_pos", "cam_quat"), id=11)
def camera_pose(key, fields, target, params):
  """Each of the scene's cameras: position += U(±0.1 m)³; orientation rotated by Euler deltas
  U(±0.05 rad)³ in the camera's own frame (the front camera drawn from `key`, the others from
  keys folded from it)."""
  cams = _rows(target.cameras)
  pos, quat = [], []
  for i, c in enumerate(cams):
    kp, ke = jax.random.split(key if i == 0 else jax.random.fold_in(key, i))
    dp = jax.random.uniform(kp, (3,), minval=-params.camera_position,
                            maxval=params.camera_position)
    de = jax.random.uniform(ke, (3,), minval=-params.camera_euler, maxval=params.camera_euler)
    q = quat_mul(fields["cam_quat"][c], euler_to_quat(de))
    pos.append(fields["cam_pos"][c] + dp)
    quat.append(q / jnp.linalg.norm(q))
  return {"cam_pos": (cams, jnp.stack(pos)), "cam_quat": (cams, jnp.stack(quat))}


@register("Distractor", ("body_pos", "body_quat", "geom_rgba"), id=9)
def distractor(key, fields, target, params):
  """`num_distractors` distinct objects of the pool, each at a uniform point of a random
  spawn boundary with a random yaw, and shown (alpha 1); the rest stay parked, transparent."""
  n = params.num_distractors
  kc, kb, kp, ky = jax.random.split(key, 4)
  pool = jnp.asarray(target.distractors)
  picked = jax.random.choice(kc, len(target.distractors), (n,), replace=False)
  chosen = pool[picked]
  g = _rows(target.distractor_geoms)
  shown = jnp.any(jnp.asarray(target.distractor_of)[:, None] == picked[None], axis=1)
  rgba = fields["geom_rgba"][g].at[:, 3].set(shown.astype(fields["geom_rgba"].dtype))
  boxes = jnp.asarray(params.spawn, jnp.float32)                       # [B, 2, 3]
  box = boxes[jax.random.randint(kb, (n,), 0, boxes.shape[0])]
  xyz = jax.random.uniform(kp, (n, 3), minval=box[:, 0], maxval=box[:, 1])
  yaw = jax.random.uniform(ky, (n,), minval=-jnp.pi, maxval=jnp.pi)
  quat = jnp.stack([jnp.cos(yaw / 2), 0 * yaw, 0 * yaw, jnp.sin(yaw / 2)], axis=1)
  return {"body_pos": (chosen, xyz), "body_quat": (chosen, quat), "geom_rgba": (g, rgba)}


def _uniform(key, lo_hi):
  return jax.random.uniform(key, (), minval=lo_hi[0], maxval=lo_hi[1])


@register("Friction", ("geom_friction",), id=12)
def friction(key, fields, target, params):
  """The MO's sliding friction times one factor (Colosseum's `friction_same`)."""
  g = _rows(target.mo_geoms_all)
  s = _uniform(key, params.friction_range)
  return {"geom_friction": ((g, 0), fields["geom_friction"][g, 0] * s)}


@register("Mass", ("body_mass", "body_inertia"), id=13)
def mass(key, fields, target, params):
  """The MO's masses and inertias times one factor (its density changes, not its shape)."""
  s = _uniform(key, params.mass_range)
  b = _rows(target.mo_bodies)
  return {"body_mass": (b, fields["body_mass"][b] * s),
          "body_inertia": (b, fields["body_inertia"][b] * s)}


@register("MO_Size", (), id=4, recompile=True)
def mo_size(key, fields, target, params):
  del fields, target
  return {"mo": _uniform(key, params.mo_size)}


@register("RO_Size", (), id=5, recompile=True)
def ro_size(key, fields, target, params):
  del fields, target
  return {"ro": _uniform(key, params.ro_size)}


@register("Object_Position", (), id=14, reset=True)
def object_position(key, fields, target, params):
  """MetaWorld draws the episode's object and goal positions itself (from the episode seed);
  this factor widens the boxes it draws them from (`PerturbedSim` applies it at reset)."""
  del key, fields, target
  return {"spread": params.position_spread}


def widened(low: np.ndarray, high: np.ndarray, spread: float) -> tuple[np.ndarray, np.ndarray]:
  """A box `spread` times as wide as [low, high] about its centre."""
  centre, half = (low + high) / 2, (high - low) / 2
  return centre - spread * half, centre + spread * half


def scales(factor_keys: Mapping[str, jax.Array], params: Params, mo: tuple[str, ...],
           ro: tuple[str, ...]) -> dict[str, float]:
  """Root body -> scale for the size factors among `factor_keys` (factor name -> key)."""
  out: dict[str, float] = {}
  for name, roots in (("MO_Size", mo), ("RO_Size", ro)):
    if name in factor_keys:
      s = float(get(name).fn(factor_keys[name], None, None, params)[name[:2].lower()])
      out.update({root: s for root in roots})
  return out


def _is_mjx(model) -> bool:
  return not hasattr(model, "_address") and hasattr(model, "replace")


def fields_of(model, names) -> dict[str, jax.Array]:
  missing = [n for n in names if not hasattr(model, n)]
  if missing:
    kind = "mjx.Model" if _is_mjx(model) else type(model).__name__
    raise ValueError(f"{kind} has no field(s) {missing}: this factor cannot run on it"
                     + (" (MJX does not model lights or other rendering-only state)"
                        if _is_mjx(model) else ""))
  return {n: jnp.asarray(getattr(model, n)) for n in names}


def updates(name: str, key: jax.Array, model, target, params: Params = Params()) -> Updates:
  """The entries factor `name` sets and their new values (computed from `model`)."""
  factor = get(name)
  if factor.recompile:
    raise ValueError(f"{name} changes meshes, which needs recompiling the MJCF: sample the "
                     "scales with factors.scales(...) and build the model with "
                     "vcbench.envs.mujoco.scene.compile_scene(xml, scales)")
  if factor.reset:
    raise ValueError(f"{name} changes where MetaWorld places objects at reset, no model "
                     "field: vcbench.robustness.perturbed.PerturbedSim applies it")
  return factor.fn(key, fields_of(model, factor.fields), target, params)


def apply(name: str, key: jax.Array, model, target, params: Params = Params()):
  """Factor `name` applied to a `mujoco.MjModel` (a perturbed copy) or an `mjx.Model`."""
  new = updates(name, key, model, target, params)
  if _is_mjx(model):
    return model.replace(**{f: getattr(model, f).at[i].set(v.astype(getattr(model, f).dtype))
                            for f, (i, v) in new.items()})
  out = copy.copy(model)
  write(out, new)
  return out


def write(model, new: Updates) -> None:
  """Sets the entries of `new` in a `mujoco.MjModel`, in place."""
  for field, (index, value) in new.items():
    getattr(model, field)[index] = np.asarray(value)
