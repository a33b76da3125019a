"""Geodesic fields against brute-force Dijkstra, and the continuous distance lookup."""
import heapq
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vcbench  # noqa: F401
from handscene import hand_scene, navigable_from
from vcbench.envs.nav import geodesic
from vcbench.envs.nav.scene import CELL


def dijkstra(nav: np.ndarray, source: np.ndarray) -> np.ndarray:
  """Textbook Dijkstra on the 8-connected grid without corner cutting."""
  g = nav.shape[0]
  dist = np.full(nav.shape, np.inf)
  heap = [(source[r, c], r, c) for r, c in zip(*np.nonzero(nav & (source < 1e5)))]
  for d, r, c in heap:
    dist[r, c] = min(dist[r, c], d)
  heapq.heapify(heap)
  while heap:
    d, r, c = heapq.heappop(heap)
    if d > dist[r, c]:
      continue
    for dr in (-1, 0, 1):
      for dc in (-1, 0, 1):
        rr, cc = r + dr, c + dc
        if (dr, dc) == (0, 0) or not (0 <= rr < g and 0 <= cc < g) or not nav[rr, cc]:
          continue
        if dr and dc and not (nav[r + dr, c] and nav[r, c + dc]):
          continue
        nd = d + CELL * math.hypot(dr, dc)
        if nd < dist[rr, cc]:
          dist[rr, cc] = nd
          heapq.heappush(heap, (nd, rr, cc))
  return dist


def random_maze(rng, g=20, p=0.3):
  occ = rng.random((g, g)) < p
  occ[0, :] = occ[-1, :] = occ[:, 0] = occ[:, -1] = True
  return navigable_from(occ) | (rng.random((g, g)) < 0.3) & ~occ


@pytest.mark.parametrize("seed", range(4))
def test_field_matches_dijkstra_on_random_grids(seed):
  rng = np.random.default_rng(seed)
  nav = random_maze(rng)
  source = np.full(nav.shape, geodesic.UNREACHABLE, np.float32)
  cells = np.argwhere(nav)
  for r, c in cells[rng.choice(len(cells), 2, replace=False)]:
    source[r, c] = rng.uniform(0, 0.3)
  got = np.asarray(geodesic.field(jnp.asarray(nav), jnp.asarray(source)))
  want = dijkstra(nav, source)
  reach = np.isfinite(want)
  np.testing.assert_allclose(got[reach], want[reach], rtol=1e-5, atol=1e-5)
  assert np.all(got[~reach] >= geodesic.UNREACHABLE)


def test_field_vmaps_over_goals():
  nav = jnp.asarray(hand_scene().navigable)
  goals = jnp.array([[1.125, 1.875], [3.125, 2.125]])
  fields = jax.jit(jax.vmap(lambda xy: geodesic.field(nav, geodesic.point_source(nav, xy))))(goals)
  for xy, f in zip(goals, fields):
    want = dijkstra(np.asarray(nav), np.asarray(geodesic.point_source(nav, xy)))
    np.testing.assert_allclose(np.asarray(f)[np.isfinite(want)], want[np.isfinite(want)],
                               rtol=1e-5)


def test_door_detour_is_longer_than_straight_line():
  s = hand_scene()
  nav = jnp.asarray(s.navigable)
  goal = jnp.array([3.125, 0.625])                       # right room, top
  f = geodesic.field(nav, geodesic.point_source(nav, goal))
  start = jnp.array([1.625, 0.625])                      # left room, top: the wall between
  d = float(geodesic.distance_at(f, nav, start))
  assert d > float(jnp.linalg.norm(goal - start)) + 1.0  # must go down to the door and back
  near = float(geodesic.distance_at(f, nav, goal + jnp.array([0.1, 0.0])))
  assert near == pytest.approx(0.1, abs=1e-5)            # straight line next to the goal


def test_cell_point_round_trip():
  rc = jnp.array([[3, 5], [0, 0], [15, 2]])
  np.testing.assert_array_equal(geodesic.point_cell(geodesic.cell_centre(rc)), rc)
