"""A MetaWorld task in its Colosseum scene, perturbed afresh at every episode (a `HostSim`).

The episode seed names the test set too: `encode(test_set, seed)` = index * STRIDE + seed, so
one simulator (and one compiled rollout, one batch of worker processes) serves every test set
of a task, and episodes of different test sets share a batch. `reset(code)` samples each
factor of the test set from `episode_key(base_seed, seed, factor)` -- an episode is
reproducible, and "all perturbations" draws each factor exactly as its own test set does for
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

import jax
import numpy as np

from vcbench.benchmarks import colosseum as col
from vcbench.envs.mujoco import metaworld as mw
from vcbench.envs.mujoco import scene as scene_lib
from vcbench.robustness import factors as factors_lib


# Every model field some factor writes: restored from the scene's base values each episode.
_FACTOR_FIELDS = sorted({f for name in col.FACTORS for f in factors_lib.get(name).fields})
STRIDE = 1_000_000  # Above every split's episode seeds (demos.SPLIT_OFFSETS + 100k).


def encode(test_set: str, seed: int) -> int:
  """The HostSim seed of episode `seed` under `test_set`."""
  if not 0 <= seed < STRIDE:
    raise ValueError(f"episode seed {seed} outside [0, {STRIDE})")
  return col.TEST_SETS.index(col.check_test_set(test_set)) * STRIDE + seed


def decode(code: int) -> tuple[str, int]:
  if not 0 <= code < len(col.TEST_SETS) * STRIDE:
    raise ValueError(f"{code} is not a Colosseum episode code (test set * {STRIDE} + seed)")
  return col.TEST_SETS[code // STRIDE], code % STRIDE


def episode_key(base_seed: int, seed: int, factor: str) -> jax.Array:
  """The key factor `factor` is drawn with in episode `seed`."""
  key = jax.random.fold_in(jax.random.key(base_seed), seed)
  return jax.random.fold_in(key, col.FACTORS.index(factor))


def task_params(task: str, params: factors_lib.Params = factors_lib.Params()):
  """`params` with the task's own size ranges (Colosseum's per-task `scale_range`)."""
  spec = col.task_spec(task)
  return dataclasses.replace(params, mo_size=spec.mo_size or params.mo_size,
                             ro_size=spec.ro_size or params.ro_size)


class PerturbedSim(mw.MetaWorldSim):
  """`MetaWorldSim` on the Colosseum scene; `reset(encode(test_set, seed))`.

  `excluded`: factors measured unsolvable on this task (left out of "all"; refused alone).
  """

  def __init__(self, task: str, render: mw.RenderConfig | None, max_path_length: int = 500,
               base_seed: int = 0, excluded: tuple[str, ...] = (),
               params: factors_lib.Params | None = None):
    spec = col.task_spec(task)
    self.base_seed, self.excluded = base_seed, tuple(excluded)
    self.params = task_params(task, params or factors_lib.Params())
    self._mo, self._ro = spec.mo, spec.ro
    if render is not None:
      render = dataclasses.replace(render, camera=scene_lib.CAMERA)
    super().__init__(task, None, max_path_length)
    self.render_config = render
    self._scales: dict[str, float] | None = None
    self._install({})

  def factors(self, test_set: str) -> tuple[str, ...]:
    """The factors `test_set` applies here; refuses one that does not apply, with why."""
    if test_set not in (col.NONE, col.ALL):
      reason = col.inapplicable(self.task, test_set) or (
          "the scripted expert fails under it (measured)" if test_set in self.excluded else "")
      if reason:
        raise ValueError(f"Colosseum factor {test_set} does not apply to {self.task}: {reason}")
    return col.factors_of(self.task, test_set, self.excluded)

  def _install(self, scales: dict[str, float]) -> None:
    """Puts the scene compiled with `scales` into the MetaWorld env (and the renderer)."""
    import mujoco  # noqa: PLC0415
    model = scene_lib.compile_scene(self.env.fullpath, scales)
    env = self.env
    env.model, env.data = model, mujoco.MjData(model)
    env.reset_mocap_welds()  # MetaWorld sets its weld constraints on the model it loads.
    mujoco.mj_forward(model, env.data)
    self.target = scene_lib.index(model, self._mo, self._ro)
    self._base = {f: np.array(getattr(model, f)) for f in _FACTOR_FIELDS}
    self._scales = scales
    if self.render_config is not None:
      if self._renderer is not None:
        self._renderer.close()
      self._renderer, self._camera, self._flip = mw.make_renderer(
          model, self.render_config, upright_cameras=(scene_lib.CAMERA,))

  def perturb(self, code: int) -> dict[str, float]:
    """Applies the factors of episode `code` (see `encode`); returns the sizes it drew."""
    import mujoco  # noqa: PLC0415
    test_set, seed = decode(code)
    names = self.factors(test_set)
    keys = {name: episode_key(self.base_seed, seed, name) for name in names}
    scales = factors_lib.scales(keys, self.params, self._mo, self._ro)
    if scales != self._scales:
      self._install(scales)
    model = self.env.model
    for field, value in self._base.items():
      getattr(model, field)[...] = value
    for name in names:
      if not factors_lib.get(name).recompile:
        factors_lib.write(model, factors_lib.updates(name, keys[name], model, self.target,
                                                     self.params))
    mujoco.mj_setConst(model, self.env.data)  # Derived constants follow body_mass (Mass).
    return scales

  def reset(self, seed: int):
    self.perturb(seed)
    return super().reset(decode(seed)[1])


def make_sim(task: str, render: mw.RenderConfig | None, max_path_length: int,
             base_seed: int = 0, excluded: tuple[str, ...] = ()):
  """A picklable factory for `host.SimBatch` workers."""
  return functools.partial(PerturbedSim, task, render, max_path_length, base_seed,
                           tuple(excluded))


def expert_success(task: str, test_set: str, episodes: int, horizon: int,
                   base_seed: int = 0, first_seed: int = 0,
                   excluded: tuple[str, ...] = ()) -> dict:
  """MetaWorld's scripted expert under `test_set` (no rendering): success rate (success at
  any step within `horizon`) and mean length over `episodes` seeds from `first_seed`."""
  policy = mw.expert_policy(task)
  sim = PerturbedSim(task, None, horizon, base_seed, excluded)
  successes, lengths = [], []
  try:
    for seed in range(first_seed, first_seed + episodes):
      sim.reset(encode(test_set, seed))
      for step in range(1, horizon + 1):
        _, _, _, info = sim.step(sim.expert_action(policy))
        if info["success"]:
          break
      successes.append(bool(info["success"]))
      lengths.append(step)
  finally:
    sim.close()
  return {"success_rate": float(np.mean(successes)), "mean_length": float(np.mean(lengths)),
          "episodes": episodes}
