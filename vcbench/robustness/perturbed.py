"""A MetaWorld task in its Colosseum scene, perturbed afresh at every episode (a `HostSim`).

A sim is built with its test sets: an ordered mapping name -> the factors that test set applies
on this task, or why it does not apply (the benchmark decides: `benchmarks.colosseum.test_sets`). The
episode seed names the test set too: `encode(names, test_set, seed)` = its position * STRIDE +
seed, so one simulator (and one compiled rollout, one batch of worker processes) serves every
test set of a task, and episodes of different test sets share a batch. `reset(code)` samples
each factor of the test set from `factors.episode_key(base_seed, seed, factor)` -- an episode
is reproducible, and "all perturbations" draws each factor exactly as its own test set does for
that episode -- then
1. recompiles the scene if a size factor is on (meshes scale; the renderer is rebuilt),
2. restores the base values of the fields the factors write and applies each factor's pure
   update (`factors.updates`) to the live model, then `mj_setConst` recomputes the model's
   derived constants (every episode: a Mass episode leaves them changed for the next),
3. resets MetaWorld's task (object and goal placement) on the perturbed model.
When two factors write the same geoms ("all": MO_Color then MO_Texture), the later one wins.
Without perturbation, frames equal the plain `MetaWorldSim`'s through `top_cap2` (test), so
the clean demos of CortexBench's pipeline are the Colosseum's training data.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Mapping, Sequence, Union

import numpy as np

from vcbench.envs.mujoco import metaworld as mw
from vcbench.envs.mujoco import scene as scene_lib
from vcbench.robustness import factors as factors_lib

STRIDE = 1_000_000  # Above every split's episode seeds (demos.SPLIT_OFFSETS + 100k).
# test set -> the factors it applies, in order, or (a str) why it does not apply to the task.
TestSets = Mapping[str, Union[Sequence[str], str]]


def _table(test_sets: TestSets | None) -> dict[str, tuple[str, ...] | str]:
  return {name: v if isinstance(v, str) else tuple(v) for name, v in (test_sets or {}).items()}


def encode(names: Sequence[str], test_set: str, seed: int) -> int:
  """The HostSim seed of episode `seed` under `test_set`, one of `names` (a sim's test sets)."""
  if not 0 <= seed < STRIDE:
    raise ValueError(f"episode seed {seed} outside [0, {STRIDE})")
  names = list(names)
  if test_set not in names:
    raise ValueError(f"test set {test_set!r} is not one of this simulator's {names}")
  return names.index(test_set) * STRIDE + seed


def decode(names: Sequence[str], code: int) -> tuple[str, int]:
  names = list(names)
  if not 0 <= code < len(names) * STRIDE:
    raise ValueError(f"{code} is not an episode code of test sets {names} (test set * "
                     f"{STRIDE} + seed)")
  return names[code // STRIDE], code % STRIDE


def task_params(task: str, params: factors_lib.Params = factors_lib.Params()):
  """`params` with the task's own size ranges (Colosseum's per-task `scale_range`)."""
  spec = scene_lib.task_spec(task)
  return dataclasses.replace(params, mo_size=spec.mo_size or params.mo_size,
                             ro_size=spec.ro_size or params.ro_size)


class PerturbedSim(mw.MetaWorldSim):
  """`MetaWorldSim` on the Colosseum scene; `reset(encode(names, test_set, seed))`, where
  `names` is the order of `test_sets` (test set -> the factors it applies)."""

  def __init__(self, task: str, render: mw.RenderConfig | None, max_path_length: int = 500,
               base_seed: int = 0, test_sets: TestSets | None = None,
               params: factors_lib.Params | None = None):
    spec = scene_lib.task_spec(task)
    self.base_seed = base_seed
    self.test_sets = _table(test_sets)
    # Unknown factors fail here, not in a worker's first episode. The fields the test sets'
    # factors write are restored to the scene's values before each episode's draws.
    self._fields = sorted({f for fs in self.test_sets.values() if not isinstance(fs, str)
                           for name in fs for f in factors_lib.get(name).fields})
    self.params = task_params(task, params or factors_lib.Params())
    self._mo, self._ro = spec.mo, spec.ro
    if render is not None:
      render = dataclasses.replace(render, camera=scene_camera(render.camera))
    super().__init__(task, None, max_path_length)
    self.render_config = render
    self._scales: dict[str, float] | None = None
    self._install({})

  def _install(self, scales: dict[str, float]) -> None:
    """Puts the scene compiled with `scales` into the MetaWorld env (and the renderer)."""
    import mujoco  # noqa: PLC0415
    model = scene_lib.compile_scene(self.env.fullpath, scales)
    env = self.env
    env.model, env.data = model, mujoco.MjData(model)
    env.reset_mocap_welds()  # MetaWorld sets its weld constraints on the model it loads.
    mujoco.mj_forward(model, env.data)
    self.target = scene_lib.index(model, self._mo, self._ro)
    self._base = {f: np.array(getattr(model, f)) for f in self._fields}
    self._scales = scales
    if self.render_config is not None:
      if self._renderer is not None:
        self._renderer.close()
      self._renderer, self._camera, self._flip = mw.make_renderer(
          model, self.render_config, upright_cameras=tuple(scene_lib.CAMERAS))

  def perturb(self, code: int) -> dict[str, float]:
    """Applies the factors of episode `code` (see `encode`); returns the sizes it drew."""
    import mujoco  # noqa: PLC0415
    test_set, seed = decode(list(self.test_sets), code)
    names = self.test_sets[test_set]
    if isinstance(names, str):
      raise ValueError(f"Colosseum test set {test_set} does not apply to {self.task}: {names}")
    keys = {name: factors_lib.episode_key(self.base_seed, seed, name) for name in names}
    scales = factors_lib.scales(keys, self.params, self._mo, self._ro)
    if scales != self._scales:
      self._install(scales)
    model = self.env.model
    for field, value in self._base.items():
      getattr(model, field)[...] = value
    for name in names:
      if factors_lib.get(name).on_model:
        factors_lib.write(model, factors_lib.updates(name, keys[name], model, self.target,
                                                     self.params))
    mujoco.mj_setConst(model, self.env.data)  # Derived constants follow body_mass (Mass).
    return scales

  def reset(self, seed: int):
    self.perturb(seed)
    test_set, episode = decode(list(self.test_sets), seed)
    spread = [factors_lib.get(n).fn(None, None, None, self.params)["spread"]
              for n in self.test_sets[test_set] if factors_lib.get(n).reset]
    if not spread:
      return super().reset(episode)
    # Object_Position: MetaWorld draws this episode's placements from wider boxes.
    space = self.env._random_reset_space  # noqa: SLF001 - MetaWorld's placement boxes.
    low, high = factors_lib.widened(space.low, space.high, spread[0])
    self.env._random_reset_space = type(space)(low, high, dtype=space.dtype)  # noqa: SLF001
    try:
      return super().reset(episode)
    finally:
      self.env._random_reset_space = space  # noqa: SLF001


def scene_camera(camera: str) -> str:
  """The scene camera a render config's camera names: one of `scene.CAMERAS`, or top_cap2
  (whose pose the front camera has)."""
  if camera == "top_cap2":
    return scene_lib.CAMERA
  if camera not in scene_lib.CAMERAS:
    raise ValueError(f"the Colosseum scene has no camera {camera!r}; valid: top_cap2 (= "
                     f"{scene_lib.CAMERA}), {', '.join(scene_lib.CAMERAS)}")
  return camera


def make_sim(task: str, render: mw.RenderConfig | None, max_path_length: int,
             base_seed: int = 0, test_sets: TestSets | None = None):
  """A picklable factory for `host.SimBatch` workers."""
  return functools.partial(PerturbedSim, task, render, max_path_length, base_seed,
                           _table(test_sets))
