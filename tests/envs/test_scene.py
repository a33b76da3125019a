"""The Colosseum scene: clean pixels equal MetaWorld's, the asset banks, object scaling, index."""
import mujoco
import numpy as np
import pytest

pytest.importorskip("metaworld")

import vcbench  # noqa: E402, F401 - before jax (XLA flags).
from vcbench.benchmarks import colosseum as col  # noqa: E402
from vcbench.envs.mujoco import metaworld as mw  # noqa: E402
from vcbench.envs.mujoco import scene  # noqa: E402

RENDER = mw.RenderConfig(size=64)


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


def _xml(task):
  sim = mw.MetaWorldSim(task, None)
  try:
    return sim.env.fullpath
  finally:
    sim.close()


@pytest.fixture(scope="module")
def hammer_xml():
  return _xml("hammer")


@pytest.fixture(scope="module")
def hammer(hammer_xml):
  """The unscaled hammer scene."""
  return scene.compile_scene(hammer_xml)


def _subtree_geoms(model, root):
  return np.flatnonzero(np.isin(model.geom_bodyid, scene._subtree_ids(model, (root,))))


def test_clean_scene_renders_and_steps_like_plain_metaworld():
  """Without perturbation the Colosseum scene's camera gives the very pixels of `top_cap2`,
  and the same expert actions give the same observations; after an "all perturbations"
  episode (recompiled, new renderer) a clean episode is pixel-identical again."""
  a = col.make_sim("hammer", RENDER, 500)()
  b = mw.MetaWorldSim("hammer", RENDER)
  policy = mw.expert_policy("hammer")
  try:
    oa, ob = a.reset(col.encode(col.NONE, 5)), b.reset(5)
    assert oa["rgb"].shape == (64, 64, 3) and oa["rgb"].std() > 5  # A real image.
    for k in ob:
      np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)
    for _ in range(6):
      action = b.expert_action(policy)
      np.testing.assert_array_equal(a.expert_action(policy), action)
      oa, ob = a.step(action)[0], b.step(action)[0]
    for k in ob:
      np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)
    perturbed_rgb = a.reset(col.encode(col.ALL, 5))["rgb"]
    assert np.abs(perturbed_rgb.astype(int) - ob["rgb"]).max() > 0
    oa, ob = a.reset(col.encode(col.NONE, 6)), b.reset(6)
    for k in ob:
      np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)
  finally:
    a.close()
    b.close()


def test_asset_banks_and_colours():
  """>= 100 textures (packaged images of two packages, and procedural), >= 50 distractors
  made of packaged meshes, three cameras, Colosseum's 20 colours."""
  images = [t for t in scene.TEXTURES if t.file]
  procedural = [t for t in scene.TEXTURES if t.builtin]
  assert len(scene.TEXTURES) >= 100 and len(images) >= 80 and len(procedural) >= 20
  assert {t.package for t in images} == {"metaworld", "labmaze"}
  assert len(images) + len(procedural) == len(scene.TEXTURES)
  assert len({t.name for t in scene.TEXTURES}) == len(scene.TEXTURES)
  meshes = [n for n, parts in scene.DISTRACTORS.items() if any(p.kind == "mesh" for p in parts)]
  assert len(meshes) >= 50 and len(scene.DISTRACTORS) >= 60
  assert len(scene.CAMERAS) == 3 and scene.CAMERA in scene.CAMERAS
  assert len(scene.COLOURS) == 20 and len(set(scene.COLOURS.values())) == 20
  assert scene.COLOURS["red"] == (1.0, 0.0, 0.0)
  assert scene.COLOURS["navy"] == (0.0, 0.0, 0.5)
  assert scene.COLOURS["rose"] == (1.0, 0.0, 0.5)
  assert scene.COLOURS["black"] == (0.0, 0.0, 0.0) and scene.COLOURS["white"] == (1, 1, 1)
  assert all(t.rgb1 in scene.COLOURS and t.rgb2 in scene.COLOURS for t in procedural)
  assert all(p.colour in scene.COLOURS for parts in scene.DISTRACTORS.values() for p in parts)


def test_texture_materials_and_distractors_are_in_the_model(hammer):
  """Every bank material is compiled with its texture (images decoded as is), and every
  distractor is parked at PARK, transparent (never drawn), and collides with nothing; fitted
  meshes are ~10 cm."""
  idx = scene.index(hammer, ("hammerbody",), ("box",))
  assert idx.materials.shape == (len(scene.TEXTURES),) and np.all(idx.materials >= 0)
  assert len(set(idx.materials.tolist())) == len(scene.TEXTURES)
  role = int(mujoco.mjtTextureRole.mjTEXROLE_RGB)
  for tex, mat in zip(scene.TEXTURES, idx.materials):
    tid = hammer.mat_texid[mat, role]
    assert tid >= 0 and hammer.texture(tid).name == scene.TEXTURE_PREFIX + tex.name
    size = scene.TEXTURE_SIZE
    assert (hammer.tex_width[tid], hammer.tex_height[tid]) == (size, size)
    data = hammer.tex_data[hammer.tex_adr[tid]:][:size * size * hammer.tex_nchannel[tid]]
    pixels = np.unique(data.reshape(size * size, -1), axis=0)
    assert len(pixels) >= 2, tex.name  # Not a blank texture.
    if tex.file:
      np.testing.assert_array_equal(data, scene._image(tex.package, tex.file).ravel(),
                                    err_msg=tex.name)
    if tex.name == "checker_red_white":
      assert {tuple(p) for p in pixels} == {(255, 0, 0), (255, 255, 255)}

  assert idx.distractors.shape == (len(scene.DISTRACTORS),) and np.all(idx.distractors >= 0)
  names = [hammer.body(b).name for b in idx.distractors]
  assert names == [scene.DISTRACTOR_PREFIX + n for n in scene.DISTRACTORS]
  np.testing.assert_array_equal(hammer.body_pos[idx.distractors],
                                np.tile(scene.PARK, (len(scene.DISTRACTORS), 1)))
  assert np.all(hammer.body_parentid[idx.distractors] == 0)  # Static: children of the world.
  assert np.all(hammer.body_jntnum[idx.distractors] == 0)
  for body, parts in zip(idx.distractors, scene.DISTRACTORS.values()):
    geoms = np.flatnonzero(hammer.geom_bodyid == body)
    assert len(geoms) == len(parts)
    assert np.all(hammer.geom_contype[geoms] == 0) and np.all(hammer.geom_conaffinity[geoms] == 0)
    assert np.all(hammer.geom_group[geoms] <= 2)  # Rendered once shown ...
    assert np.all(hammer.geom_rgba[geoms, 3] == 0)  # ... transparent while parked.
    if parts[0].fit:
      radius = hammer.geom_rbound[geoms[0]]   # About the mesh's centre of mass.
      assert 0.05 - 1e-3 <= radius <= 0.1 * np.sqrt(3) + 1e-3, parts[0].mesh
  np.testing.assert_array_equal(idx.distractor_geoms, np.flatnonzero(
      np.isin(hammer.geom_bodyid, idx.distractors)))
  np.testing.assert_array_equal(idx.distractors[idx.distractor_of],
                                hammer.geom_bodyid[idx.distractor_geoms])
  assert [hammer.camera(c).name for c in idx.cameras] == list(scene.CAMERAS)


def test_scaling_a_subtree_scales_its_geoms_only(hammer_xml, hammer):
  """hammerbody x1.2: its geoms' bounding radii x1.2, every other geom and every mass as
  before (the geoms keep their order: scaling edits the spec in place)."""
  big = scene.compile_scene(hammer_xml, {"hammerbody": 1.2})
  assert big.ngeom == hammer.ngeom and big.nbody == hammer.nbody
  np.testing.assert_array_equal(big.geom_bodyid, hammer.geom_bodyid)
  sub = _subtree_geoms(hammer, "hammerbody")
  assert len(sub) >= 6
  np.testing.assert_allclose(big.geom_rbound[sub], 1.2 * hammer.geom_rbound[sub], rtol=1e-5)
  rest = np.setdiff1d(np.arange(hammer.ngeom), sub)
  np.testing.assert_array_equal(big.geom_rbound[rest], hammer.geom_rbound[rest])
  np.testing.assert_array_equal(big.geom_size[rest], hammer.geom_size[rest])
  np.testing.assert_array_equal(big.body_mass, hammer.body_mass)
  unit = scene.compile_scene(hammer_xml, {"hammerbody": 1.0})  # 1.0 is a no-op.
  np.testing.assert_array_equal(unit.geom_rbound, hammer.geom_rbound)


def _mesh_vertices_in_body(model, g):
  """Vertices of mesh geom g in its body's frame."""
  m = model.geom_dataid[g]
  v = model.mesh_vert[model.mesh_vertadr[m]:][:model.mesh_vertnum[m]].astype(np.float64)
  rot = np.zeros(9)
  mujoco.mju_quat2Mat(rot, model.geom_quat[g])
  return model.geom_pos[g] + v @ rot.reshape(3, 3).T


def test_scaling_copies_shared_meshes():
  """bin-picking's bins share mesh 'bin': scaling the goal bin scales it (a scaled copy of the
  mesh) and leaves the start bin exactly as it was."""
  xml = _xml("bin-picking")
  base = scene.compile_scene(xml)
  small = scene.compile_scene(xml, {"bin_goal": 0.8})
  goal, start = _subtree_geoms(base, "bin_goal"), _subtree_geoms(base, "binA")
  is_mesh = base.geom_type == mujoco.mjtGeom.mjGEOM_MESH
  # The primitive geoms' bounding radii scale exactly.
  prim = goal[~is_mesh[goal]]
  assert len(prim) >= 5
  np.testing.assert_allclose(small.geom_rbound[prim], 0.8 * base.geom_rbound[prim], rtol=1e-5)
  # The mesh: its vertices, in the body frame, scale exactly. (Not its rbound: the bin is square,
  # so its inertia frame is degenerate and MuJoCo's box about it turns with the scale.)
  (mesh,) = goal[is_mesh[goal]]
  assert base.mesh(base.geom_dataid[mesh]).name == "bin"
  assert small.mesh(small.geom_dataid[mesh]).name != "bin"
  np.testing.assert_allclose(_mesh_vertices_in_body(small, mesh),
                             0.8 * _mesh_vertices_in_body(base, mesh), atol=1e-6)
  # The start bin still uses the unscaled shared mesh.
  (start_mesh,) = start[is_mesh[start]]
  assert small.mesh(small.geom_dataid[start_mesh]).name == "bin"
  np.testing.assert_array_equal(small.geom_rbound[start], base.geom_rbound[start])
  np.testing.assert_array_equal(_mesh_vertices_in_body(small, start_mesh),
                                _mesh_vertices_in_body(base, start_mesh))
  rest = np.setdiff1d(np.arange(base.ngeom), goal)
  np.testing.assert_array_equal(small.geom_rbound[rest], base.geom_rbound[rest])


def test_scaling_keeps_masses_of_geom_inferred_bodies(hammer_xml, hammer):
  """"Masses are kept" (scene.py) holds for bodies whose mass MuJoCo infers from their geoms'
  volume too (the hammer's box and nail have no <inertial>): same mass, inertia x s²."""
  big = scene.compile_scene(hammer_xml, {"box": 1.2})
  bodies = scene._subtree_ids(hammer, ("box",))
  assert hammer.body_mass[bodies].max() > 0
  np.testing.assert_allclose(big.body_mass, hammer.body_mass, rtol=1e-6)
  np.testing.assert_allclose(big.body_inertia[bodies], 1.44 * hammer.body_inertia[bodies],
                             rtol=1e-5)


def test_index_and_scaling_refuse_unknown_bodies(hammer_xml, hammer):
  """An unknown MO/RO body is named in the error, as is an unknown root to scale."""
  with pytest.raises(ValueError, match="no body 'anvil'"):
    scene.index(hammer, ("hammerbody",), ("anvil",))
  with pytest.raises(ValueError, match="no body 'anvil'"):
    scene.index(hammer, ("anvil",), ())
  with pytest.raises(ValueError, match="no body 'anvil' to scale"):
    scene.build_spec(hammer_xml, {"anvil": 1.1})
