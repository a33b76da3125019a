"""Viewpoint graphs of vcbench-nav apartments, each property checked by independent means: node
spacing by geodesic.py's JAX field, edges by sampling their segments in metres, distances by a
plain Dijkstra, headings against the renderer's depth along the edge."""
import functools
import heapq
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.envs import nav
from vcbench.envs.nav import geodesic, render as rd, scene as sc, textures, viewpoints as vp

GRID = 64


def two_rooms(g: int = 24) -> sc.Scene:
  """Two rooms split by a wall at column 12 with a 1 m door in rows 9-12, a chair on the left,
  a sofa on the right."""
  wall = np.zeros((g, g), np.int32)
  wall[0, :] = wall[-1, :] = wall[:, 0] = wall[:, -1] = 1
  wall[:, 12] = 2
  wall[9:13, 12] = 0
  inst = -np.ones((g, g), np.int32)
  inst[2:4, 2:4] = 0
  inst[19:21, 18:22] = 1
  occupied = (wall > 0) | (inst >= 0)
  padded = np.pad(occupied, 1, constant_values=True)
  blocked = np.zeros_like(occupied)
  for dr in range(3):
    for dc in range(3):
      blocked |= padded[dr:dr + g, dc:dc + g]
  room = np.where(wall > 0, -1, np.where(np.arange(g)[None, :] < 12, 0, 1)).astype(np.int32)
  room[9:13, 12] = 1
  room_type = np.full(sc.MAX_ROOMS, -1, np.int32)
  room_type[:2] = (0, 1)
  inst_cat = np.zeros(sc.MAX_OBJECTS, np.int32)
  inst_cat[:2] = (sc.CATEGORIES.index("chair"), sc.CATEGORIES.index("sofa"))
  inst_mat = np.zeros(sc.MAX_OBJECTS, np.int32)
  inst_mat[:2] = (textures.OBJECT_MATERIALS[1][0], textures.OBJECT_MATERIALS[6][0])
  return sc.Scene(wall=wall, floor=np.full((g, g), 3, np.int32), ceiling=np.int32(6), room=room,
                  room_type=room_type, obj_inst=inst, inst_cat=inst_cat, inst_mat=inst_mat,
                  navigable=~blocked, inst_sprite=np.zeros(sc.MAX_OBJECTS, np.int32),
                  inst_box=sc.footprints(inst))


@functools.lru_cache(maxsize=None)
def apartment(index: int = 0):
  scene = jax.tree.map(lambda x: x[index], nav.scene_pool("train", index + 1, GRID))
  return scene, vp.build(scene)


def cells_on_segment(p, q, step=0.002):
  """(row, col) of points every 2 mm from p to q ((x, y) metres)."""
  n = int(math.ceil(np.linalg.norm(q - p) / step)) + 1
  pts = p[None] + np.linspace(0, 1, n)[:, None] * (q - p)[None]
  return np.floor(pts[:, ::-1] / sc.CELL).astype(int)


def dijkstra(adj, length, source):
  dist = np.full(len(adj), np.inf)
  dist[source] = 0.0
  heap = [(0.0, source)]
  while heap:
    d, u = heapq.heappop(heap)
    if d > dist[u]:
      continue
    for v in np.flatnonzero(adj[u]):
      if d + length[u, v] < dist[v]:
        dist[v] = d + length[u, v]
        heapq.heappush(heap, (dist[v], v))
  return dist


def test_graph_is_symmetric_connected_and_rooms_covered():
  scene, g = apartment()
  assert 40 <= len(g) <= 120
  assert (g.adj == g.adj.T).all() and not np.diag(g.adj).any()
  assert np.isfinite(g.dist).all()
  nav_ = np.asarray(scene.navigable)
  rc = np.floor(g.pos[:, ::-1] / sc.CELL).astype(int)
  assert nav_[rc[:, 0], rc[:, 1]].all()
  np.testing.assert_allclose(g.pos, (rc[:, ::-1] + 0.5) * sc.CELL)   # cell centres.
  rooms, sizes = np.unique(np.asarray(scene.room)[nav_], return_counts=True)
  assert set(rooms[sizes > 40].tolist()) <= set(g.room.tolist())
  assert (g.room == np.asarray(scene.room)[rc[:, 0], rc[:, 1]]).all()


def test_spacing_is_geodesic_distance_on_the_navigable_grid():
  scene, g = apartment()
  navigable = jnp.asarray(scene.navigable)
  rc = np.floor(g.pos[:, ::-1] / sc.CELL).astype(int)
  sources = np.full((len(g), GRID, GRID), geodesic.UNREACHABLE, np.float32)
  sources[np.arange(len(g)), rc[:, 0], rc[:, 1]] = 0.0
  fields = np.asarray(jax.jit(jax.vmap(geodesic.field, (None, 0)))(navigable, sources))
  between = fields[:, rc[:, 0], rc[:, 1]]
  np.fill_diagonal(between, np.inf)
  assert between.min() >= 1.5 - 1e-4


def test_edges_are_exactly_the_short_clear_segments():
  scene, g = apartment()
  nav_ = np.asarray(scene.navigable)
  for a in range(len(g)):
    for b in range(a + 1, len(g)):
      length = float(np.linalg.norm(g.pos[a] - g.pos[b]))
      if length >= 2.5:
        assert not g.adj[a, b]
        continue
      rc = cells_on_segment(g.pos[a].astype(float), g.pos[b].astype(float))
      # A 2 mm step can land on a corner the 3 cm table step passes: allow disagreement only
      # where the sampled segment grazes a blocked cell for a few millimetres.
      blocked = (~nav_[rc[:, 0], rc[:, 1]]).sum()
      if g.adj[a, b]:
        assert blocked <= 3, (a, b)
        assert g.dist[a, b] == pytest.approx(length, abs=1e-5)
      else:
        assert blocked > 0, (a, b)


def test_a_segment_through_a_wall_is_never_an_edge():
  scene = two_rooms()
  g = vp.build(scene)
  assert set(g.room.tolist()) == {0, 1}
  crossings = 0
  for a, b in zip(*np.nonzero(np.triu(g.adj))):
    rc = cells_on_segment(g.pos[a].astype(float), g.pos[b].astype(float))
    assert (scene.wall[rc[:, 0], rc[:, 1]] == 0).all()
    at_wall = rc[rc[:, 1] == 12]
    if len(at_wall):
      crossings += 1
      assert ((at_wall[:, 0] >= 9) & (at_wall[:, 0] <= 12)).all()
  assert crossings >= 1
  left, right = np.array([[4, 8]]), np.array([[4, 16]])   # rows 4: the wall, not the door.
  assert not vp.segment_clear(scene.navigable, left, right)[0]
  assert vp.segment_clear(scene.navigable, np.array([[10, 6]]), np.array([[11, 18]]))[0]


def test_dist_and_paths_match_a_plain_dijkstra():
  _, g = apartment()
  length = np.linalg.norm(g.pos[:, None] - g.pos[None], axis=-1)
  for source in (0, len(g) // 2, len(g) - 1):
    np.testing.assert_allclose(g.dist[source], dijkstra(g.adj, length, source), rtol=1e-5)
  rng = np.random.default_rng(0)
  for a, b in rng.integers(len(g), size=(20, 2)):
    path = vp.shortest_path(g, int(a), int(b))
    assert path[0] == a and path[-1] == b
    assert all(g.adj[p, q] for p, q in zip(path[:-1], path[1:]))
    assert vp.path_length(g, path) == pytest.approx(float(g.dist[a, b]), rel=1e-5)


def test_build_is_deterministic_from_its_seed():
  scene, g = apartment()
  again = vp.build(scene)
  np.testing.assert_array_equal(again.pos, g.pos)
  np.testing.assert_array_equal(again.adj, g.adj)
  other = vp.build(scene, seed=1)
  assert other.pos.shape != g.pos.shape or (other.pos != g.pos).any()


def wall_distance(scene, p, direction):
  """Metres from p along a unit direction to the first wall cell (1 mm steps)."""
  t = np.arange(0.0, scene.grid_size * sc.CELL * 1.5, 0.001)
  rc = np.floor((p[None] + t[:, None] * direction[None])[:, ::-1] / sc.CELL).astype(int)
  rc = np.clip(rc, 0, scene.grid_size - 1)
  return t[np.argmax(scene.wall[rc[:, 0], rc[:, 1]] > 0)]


@functools.partial(jax.jit, static_argnums=(4, 5))
def render_one(scene, atlas, pos, heading, camera, sensors):
  return rd.render(scene, atlas, pos, heading, camera, sensors)


def test_heading_looks_from_a_node_straight_at_its_neighbour():
  scene = two_rooms()
  g = vp.build(scene)
  camera = rd.Camera(height=9, width=33, hfov=60.0)   # row 4, column 16: the optical axis.
  atlas = jnp.asarray(textures.atlas(16))
  js = jax.tree.map(jnp.asarray, scene)
  checked = 0
  for a, b in zip(*np.nonzero(g.adj)):
    direction = (g.pos[b] - g.pos[a]).astype(float)
    direction /= np.linalg.norm(direction)
    expected = wall_distance(scene, g.pos[a].astype(float), direction)
    rc = cells_on_segment(g.pos[a].astype(float), g.pos[a] + expected * direction)
    if (scene.obj_inst[rc[:, 0], rc[:, 1]] >= 0).any():
      continue   # an object under the line of sight would complicate the check.
    depth = render_one(js, atlas, jnp.asarray(g.pos[a]), jnp.float32(g.heading(a, b)), camera,
                       ("depth",))["depth"][4, 16, 0]
    assert float(depth) == pytest.approx(expected, abs=0.01)
    assert float(depth) > np.linalg.norm(g.pos[b] - g.pos[a])
    checked += 1
  assert checked >= 4


def test_mattersim_frame_measures_heading_from_y_turning_right():
  pos = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], np.float32)
  adj = np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], bool)
  g = vp.Graph(pos=pos, room=np.full(3, -1, np.int32), adj=adj,
               dist=vp.shortest_distances(adj, np.ones((3, 3))), ids=("a", "b", "c"),
               frame="mattersim")
  assert g.heading(0, 1) == pytest.approx(0.0)
  assert g.heading(0, 2) == pytest.approx(math.pi / 2)
  assert vp.Graph(pos=pos, room=g.room, adj=adj, dist=g.dist, ids=g.ids).heading(0, 1) == \
      pytest.approx(math.pi / 2)
  with pytest.raises(ValueError, match="frame"):
    vp.Graph(pos=pos, room=g.room, adj=adj, dist=g.dist, ids=g.ids, frame="habitat")


def test_panoramas_are_direct_renders_and_candidates_face_neighbours():
  scene = two_rooms()
  g = vp.build(scene)
  camera = rd.Camera(height=8, width=12, hfov=60.0)
  atlas = textures.atlas(16)
  pano = vp.panoramas(scene, atlas, g, camera, headings=12)
  assert pano.shape == (len(g), 12, 8, 12, 3) and pano.dtype == np.uint8
  js = jax.tree.map(jnp.asarray, scene)
  for node, k in ((0, 0), (len(g) - 1, 7)):
    direct = render_one(js, jnp.asarray(atlas), jnp.asarray(g.pos[node]),
                        jnp.float32(k * 2 * math.pi / 12), camera, ("rgb",))["rgb"]
    np.testing.assert_array_equal(pano[node, k], np.asarray(direct))
  for node in range(len(g)):
    nbrs, views = vp.candidate_views(g, node, 12)
    np.testing.assert_array_equal(nbrs, np.flatnonzero(g.adj[node]))
    for b, k in zip(nbrs, views):
      off = (k * 2 * math.pi / 12 - g.heading(node, int(b)) + math.pi) % (2 * math.pi) - math.pi
      assert abs(off) <= math.pi / 12 + 1e-6
