"""PerturbedSim (built as the benchmark builds it): episode codes, seeded and restorable
perturbations, refusals, object sizes."""
import numpy as np
import pytest

pytest.importorskip("metaworld")

import vcbench  # noqa: E402, F401 - before jax (XLA flags).
from vcbench.benchmarks import colosseum as col  # noqa: E402
from vcbench.envs.mujoco import scene  # noqa: E402
from vcbench.robustness import factors, perturbed  # noqa: E402

# The fields the factors write, compared after a clean episode (body_pos: distractors only,
# MetaWorld itself places some bodies on reset).
RESTORED = ("light_diffuse", "geom_rgba", "geom_matid", "cam_pos", "cam_quat", "geom_friction",
            "body_mass", "body_inertia")


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


@pytest.fixture(scope="module")
def hammer():
  sim = col.make_sim("hammer", None, 200)()
  yield sim
  sim.close()


def _snapshot(sim):
  m = sim.env.model
  out = {f: np.array(getattr(m, f)) for f in RESTORED}
  out["distractor_pos"] = np.array(m.body_pos[sim.target.distractors])
  out["distractor_quat"] = np.array(m.body_quat[sim.target.distractors])
  return out


def test_encode_decode_round_trip_and_ranges():
  """Every test set and seed survives encode -> decode; codes of different test sets differ;
  seeds and codes out of range are refused."""
  codes = set()
  for test_set in col.TEST_SETS:
    for seed in (0, 1, 24, 999_999):
      code = col.encode(test_set, seed)
      assert perturbed.decode(col.TEST_SETS, code) == (test_set, seed)
      codes.add(code)
  assert len(codes) == 4 * len(col.TEST_SETS)
  assert col.encode(col.NONE, 7) == 7  # Clean episodes keep their seeds.
  assert perturbed.decode(col.TEST_SETS, np.int32(col.encode("Mass", 3))) == ("Mass", 3)
  for seed in (-1, perturbed.STRIDE):
    with pytest.raises(ValueError, match="outside"):
      col.encode("Mass", seed)
  for code in (-1, len(col.TEST_SETS) * perturbed.STRIDE):
    with pytest.raises(ValueError, match="not an episode code"):
      perturbed.decode(col.TEST_SETS, code)
  with pytest.raises(ValueError, match="unknown Colosseum test set 'Gravity'"):
    col.encode("Gravity", 0)
  with pytest.raises(ValueError, match="'Mass' is not one of this simulator's"):
    perturbed.encode(("no_perturbation",), "Mass", 0)


def test_light_colour_is_seeded_per_episode(hammer):
  """The same episode gives the same light colour, another episode another one."""
  hammer.reset(col.encode("Light_Color", 3))
  first = np.array(hammer.env.model.light_diffuse)
  hammer.reset(col.encode("Light_Color", 3))
  np.testing.assert_array_equal(hammer.env.model.light_diffuse, first)
  hammer.reset(col.encode("Light_Color", 4))
  assert np.abs(hammer.env.model.light_diffuse - first).max() > 1e-3
  assert np.all(first <= 0.5) and np.all(first == first[:1])  # One colour for every light.


def test_clean_episode_restores_every_perturbed_field():
  """After an "all perturbations" episode (no size factor: the live model is perturbed in
  place, never recompiled), a clean episode brings back every field to the fresh scene's."""
  sim = col.make_sim("hammer", None, 200, excluded=("MO_Size", "RO_Size"))()
  try:
    model = sim.env.model
    fresh = _snapshot(sim)
    sim.reset(col.encode(col.ALL, 3))
    assert sim.env.model is model
    hit = _snapshot(sim)
    for k in fresh:
      assert not np.array_equal(hit[k], fresh[k]), f"{k} not perturbed"
    sim.reset(col.encode(col.NONE, 3))
    assert sim.env.model is model
    again = _snapshot(sim)
    for k in fresh:
      np.testing.assert_array_equal(again[k], fresh[k], err_msg=k)
  finally:
    sim.close()


def test_all_perturbations_draw_each_factor_as_alone(hammer):
  """In one episode, "all" draws the light, the camera and the distractors exactly as each
  factor's own test set does."""
  def after(test_set):
    hammer.reset(col.encode(test_set, 11))
    return _snapshot(hammer)

  every = after(col.ALL)
  light, camera, distractor = after("Light_Color"), after("Camera_Pose"), after("Distractor")
  np.testing.assert_array_equal(every["light_diffuse"], light["light_diffuse"])
  np.testing.assert_array_equal(every["cam_pos"], camera["cam_pos"])
  np.testing.assert_array_equal(every["cam_quat"], camera["cam_quat"])
  np.testing.assert_array_equal(every["distractor_pos"], distractor["distractor_pos"])
  np.testing.assert_array_equal(every["distractor_quat"], distractor["distractor_quat"])
  assert not np.array_equal(light["cam_pos"], camera["cam_pos"])  # Camera_Pose moved it.


def test_refusals_and_excluded_factors():
  """A factor without its object is refused with the reason; an excluded one is refused
  alone and left out of "all"."""
  drawer = col.make_sim("drawer-open", None, 50)()
  try:
    for test_set in ("RO_Color", "RO_Texture", "RO_Size"):
      with pytest.raises(ValueError, match=f"{test_set} does not apply.*receiver"):
        drawer.reset(col.encode(test_set, 0))
    assert not {"RO_Color", "RO_Texture", "RO_Size"} & set(drawer.test_sets[col.ALL])
  finally:
    drawer.close()
  sim = col.make_sim("hammer", None, 50, excluded=("Camera_Pose",))()
  try:
    cam = sim.target.cameras
    pos, quat = np.array(sim.env.model.cam_pos[cam]), np.array(sim.env.model.cam_quat[cam])
    with pytest.raises(ValueError, match="Camera_Pose does not apply to hammer.*expert"):
      sim.reset(col.encode("Camera_Pose", 0))
    assert "Camera_Pose" not in sim.test_sets[col.ALL]
    assert len(sim.test_sets[col.ALL]) == len(col.FACTORS) - 1 - len(col.NOT_IN_ALL)
    sim.reset(col.encode(col.ALL, 0))
    np.testing.assert_array_equal(sim.env.model.cam_pos[sim.target.cameras], pos)
    np.testing.assert_array_equal(sim.env.model.cam_quat[sim.target.cameras], quat)
  finally:
    sim.close()


def test_task_params_take_the_task_size_ranges():
  """Per-task size ranges replace the defaults; a task without one keeps the default."""
  p = perturbed.task_params("hammer")
  assert (p.mo_size, p.ro_size) == ((0.9, 1.1), (0.9, 1.1))
  p = perturbed.task_params("button-press-topdown")
  assert (p.mo_size, p.ro_size) == (factors.Params().mo_size, (0.85, 1.15))
  assert perturbed.task_params("hammer").light_range == factors.Params().light_range


def test_mo_size_scales_the_hammer_by_the_drawn_factor(hammer):
  """MO_Size recompiles the scene with the hammer scaled by the episode's draw (inside the
  task's range); the box and the rest are unchanged; the expert still solves it."""
  base = scene.compile_scene(hammer.env.fullpath)
  mo = scene._subtree_ids(base, ("hammerbody",))
  mo_geoms = np.flatnonzero(np.isin(base.geom_bodyid, mo))
  draws = []
  for seed in (2, 3):
    key = factors.episode_key(hammer.base_seed, seed, "MO_Size")
    s = factors.scales({"MO_Size": key}, hammer.params, ("hammerbody",), ("box",))
    assert set(s) == {"hammerbody"} and 0.9 <= s["hammerbody"] <= 1.1
    assert hammer.perturb(col.encode("MO_Size", seed)) == s
    hammer.reset(col.encode("MO_Size", seed))
    model = hammer.env.model
    np.testing.assert_allclose(model.geom_rbound[mo_geoms],
                               s["hammerbody"] * base.geom_rbound[mo_geoms], rtol=1e-5)
    rest = np.setdiff1d(np.arange(base.ngeom), mo_geoms)
    np.testing.assert_array_equal(model.geom_rbound[rest], base.geom_rbound[rest])
    draws.append(s["hammerbody"])
  assert abs(draws[0] - draws[1]) > 1e-4 and all(abs(d - 1) > 1e-4 for d in draws)
  hammer.reset(col.encode(col.NONE, 2))
  np.testing.assert_array_equal(hammer.env.model.geom_rbound, base.geom_rbound)
  result = col.expert_success("hammer", "MO_Size", 2, 200)
  assert result["success_rate"] == 1.0 and result["episodes"] == 2
  assert 1 <= result["mean_length"] < 200


def test_object_position_draws_from_wider_boxes_and_restores_them(hammer):
  """Object_Position: the episode's placements come from MetaWorld's own boxes widened about
  their centres (outside them for some seeds), the same for the same seed, and the boxes are
  MetaWorld's again afterwards; it is its own test set, not part of "all perturbations"."""
  space = hammer.env._random_reset_space
  low, high = np.array(space.low), np.array(space.high)
  wide_low, wide_high = factors.widened(low, high, factors.Params().position_spread)
  outside = 0
  for seed in range(12):
    hammer.reset(col.encode("Object_Position", seed))
    vec = np.array(hammer.env._last_rand_vec)
    assert (vec >= wide_low - 1e-9).all() and (vec <= wide_high + 1e-9).all()
    outside += bool(((vec < low) | (vec > high)).any())
    np.testing.assert_array_equal(hammer.env._random_reset_space.low, low)
    hammer.reset(col.encode("Object_Position", seed))
    np.testing.assert_array_equal(hammer.env._last_rand_vec, vec)
    hammer.reset(col.encode(col.NONE, seed))
    clean = np.array(hammer.env._last_rand_vec)
    assert (clean >= low - 1e-9).all() and (clean <= high + 1e-9).all()
  assert outside >= 3
  assert "Object_Position" not in col.factors_of("hammer", col.ALL)
  with pytest.raises(ValueError, match="PerturbedSim"):
    factors.updates("Object_Position", None, hammer.env.model, hammer.target)


def test_every_scene_camera_renders_its_own_view_and_camera_pose_moves_each():
  """The front camera is top_cap2's view; the shoulder cameras see the work area from either
  side (different images, the task in view); Camera_Pose changes each camera's image."""
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415
  frames = {}
  for camera in ("top_cap2",) + tuple(scene.CAMERAS)[1:]:
    sim = col.make_sim("drawer-open", mw.RenderConfig(size=48, camera=camera), 50)()
    try:
      clean = sim.reset(col.encode(col.NONE, 3))["rgb"].astype(int)
      moved = sim.reset(col.encode("Camera_Pose", 3))["rgb"].astype(int)
    finally:
      sim.close()
    assert clean.std() > 5 and np.abs(clean - moved).mean() > 1, camera
    frames[camera] = clean
  views = list(frames.values())
  assert all(np.abs(a - b).mean() > 5 for i, a in enumerate(views) for b in views[i + 1:])
  with pytest.raises(ValueError, match="no camera 'corner'"):
    col.make_sim("drawer-open", mw.RenderConfig(size=48, camera="corner"), 50)()
