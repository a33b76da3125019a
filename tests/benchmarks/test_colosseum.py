"""The Colosseum benchmark's data: task specs, which factors apply, and the metric."""
import math

import numpy as np
import pytest

import vcbench  # noqa: F401 - before jax (XLA flags).
from vcbench.benchmarks import colosseum as col
from vcbench.envs.mujoco import scene

NO_RO = "the task has no receiver object"


def test_inapplicable_gives_the_reason_or_nothing(monkeypatch):
  """'' where a factor applies; why not where it does not (no RO, a note, no size range)."""
  assert all(col.inapplicable("hammer", f) == "" for f in col.FACTORS)
  for f in ("RO_Color", "RO_Texture", "RO_Size"):
    assert col.inapplicable("drawer-open", f) == NO_RO
  assert col.inapplicable("drawer-open", "MO_Size") == ""
  assert col.inapplicable("drawer-open", "Distractor") == ""
  note = col.inapplicable("button-press-topdown", "MO_Size")
  assert note == scene.TASKS["button-press-topdown"].notes["MO_Size"] and "RO_Size" in note
  assert col.inapplicable("button-press-topdown", "RO_Size") == ""
  monkeypatch.setitem(scene.TASKS, "fake", scene.TaskSpec("x", mo=("a",), ro=("b",),
                                                          mo_size=None, ro_size=None))
  assert col.inapplicable("fake", "MO_Size") == "the manipulation object cannot be scaled"
  assert col.inapplicable("fake", "RO_Size") == "the receiver object cannot be scaled"
  assert col.inapplicable("fake", "RO_Color") == ""


def test_factors_of_each_test_set():
  """NONE applies nothing, a factor itself, ALL every applicable and not excluded factor in
  FACTORS order but Object_Position (its own test set, as the paper's RLBench-variations
  column); unknown test sets and tasks are refused with the valid names."""
  assert col.TEST_SETS == (col.NONE, col.ALL) + col.FACTORS and len(col.FACTORS) == 15
  in_all = tuple(f for f in col.FACTORS if f != "Object_Position")
  assert col.factors_of("hammer", col.NONE) == ()
  assert col.factors_of("hammer", "Mass") == ("Mass",)
  assert col.factors_of("hammer", "Object_Position") == ("Object_Position",)
  assert col.factors_of("hammer", col.ALL) == in_all
  assert col.factors_of("drawer-open", col.ALL) == tuple(
      f for f in in_all if not f.startswith("RO_"))
  assert col.factors_of("button-press-topdown", col.ALL) == tuple(
      f for f in in_all if f != "MO_Size")
  assert col.factors_of("drawer-open", col.ALL, excluded=("Camera_Pose", "Mass")) == (
      "MO_Color", "MO_Texture", "MO_Size", "Light_Color", "Table_Color", "Table_Texture",
      "Distractor", "Background_Texture", "Friction")
  assert col.check_test_set("Friction") == "Friction"
  with pytest.raises(ValueError, match=r"unknown Colosseum test set 'Gravity'; valid: .*"
                     r"no_perturbation.*all_perturbations.*MO_Color.*Mass"):
    col.check_test_set("Gravity")
  with pytest.raises(ValueError, match="'Gravity'"):
    col.factors_of("hammer", "Gravity")
  with pytest.raises(KeyError, match=r"'reach'.*'assembly'.*'hammer'"):
    scene.task_spec("reach")
  with pytest.raises(KeyError, match="'reach'"):
    col.inapplicable("reach", "MO_Color")


def _row(task, test_set, score, pvr="mvp", benchmark=col.BENCHMARK):
  return {"benchmark": benchmark, "pvr": pvr, "task": task, "corruption": test_set,
          "score": score}


def test_success_table_and_percent_change():
  """Seeds are averaged, excluded cells (null/NaN scores) are NaN, other benchmarks ignored;
  % change compares averages over the tasks where both cells are defined."""
  rows = [
      _row("hammer", col.NONE, 60), _row("hammer", col.NONE, 80),
      _row("hammer", "MO_Color", 30), _row("hammer", "MO_Color", 40.0),
      _row("hammer", "RO_Color", 56),
      _row("drawer-open", col.NONE, 90), _row("drawer-open", "MO_Color", 45),
      _row("drawer-open", "RO_Color", None), _row("drawer-open", "RO_Color", math.nan),
      _row("door-open", "MO_Color", 100),  # No baseline: left out of % change.
      _row("hammer", col.NONE, 0, pvr="r3m"), _row("hammer", "MO_Color", 0, pvr="r3m"),
      _row("hammer", col.NONE, 5, benchmark=col.EXPERT_BENCHMARK),
      _row("hammer", col.NONE, 5, benchmark="cortexbench"),
  ]
  table = col.success_table(rows)
  assert set(table) == {"mvp", "r3m"}
  mvp = table["mvp"]
  assert set(mvp) == {"hammer", "drawer-open", "door-open"}
  assert mvp["hammer"] == {col.NONE: 70.0, "MO_Color": 35.0, "RO_Color": 56.0}
  assert mvp["drawer-open"][col.NONE] == 90.0 and mvp["drawer-open"]["MO_Color"] == 45.0
  assert math.isnan(mvp["drawer-open"]["RO_Color"])
  assert table["r3m"] == {"hammer": {col.NONE: 0.0, "MO_Color": 0.0}}

  # MO_Color: (35 + 45) / 2 = 40 vs (70 + 90) / 2 = 80 -> -50 %.
  assert col.percent_change(mvp, "MO_Color") == pytest.approx(-50.0, abs=1e-12)
  # RO_Color: only hammer has both cells: (56 - 70) / 70.
  assert col.percent_change(mvp, "RO_Color") == pytest.approx(-20.0, abs=1e-12)
  assert col.percent_change(mvp, col.NONE) == 0.0
  assert math.isnan(col.percent_change(table["r3m"], "MO_Color"))  # Baseline average 0.
  assert math.isnan(col.percent_change(mvp, "Mass"))                # No task has it.
  assert math.isnan(col.percent_change({}, "MO_Color"))
  assert col.percent_change({"t": {col.NONE: 50.0, "Mass": 75.0}}, "Mass") == 50.0


@pytest.mark.parametrize("task", sorted(col.TASKS))
def test_task_spec_names_real_bodies(task):
  """Each task is a MetaWorld task whose MO and RO roots are bodies of its Colosseum scene;
  their visible geoms are non-empty and disjoint (a colour factor on one leaves the other);
  size ranges are sane and the scene compiles at their ends."""
  pytest.importorskip("metaworld")
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415
  spec = scene.task_spec(task)
  assert mw.check_task(task) == task
  assert set(spec.notes) <= set(col.FACTORS)
  for lo_hi in (spec.mo_size, spec.ro_size):
    assert lo_hi is None or 0 < lo_hi[0] < lo_hi[1]
  assert spec.ro or spec.ro_size is None
  sim = mw.MetaWorldSim(task, None)
  try:
    xml = sim.env.fullpath
  finally:
    sim.close()
  model = scene.compile_scene(xml)
  idx = scene.index(model, spec.mo, spec.ro)
  assert len(idx.mo_geoms) > 0 and len(idx.mo_bodies) >= len(spec.mo)
  assert (len(idx.ro_geoms) > 0) == bool(spec.ro)
  overlap = np.intersect1d(idx.mo_geoms, idx.ro_geoms)
  assert overlap.size == 0, (
      f"RO geoms {[model.geom(g).name for g in overlap]} are MO geoms too")
  assert len(idx.table_geoms) > 0 and idx.floor_geom[0] >= 0 and (idx.cameras >= 0).all()
  scales = {}
  if not col.inapplicable(task, "MO_Size"):
    scales.update({r: spec.mo_size[1] for r in spec.mo})
  if not col.inapplicable(task, "RO_Size"):
    scales.update({r: spec.ro_size[0] for r in spec.ro})
  scaled = scene.compile_scene(xml, scales)
  assert scaled.nbody == model.nbody and scaled.ngeom == model.ngeom


def test_cortexbench_tasks_have_specs():
  """The five CortexBench MetaWorld tasks are all Colosseum tasks."""
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415
  assert set(mw.CORTEXBENCH_TASKS) <= set(col.TASKS) and len(col.TASKS) == 10
  assert col.TASKS == tuple(scene.TASKS)


def test_test_sets_table_refuses_what_does_not_apply_with_the_reason():
  """Every test set keeps its place (its episode codes), applicable or not: a refused one maps
  to why; measured exclusions leave "all" and are refused alone."""
  table = col.test_sets("drawer-open", {"Camera_Pose": "the expert fails"})
  assert list(table) == list(col.TEST_SETS)
  assert table[col.NONE] == () and table["MO_Color"] == ("MO_Color",)
  assert table["RO_Color"] == NO_RO and table["Camera_Pose"] == "the expert fails"
  assert "Camera_Pose" not in table[col.ALL] and "RO_Color" not in table[col.ALL]
  assert col.test_sets("hammer", ("Mass",))["Mass"] == "the scripted expert fails under it (measured)"
  assert col.encode(col.NONE, 7) == 7 and col.encode("Mass", 3) == 15 * 1_000_000 + 3


def test_definitions_name_every_factor_with_its_stable_id():
  d = col.definitions()
  assert d["test_sets"] == list(col.TEST_SETS)
  assert {n: f["id"] for n, f in d["factors"].items()} == {n: i for i, n in enumerate(col.FACTORS)}
  assert set(d["tasks"]) == set(col.TASKS) and d["params"]["num_distractors"] == 2


def test_task_horizons_and_the_rule_that_sets_them():
  """A horizon reaches 95% clean expert success (rounded up to 25 steps), or the expert's
  plateau where it never gets there; only peg-insert-side needs more than the default."""
  from launch import colosseum_horizons as horizons  # noqa: PLC0415
  assert horizons.horizon_for(np.array([10] * 95 + [60] * 5), 500) == 25
  assert horizons.horizon_for(np.array([10] * 94 + [60] * 6), 500) == 75
  stuck = np.array([30] * 80 + [260] * 8 + [501] * 12)   # 12% never succeed within 500.
  assert horizons.horizon_for(stuck, 500) == 275
  assert col.horizon("peg-insert-side") == 275 and col.horizon("hammer") == col.DEFAULT_HORIZON
  assert set(col.HORIZONS) <= set(col.TASKS)
