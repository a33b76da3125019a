"""Triangle meshes for G-VUE's 3-D reconstruction task: reading OBJ/STL files, normalising a
mesh into the unit cube, and voxelising it into a solid occupancy grid.

- Reading: OBJ (`v` and `f` records; polygons fanned into triangles, negative indices resolved)
  and STL (binary, or ASCII when the byte count does not fit binary). All objects, groups and
  convex pieces of a file are read as one mesh.
- Normalising (`normalise`): the bounding box is centred on the origin and its longest side
  scaled to 1, so the mesh spans [-0.5, 0.5] on that axis (DISN and AutoSDF likewise fit each
  ShapeNet model into a fixed volume before computing its SDF).
- Voxelising (`voxelise`): a grid of R^3 cells tiling [-0.5, 0.5]^3, cell (i, j, k) covering
  x in [-0.5 + i/R, -0.5 + (i+1)/R) and likewise y (j) and z (k). The surface is sampled on a
  lattice of points at most a third of a cell apart on every triangle and edge, and each cell
  holding a sample is occupied; cells enclosed by that shell (not reachable from the grid's
  border through face-adjacent empty cells) are filled (`scipy.ndimage.binary_fill_holes`).
  Surfaces that do not close (a tray, an open cup) keep only their shell and whatever they
  enclose; meshes made of overlapping convex pieces (pybullet's random objects) come out as
  the pieces' union, which ray parity would get wrong. A cavity sealed inside a solid is
  filled too: the grid holds what the outside cannot reach.
"""
from __future__ import annotations

import os

import numpy as np

from vcbench.errors import UserError

SAMPLES_PER_CELL = 3  # Lattice points per cell width on the surface (see `surface_points`).


class MeshError(UserError, ValueError):
  """A mesh file that cannot be read, or a mesh with nothing to voxelise."""


def read_mesh(path: str) -> tuple[np.ndarray, np.ndarray]:
  """(vertices float64 [V, 3], triangles int64 [F, 3]) of the OBJ or STL file at `path`."""
  ext = os.path.splitext(path)[1].lower()
  if ext == ".obj":
    vertices, faces = _read_obj(path)
  elif ext == ".stl":
    vertices, faces = _read_stl(path)
  else:
    raise MeshError(f"{path}: expected an .obj or .stl mesh, got {ext or 'no extension'!r}.")
  if len(faces) == 0:
    raise MeshError(f"{path}: the mesh has no triangles.")
  if not np.isfinite(vertices[np.unique(faces)]).all():
    raise MeshError(f"{path}: the triangles use vertices with NaN or infinite coordinates.")
  return vertices, faces


def _read_obj(path: str) -> tuple[np.ndarray, np.ndarray]:
  vertices, faces = [], []
  with open(path, "r", errors="replace") as f:
    for line in f:
      if line.startswith("v "):
        vertices.append([float(x) for x in line.split()[1:4]])
      elif line.startswith("f "):
        # A corner is "v", "v/vt", "v//vn" or "v/vt/vn"; only the vertex index matters here.
        corners = [int(c.split("/")[0]) for c in line.split()[1:]]
        corners = [c - 1 if c > 0 else len(vertices) + c for c in corners]
        faces.extend([corners[0], corners[i], corners[i + 1]] for i in range(1, len(corners) - 1))
  vertices = np.asarray(vertices, np.float64).reshape(-1, 3)
  faces = np.asarray(faces, np.int64).reshape(-1, 3)
  if faces.size and (faces.min() < 0 or faces.max() >= len(vertices)):
    raise MeshError(f"{path}: a face refers to a vertex outside 1..{len(vertices)}.")
  return vertices, faces


def _read_stl(path: str) -> tuple[np.ndarray, np.ndarray]:
  with open(path, "rb") as f:
    data = f.read()
  count = int(np.frombuffer(data[80:84], "<u4")[0]) if len(data) >= 84 else -1
  if len(data) == 84 + 50 * count:
    record = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attr", "<u2")])
    corners = np.frombuffer(data, record, count, offset=84)["corners"].astype(np.float64)
  else:
    text = data.decode("ascii", errors="replace").split()
    at = [i for i, word in enumerate(text) if word == "vertex"]
    if not at or len(at) % 3:
      raise MeshError(f"{path}: neither a binary STL ({count} triangles would need "
                      f"{84 + 50 * max(count, 0)} bytes, the file has {len(data)}) nor an "
                      f"ASCII STL with whole triangles ({len(at)} vertex records).")
    corners = np.array([[float(x) for x in text[i + 1:i + 4]] for i in at]).reshape(-1, 3, 3)
  return corners.reshape(-1, 3), np.arange(3 * len(corners), dtype=np.int64).reshape(-1, 3)


def normalise(vertices: np.ndarray) -> np.ndarray:
  """`vertices` moved and scaled uniformly so the bounding box is centred on the origin and its
  longest side is 1."""
  low, high = vertices.min(0), vertices.max(0)
  extent = float((high - low).max())
  if not np.isfinite(extent) or extent <= 0:
    raise MeshError(f"a mesh with bounding box {low.tolist()}..{high.tolist()} cannot be "
                    "scaled into the unit cube (it is a point or not finite).")
  return (vertices - (low + high) / 2) / extent


def surface_points(vertices: np.ndarray, faces: np.ndarray, step: float) -> np.ndarray:
  """Points [P, 3] on every triangle, no two neighbours more than `step` apart: for a triangle
  (a, b, c), a + (i/n) (b - a) + (j/m) (c - a) with i/n + j/m <= 1, n and m making each
  stride at most `step`, plus points along the edge b-c that the lattice does not reach."""
  a, b, c = (vertices[faces[:, k]] for k in range(3))
  n, m = _strides(b - a, step), _strides(c - a, step)
  # One row per lattice column (triangle, i), then one per lattice point (triangle, i, j).
  tri = np.repeat(np.arange(len(faces)), n + 1)
  u = _ragged_arange(n + 1) / n[tri]
  rows = np.floor(m[tri] * (1.0 - u) + 1e-9).astype(np.int64) + 1
  tri, u = np.repeat(tri, rows), np.repeat(u, rows)
  v = _ragged_arange(rows) / m[tri]
  lattice = a[tri] + u[:, None] * (b - a)[tri] + v[:, None] * (c - a)[tri]
  k = _strides(c - b, step)
  edge = np.repeat(np.arange(len(faces)), k + 1)
  t = _ragged_arange(k + 1) / k[edge]
  return np.concatenate([lattice, b[edge] + t[:, None] * (c - b)[edge]])


def _strides(edges: np.ndarray, step: float) -> np.ndarray:
  """How many strides of at most `step` cover each edge vector (at least one)."""
  return np.maximum(1, np.ceil(np.linalg.norm(edges, axis=1) / step)).astype(np.int64)


def _ragged_arange(counts: np.ndarray) -> np.ndarray:
  """arange(counts[0]), arange(counts[1]), ... concatenated."""
  starts = np.cumsum(counts) - counts
  return np.arange(int(counts.sum())) - np.repeat(starts, counts)


def voxelise(vertices: np.ndarray, faces: np.ndarray, resolution: int) -> np.ndarray:
  """Solid occupancy bool [R, R, R] (axes x, y, z) of a mesh inside [-0.5, 0.5]^3."""
  from scipy import ndimage  # noqa: PLC0415 - scipy is only needed to voxelise.
  if resolution < 2:
    raise MeshError(f"voxel resolution must be at least 2, got {resolution}.")
  if np.abs(vertices).max() > 0.5 + 1e-6:
    raise MeshError(f"voxelise expects a mesh inside [-0.5, 0.5]^3 (`normalise` it first); its "
                    f"largest coordinate is {np.abs(vertices).max():.4g}.")
  points = surface_points(vertices, faces, 1.0 / (resolution * SAMPLES_PER_CELL))
  cells = np.clip(np.floor((points + 0.5) * resolution).astype(np.int64), 0, resolution - 1)
  shell = np.zeros((resolution,) * 3, bool)
  shell[cells[:, 0], cells[:, 1], cells[:, 2]] = True
  return ndimage.binary_fill_holes(shell)

