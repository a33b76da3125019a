"""The camera-crack corruption's geometry: impact points, random-walk cracks and their distance
field, as pure JAX (`visual.crack_layers` turns it into the drawn layers)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

# Camera crack geometry, lengths in pixels at 224.
_CRACK_ARMS = 6        # radial cracks from each impact point.
_CRACK_STEPS = 6       # segments of a radial crack.
_BRANCH_STEPS = 3      # segments of the branch each radial crack sprouts.
_CRACK_STEP = 14.0     # mean segment length.
_CRACK_WIDTH = 0.8     # half-width of a crack's dark core near the impact (>= 0.5 px).
REFRACTION = 2.0       # how far the glass ridge along a crack displaces the view.


def walk(start, heading, turns, stretch, step: float):
  """A polyline from `start` ([y, x]) whose heading turns by `turns` (radians) at every vertex
  and whose segments are `stretch * step` long; returns its vertices [n + 1, 2] and the
  segments' headings [n]."""
  headings = heading + jnp.cumsum(turns)
  moves = (step * stretch)[:, None] * jnp.stack([jnp.sin(headings), jnp.cos(headings)], -1)
  return start + jnp.concatenate([jnp.zeros((1, 2)), jnp.cumsum(moves, axis=0)]), headings


def impact(key, shape, scale: float):
  """One impact's crack segments, one row per radial crack (with its branch): start points
  and end points [ARMS, S, 2] and core half-widths [ARMS, S]. Every draw comes from one
  uniform call: each random call adds seconds of compilation."""
  n = _CRACK_STEPS + _BRANCH_STEPS
  draws = jax.random.uniform(key, (2 + _CRACK_ARMS * (2 * n + 3),))
  centre = (0.15 + 0.7 * draws[:2]) * jnp.array(shape)
  u = draws[2:].reshape(_CRACK_ARMS, 2 * n + 3)
  turns = 0.9 * (u[:, n + 3:] - 0.5)  # Heading jitter per vertex, uniform in +-0.45 rad.
  width, step = _CRACK_WIDTH * scale, _CRACK_STEP * scale
  taper = 1.0 - 0.6 * jnp.arange(_CRACK_STEPS) / _CRACK_STEPS

  def arm(j, u, turns):
    heading = 2 * jnp.pi * (j + 0.6 * u[n] - 0.3) / _CRACK_ARMS
    pts, headings = walk(centre, heading, turns[:_CRACK_STEPS], 0.5 + u[:_CRACK_STEPS], step)
    at = 1 + jnp.minimum(u[n + 1] * (_CRACK_STEPS - 1), _CRACK_STEPS - 2).astype(jnp.int32)
    side = 2.0 * u[n + 2] - 1.0  # Sign: which side the branch leaves on; size: how sharply.
    turn = jnp.sign(side) * (0.4 + 0.6 * jnp.abs(side))
    branch, _ = walk(pts[at], headings[at] + turn, turns[_CRACK_STEPS:],
                     0.5 + u[_CRACK_STEPS:n], 0.6 * step)
    widths = jnp.concatenate([width * taper, jnp.full(_BRANCH_STEPS, 0.6 * width * taper[at])])
    return (jnp.concatenate([pts[:-1], branch[:-1]]), jnp.concatenate([pts[1:], branch[1:]]),
            jnp.maximum(widths, 0.5))  # Thinner lines would break up into dashes.

  return jax.vmap(arm)(jnp.arange(_CRACK_ARMS), u, turns)


def distance(starts, ends, widths, shape) -> jax.Array:
  """Distance from every pixel centre to the nearest crack, in that crack's half-widths
  [H, W]; one radial crack (a row of segments) per scan step bounds the memory."""
  y = jnp.arange(shape[0], dtype=jnp.float32)[:, None, None]
  x = jnp.arange(shape[1], dtype=jnp.float32)[None, :, None]

  def nearest(best, row):
    a, b, w = row
    ey, ex = b[:, 0] - a[:, 0], b[:, 1] - a[:, 1]
    py, px = y - a[:, 0], x - a[:, 1]
    t = jnp.clip((py * ey + px * ex) / jnp.maximum(ey * ey + ex * ex, 1e-6), 0.0, 1.0)
    qy, qx = py - t * ey, px - t * ex
    return jnp.minimum(best, jnp.min((qy * qy + qx * qx) / (w * w), axis=-1)), None

  best, _ = jax.lax.scan(nearest, jnp.full(shape, jnp.inf), (starts, ends, widths))
  return jnp.sqrt(best)
