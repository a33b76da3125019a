"""Viewpoint graphs of vcbench-nav apartments: the world of vision-language navigation (R2R).

R2R's agent does not move continuously: it stands on one of a building's viewpoints (panorama
positions about 2 m apart), sees that viewpoint's panorama and moves along a navigable edge to a
neighbouring viewpoint. `build` makes such a graph for a vcbench-nav apartment (host side,
numpy: R2R's graphs are static, so nothing here needs to run under jit):

  nodes  navigable cell centres, pairwise at least `spacing` metres apart along the navigable
         grid (8-connected, as geodesic.py; across a wall two nodes may be nearer, as R2R's
         are), by Poisson-disk growth from a seeded cell (`sample_nodes`): each new node is as
         near the others as spacing allows and sees one of them, and every doorway gets a pair
         of nodes whose segment passes through it, since a door's navigable gap is two cells.
  edges  between nodes less than `max_edge` metres apart whose straight segment stays on
         navigable cells (sampled every CELL/8 or closer): the analogue of MatterSim's
         "unobstructed" (there an annotator's judgement of a clear straight walk); only the
         largest connected component is kept, so `dist` is finite within a graph.
  dist   shortest path length along edges in metres (Floyd-Warshall).

Measured on the first 20 train apartments, spacing 1.5 m and max_edge 2.5 m (the defaults):
64-cell grids (16 m) have 55-88 nodes (mean 71), mean degree 4.1, edges 1.74 m on average,
99.8% of navigable cells within 1.5 m of a node, one room of 121 (an 8-cell sliver) without a
node, 0.3 s a graph; 48-cell grids (12 m) 25-45 nodes (mean 35), degree 3.3, 96% of cells, 5 of
116 rooms without; 32-cell grids (8 m) 9-18 nodes (mean 13), degree 2.2, 94%, 6 of 99. R2R's
scans have about 117 viewpoints each, about 2.25 m apart; cramped furnished flats need nodes
nearer than that to connect through their gaps.

Headings: a `Graph` records its frame. "vcbench" is the renderer's: heading 0 looks along +x
and positive turns right (clockwise on the top-down map, y down the rows), so heading(a, b) =
atan2(dy, dx). "mattersim" is MatterSim's: heading 0 looks along +y, z up, positive turns right,
so heading(a, b) = atan2(dx, dy). In both a positive change of heading is a right turn.

Panoramas: R2R's have 36 views (12 headings x 3 elevations); vcbench-nav's camera is level, so a
panorama here is the 12 horizontal views, to which many VLN agents reduce R2R's (view k looks at
heading k * 2 pi / headings; R2R's counterpart is the middle row, views 12..23).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import ndimage, sparse
from scipy.sparse import csgraph

from vcbench.envs.nav import render as rd
from vcbench.envs.nav import scene as sc

FRAMES = ("vcbench", "mattersim")
CHUNK = 48             # views per jitted render call (a fixed shape: one compile).
_SAMPLES_PER_CELL = 8  # points per cell length along a segment.
_GOOD_ENOUGH = 0.97    # share of the grown nodes a graph keeps that ends `build`'s tries.


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
  """The viewpoint graph of one apartment (or one Matterport scan).

  pos:   float32 [V, 2] node (x, y) in metres (scene.py's frame, or the scan's world frame).
  room:  int32 [V] room index of each node (its type: the scene's room_type); -1 if unknown.
  adj:   bool [V, V] navigable edges: symmetric, no self loops.
  dist:  float32 [V, V] shortest path length in metres along edges; inf if disconnected.
  ids:   the node names (R2R viewpoint ids for Matterport scans).
  frame: the heading convention, one of FRAMES (see the module docstring).
  """
  pos: np.ndarray
  room: np.ndarray
  adj: np.ndarray
  dist: np.ndarray
  ids: tuple[str, ...]
  frame: str = "vcbench"

  def __post_init__(self):
    if self.frame not in FRAMES:
      raise ValueError(f"Graph.frame must be one of {FRAMES}, got {self.frame!r}.")

  def __len__(self) -> int:
    return len(self.ids)

  def neighbours(self, node: int) -> np.ndarray:
    return np.flatnonzero(self.adj[node])

  def heading(self, a: int, b: int) -> float:
    """Heading (radians, in `frame`) of the straight line from node a to node b."""
    dx, dy = (self.pos[b] - self.pos[a]).tolist()
    return math.atan2(dy, dx) if self.frame == "vcbench" else math.atan2(dx, dy)


# ---------------------------------------------------------------------------------------------
# Graph algorithms shared by the synthetic and the Matterport graphs.

def shortest_distances(adj: np.ndarray, length: np.ndarray) -> np.ndarray:
  """All-pairs shortest path lengths (Floyd-Warshall), float32 [V, V]; inf if disconnected."""
  d = np.where(adj, length, np.inf).astype(np.float64)
  np.fill_diagonal(d, 0.0)
  for k in range(len(d)):
    d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
  return d.astype(np.float32)


def shortest_path(graph: Graph, a: int, b: int) -> list[int]:
  """The node list of a shortest path from a to b (ties: the lowest-numbered next node)."""
  if not np.isfinite(graph.dist[a, b]):
    raise ValueError(f"shortest_path: nodes {a} and {b} are not connected.")
  path = [a]
  while path[-1] != b:
    here = path[-1]
    nbrs = graph.neighbours(here)
    # Edges are straight lines, so an edge is its own shortest path: dist is its length.
    total = graph.dist[here, nbrs] + graph.dist[nbrs, b]
    path.append(int(nbrs[np.flatnonzero(total <= total.min() + 1e-4)[0]]))
  return path


def path_length(graph: Graph, path) -> float:
  """Metres walked along consecutive nodes of `path` (each step a shortest path, as R2R's eval)."""
  path = [int(p) for p in path if p >= 0]
  return float(sum(graph.dist[a, b] for a, b in zip(path[:-1], path[1:])))


def largest_component(adj: np.ndarray, dist: np.ndarray) -> np.ndarray:
  """Indices of the nodes of the largest connected component (ties: the one with node 0 first)."""
  reach = np.isfinite(dist)
  return np.flatnonzero(reach[np.argmax(reach.sum(1))])


# ---------------------------------------------------------------------------------------------
# Building a graph from a scene.

def _centres(cells: np.ndarray) -> np.ndarray:
  """(x, y) metres of cell centres [N, 2] given (row, col) [N, 2]."""
  return (cells[:, ::-1] + 0.5) * sc.CELL


def doorways(scene: sc.Scene) -> list[np.ndarray]:
  """Each doorway's navigable cells (row, col) [K, 2].

  Rooms are separated by one-cell walls, so two 4-adjacent free cells of different rooms meet
  only in a door.
  """
  room, nav = np.asarray(scene.room), np.asarray(scene.navigable)
  g = room.shape[0]
  padded = np.pad(room, 1, constant_values=-1)
  mask = np.zeros_like(nav)
  for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
    other = padded[1 + dr:1 + dr + g, 1 + dc:1 + dc + g]
    mask |= nav & (other >= 0) & (other != room)
  labels, count = ndimage.label(mask, np.ones((3, 3), bool))
  return [np.argwhere(labels == k) for k in range(1, count + 1)]


def _grid_graph(navigable: np.ndarray) -> tuple[np.ndarray, sparse.csr_matrix]:
  """Navigable cells (row, col) [N, 2] and their 8-connected moves in metres (no corner
  cutting, as geodesic.py's field), an undirected sparse graph."""
  cells = np.argwhere(navigable)
  index = np.pad(np.full(navigable.shape, -1), 1, constant_values=-1)
  index[cells[:, 0] + 1, cells[:, 1] + 1] = np.arange(len(cells))
  at = lambda dr, dc: index[cells[:, 0] + 1 + dr, cells[:, 1] + 1 + dc]
  edges = []
  for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
    ok = (at(dr, dc) >= 0) & (at(dr, 0) >= 0) & (at(0, dc) >= 0)
    edges.append((np.flatnonzero(ok), at(dr, dc)[ok], sc.CELL * math.hypot(dr, dc)))
  rows, cols, cost = (np.concatenate([np.broadcast_to(e[k], e[0].shape) for e in edges])
                      for k in range(3))
  return cells, sparse.csr_matrix((cost, (rows, cols)), shape=(len(cells),) * 2)


def sample_nodes(scene: sc.Scene, spacing: float, max_edge: float, seed) -> np.ndarray:
  """Node cells (row, col) [V, 2], pairwise at least `spacing` metres apart along the navigable
  grid, grown from a seeded cell so that each node sees an earlier one.

  Each round adds, among the free cells (at least `spacing` from every node, outside doorways)
  not next to a doorway either (a node there sees little of both rooms), the nearest to the
  nodes that sees a node within `max_edge` along a clear segment (ties by a seeded jitter): the
  set grows outwards about `spacing` apart. A door's navigable gap is two cells wide, so few segments
  fit through it: once nodes come within max_edge + spacing of a door, and until it has one,
  the door gets a crossing before the cells in front of it fill up. When no free cell sees a
  node, a new front starts at the nearest free cell (`build` drops it unless it joins up).
  """
  rng = np.random.default_rng(seed)
  nav, room = np.asarray(scene.navigable), np.asarray(scene.room)
  cells, moves = _grid_graph(nav)
  jitter = rng.uniform(0.0, 1e-3, len(cells))
  d_all = np.full(len(cells), np.inf)
  chosen: list[int] = []

  def add(i):
    chosen.append(int(i))
    field = csgraph.dijkstra(moves, directed=False, indices=i, limit=2 * spacing)
    np.minimum(d_all, field, out=d_all)

  doors = doorways(scene)
  in_door = np.zeros(nav.shape, bool)
  for door in doors:
    in_door[door[:, 0], door[:, 1]] = True
  near_door = ndimage.binary_dilation(in_door, np.ones((3, 3), bool))[cells[:, 0], cells[:, 1]]
  in_door = in_door[cells[:, 0], cells[:, 1]]
  tried = [-1] * len(doors)   # the node count at each door's last try; None once crossed.
  add(rng.integers(len(cells)))
  while True:
    free = (d_all >= spacing - 1e-6) & ~in_door
    for k, door in enumerate(doors):
      near = np.linalg.norm(cells[chosen] - door.mean(0), axis=1).min() * sc.CELL
      if tried[k] in (None, len(chosen)) or near >= max_edge + spacing:
        continue
      tried[k] = len(chosen)
      crossing = _door_crossing(nav, room, cells, door, chosen, free, near_door, spacing,
                                max_edge)
      if crossing is not None:
        tried[k] = None
        for i in crossing:
          add(i)
        break
    else:
      eligible = np.flatnonzero(free & ~near_door)
      if not len(eligible):
        break
      order = eligible[np.argsort(d_all[eligible] + jitter[eligible])]
      for block in range(0, len(order), 64):
        sees = _sees(nav, cells[order[block:block + 64]], cells[chosen], max_edge / sc.CELL)
        if sees.any():
          add(order[block + int(np.argmax(sees))])
          break
      else:
        add(order[0])
  return cells[chosen]


def _sees(nav, points, nodes, reach) -> np.ndarray:
  """Whether each cell [N, 2] sees a node cell closer than `reach` cells along navigable cells."""
  i, j = np.nonzero(np.linalg.norm(points[:, None] - nodes[None], axis=-1) < reach)
  out = np.zeros(len(points), bool)
  out[i[segment_clear(nav, points[i], nodes[j])]] = True
  return out


def _door_crossing(nav, room, cells, door, chosen, free, near_door, spacing, max_edge):
  """The new nodes (indices into `cells`) of the best pair of endpoints, one in each room of the
  door, whose clear segment passes through it and one of which is a node or sees one: fewest
  new nodes, then fewest next to a doorway, then nearest the door. None if no pair fits."""
  rooms = np.unique(room[door[:, 0], door[:, 1]])
  in_door = np.zeros(nav.shape, bool)
  in_door[door[:, 0], door[:, 1]] = True
  dist = np.linalg.norm(cells - door.mean(0), axis=1) * sc.CELL
  is_node = np.zeros(len(cells), bool)
  is_node[chosen] = True
  ok = (dist < max_edge) & (free | is_node)
  side = room[cells[:, 0], cells[:, 1]]
  a, b = (m.ravel() for m in np.meshgrid(np.flatnonzero(ok & (side == rooms[0])),
                                         np.flatnonzero(ok & (side == rooms[-1])), indexing="ij"))
  gap = np.linalg.norm(cells[a] - cells[b], axis=1) * sc.CELL
  # A new node is free of every node; two new ones must keep their distance from each other.
  a, b = (x[(gap < max_edge) & ((gap >= spacing) | is_node[a] | is_node[b])] for x in (a, b))
  through = segment_clear(nav, cells[a], cells[b]) & segment_cells(in_door, cells[a],
                                                                   cells[b]).any(-1)
  a, b = a[through], b[through]
  anchored = is_node[a] | is_node[b]
  for end in (a, b):
    anchored[~anchored] = _sees(nav, cells[end[~anchored]], cells[chosen], max_edge / sc.CELL)
  a, b = a[anchored], b[anchored]
  if len(rooms) != 2 or not len(a):
    return None
  new_a, new_b = ~is_node[a], ~is_node[b]
  cost = 100.0 * new_a + 100.0 * new_b + 10.0 * (near_door[a] & new_a) + 10.0 * (
      near_door[b] & new_b)
  best = int(np.argmin(cost + dist[a] + dist[b]))
  return [int(i) for i in (a[best], b[best]) if not is_node[i]]


@functools.lru_cache(maxsize=8)
def _segment_table(radius: int) -> np.ndarray:
  """int [2r+1, 2r+1, K, 2]: the cells, as offsets from its start, that the segment from a cell
  centre to the centre of the cell at offset (dr, dc) passes, sampled every CELL/8 or closer
  (each cell once, then the last repeated)."""
  table = []
  for off in np.stack(np.meshgrid(*[np.arange(-radius, radius + 1)] * 2, indexing="ij"),
                      -1).reshape(-1, 2):
    t = np.linspace(0.0, 1.0, int(math.ceil(np.hypot(*off) * _SAMPLES_PER_CELL)) + 2)
    visited = np.floor(0.5 + t[:, None] * off).astype(np.int32)
    table.append(visited[np.r_[True, (visited[1:] != visited[:-1]).any(1)]])
  k = max(len(p) for p in table)
  table = [np.concatenate([p, np.repeat(p[-1:], k - len(p), 0)]) for p in table]
  return np.stack(table).reshape(2 * radius + 1, 2 * radius + 1, k, 2)


def segment_cells(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """mask's values [..., K] along the segments between the centres of cells a and b ((row, col)
  int [..., 2]), sampled every CELL/8 or closer (K samples, the last repeated)."""
  mask = np.asarray(mask)
  a, b = np.asarray(a, int), np.asarray(b, int)
  off = b - a
  radius = 8 * max(1, math.ceil(np.abs(off).max(initial=0) / 8))   # few distinct tables.
  path = a[..., None, :] + _segment_table(radius)[off[..., 0] + radius, off[..., 1] + radius]
  path = np.clip(path, 0, np.array(mask.shape) - 1)
  return mask[path[..., 0], path[..., 1]]


def segment_clear(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Whether the segments between the centres of cells a and b ((row, col) [..., 2]) stay on
  cells where `mask` (e.g. the scene's navigable cells) is True; bool [...]."""
  return segment_cells(mask, a, b).all(-1)


def build(scene: sc.Scene, spacing: float = 1.5, max_edge: float = 2.5, seed: int = 0,
          tries: int = 4) -> Graph:
  """The viewpoint graph of one apartment (a Scene without a batch axis); see the module
  docstring. A function of (scene, spacing, max_edge, seed, tries).

  Growth can strand a front behind a narrow gap (between furniture, say) whose cells the nodes
  around it already crowd: while a graph misses a room or drops over 3% of the grown nodes, up
  to `tries` growths from other sub-seeds run, and the graph covering the most rooms, then
  keeping the most nodes, wins.
  """
  if not 0 < spacing < max_edge:
    raise ValueError(f"build: need 0 < spacing < max_edge, got spacing {spacing}, "
                     f"max_edge {max_edge} (metres).")
  nav, room = np.asarray(scene.navigable), np.asarray(scene.room)
  rooms = set(np.unique(room[nav]).tolist())
  best, best_score = None, None
  for attempt in range(tries):
    cells = sample_nodes(scene, spacing, max_edge,
                         np.random.SeedSequence(seed, spawn_key=(attempt,)))
    graph = _connect(nav, room, cells, max_edge)
    score = (len(rooms & set(graph.room.tolist())), len(graph))
    if best is None or score > best_score:
      best, best_score = graph, score
    if score[0] == len(rooms) and len(graph) >= _GOOD_ENOUGH * len(cells):
      break
  return best


def _connect(nav, room, cells, max_edge) -> Graph:
  """The graph of the largest component of the nodes at `cells` with their clear edges."""
  pos = _centres(cells)
  gap = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
  i, j = np.nonzero(np.triu(gap < max_edge, 1))
  clear = segment_clear(nav, cells[i], cells[j])
  adj = np.zeros(gap.shape, bool)
  adj[i[clear], j[clear]] = True
  adj |= adj.T
  dist = shortest_distances(adj, gap)
  keep = largest_component(adj, dist)
  return Graph(pos=pos[keep].astype(np.float32),
               room=room[cells[keep, 0], cells[keep, 1]].astype(np.int32),
               adj=adj[np.ix_(keep, keep)], dist=dist[np.ix_(keep, keep)],
               ids=tuple(f"n{k:03d}" for k in range(len(keep))))


# ---------------------------------------------------------------------------------------------
# Panoramas and candidate views.

def view_index(heading, headings: int):
  """The panorama view (0..headings-1) whose heading is closest to `heading` (radians)."""
  return np.round(np.asarray(heading) / (2 * math.pi / headings)).astype(int) % headings


def candidate_views(graph: Graph, node: int, headings: int = 12) -> tuple[np.ndarray, np.ndarray]:
  """(neighbours [K], view [K]): each neighbour of `node` and the panorama view looking at it
  (R2R's "candidate" feature is the feature of this view)."""
  nbrs = graph.neighbours(node)
  return nbrs, view_index([graph.heading(node, int(b)) for b in nbrs], headings).astype(np.int32)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _render_chunk(camera: rd.Camera, sensors: tuple[str, ...], scene: sc.Scene, atlas: jax.Array,
                  pos: jax.Array, heading: jax.Array) -> dict[str, jax.Array]:
  return jax.vmap(lambda p, h: rd.render(scene, atlas, p, h, camera, sensors))(pos, heading)


def panoramas(scene: sc.Scene, atlas, graph: Graph, camera: rd.Camera, headings: int = 12,
              sensor: str = "rgb") -> np.ndarray:
  """Each node's views at headings k * 2 pi / headings: [V, headings, H, W, 3] uint8 for 'rgb'
  (or the renderer's array of `sensor`), rendered CHUNK views per jitted call."""
  if graph.frame != "vcbench":
    raise ValueError("panoramas: only vcbench-nav graphs can be rendered (frame 'vcbench'), "
                     f"got frame {graph.frame!r}.")
  scene = jax.tree.map(jnp.asarray, scene)
  atlas = jnp.asarray(atlas)
  v = len(graph)
  pos = np.repeat(graph.pos, headings, axis=0).astype(np.float32)
  heading = np.tile(np.arange(headings) * (2 * math.pi / headings), v).astype(np.float32)
  out = []
  for start in range(0, len(pos), CHUNK):
    idx = np.arange(start, start + CHUNK) % len(pos)   # pads with repeats, dropped below.
    views = _render_chunk(camera, (sensor,), scene, atlas, pos[idx], heading[idx])[sensor]
    out.append(np.asarray(views)[:min(CHUNK, len(pos) - start)])
  views = np.concatenate(out)
  return views.reshape(v, headings, *views.shape[1:])
