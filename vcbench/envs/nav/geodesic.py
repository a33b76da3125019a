"""Geodesic distance on a scene's navigable grid, in pure JAX (vmappable, jittable).

A field holds, for every navigable cell centre, the length in metres of the shortest
8-connected path to the goal (diagonal steps cost sqrt(2) cells and may not cut a corner:
both orthogonal neighbours must be navigable too, as the agent's disc would clip them).
Non-navigable and unreachable cells hold `UNREACHABLE`.

It is computed by Bellman-Ford relaxation sweeps until nothing changes: on a grid each sweep
is a handful of shifted minima, so XLA runs it as vector code and `vmap` computes a whole batch
of episodes' fields at once. The number of sweeps is the longest shortest path in cells.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from vcbench.envs.nav.scene import CELL

UNREACHABLE = 1e6
_SQRT2 = 2.0 ** 0.5


def shift(x: jax.Array, dy: int, dx: int, fill) -> jax.Array:
  """out[r, c] = x[r + dy, c + dx], `fill` where that falls off the grid."""
  p = max(abs(dy), abs(dx), 1)
  g = jnp.pad(x, p, constant_values=fill)
  h, w = x.shape
  return g[p + dy:p + dy + h, p + dx:p + dx + w]


_MOVES = tuple((dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0))


def _legal_moves(navigable: jax.Array) -> list[tuple[int, int, jax.Array]]:
  """(dy, dx, mask): the move from cell c to c + (dy, dx) is legal where mask is True."""
  moves = []
  for dy, dx in _MOVES:
    ok = navigable & shift(navigable, dy, dx, False)
    if dy and dx:  # no corner cutting
      ok = ok & shift(navigable, dy, 0, False) & shift(navigable, 0, dx, False)
    moves.append((dy, dx, ok))
  return moves


def field(navigable: jax.Array, source: jax.Array) -> jax.Array:
  """Shortest-path distance (metres) from every cell to the nearest source.

  Args:
    navigable: bool [G, G].
    source: float32 [G, G], each source cell's starting distance in metres (0 for a goal
      cell, or the distance from a goal point to that cell centre); UNREACHABLE elsewhere.
      Sources on non-navigable cells are ignored.
  """
  moves = _legal_moves(navigable)
  init = jnp.where(navigable, jnp.minimum(source, UNREACHABLE), UNREACHABLE)

  def sweep(d):
    best = d
    for dy, dx, ok in moves:
      step = CELL * (_SQRT2 if dy and dx else 1.0)
      best = jnp.minimum(best, jnp.where(ok, shift(d, dy, dx, UNREACHABLE) + step, UNREACHABLE))
    return best

  def body(carry):
    d, _ = carry
    new = sweep(d)
    return new, jnp.any(new < d)

  d, _ = jax.lax.while_loop(lambda c: c[1], body, (init, jnp.array(True)))
  return d


def cell_centre(rc: jax.Array) -> jax.Array:
  """World (x, y) metres of cell [..., (row, col)]."""
  rc = jnp.asarray(rc)
  return (rc[..., ::-1].astype(jnp.float32) + 0.5) * CELL


def point_cell(xy: jax.Array) -> jax.Array:
  """(row, col) int32 of the cell containing world point [..., (x, y)]."""
  return jnp.floor(jnp.asarray(xy)[..., ::-1] / CELL).astype(jnp.int32)


def point_source(navigable: jax.Array, goal_xy: jax.Array, radius: float = 0.0) -> jax.Array:
  """A `field` source for a goal point: navigable cells whose centre lies within
  `radius` + one cell diagonal of the goal start at their straight-line distance minus radius."""
  g = navigable.shape[-1]
  rows, cols = jnp.meshgrid(jnp.arange(g), jnp.arange(g), indexing="ij")
  centres = cell_centre(jnp.stack([rows, cols], -1))
  dist = jnp.linalg.norm(centres - goal_xy, axis=-1)
  near = navigable & (dist <= radius + CELL * _SQRT2)
  return jnp.where(near, jnp.maximum(dist - radius, 0.0), UNREACHABLE)


def distance_at(dist_field: jax.Array, navigable: jax.Array, xy: jax.Array) -> jax.Array:
  """Geodesic distance from world point `xy` (on the agent's legal positions): the best of
  the 5x5 surrounding navigable cells' field plus the straight line to their centre.

  5x5, not 3x3: a legal pose can sit in a pocket (between a wall and an object) whose 3x3
  block has no navigable centre. The line never crosses a wall: a navigable centre is at
  least two cells from any wall, so one on the far side of a wall is three cells away.
  """
  rc = point_cell(xy)
  offsets = jnp.array([(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)])
  cells = jnp.clip(rc + offsets, 0, dist_field.shape[-1] - 1)
  vals = dist_field[cells[:, 0], cells[:, 1]]
  ok = navigable[cells[:, 0], cells[:, 1]]
  line = jnp.linalg.norm(cell_centre(cells) - xy, axis=-1)
  return jnp.min(jnp.where(ok, vals + line, UNREACHABLE))
