"""The real R2R data on Matterport graphs, for the agent vln.py trains: no MatterSim needed.

Inputs (the files R2R publishes; nothing is downloaded here):
  R2R_{split}.json   a list of {"distance", "scan", "path_id", "path": [viewpoint ids],
                     "heading", "instructions": [3 strings]}; a path of one viewpoint (a
                     start without its goal) loads too.
  connectivity/{scan}_connectivity.json
                     a list of viewpoints {"image_id", "pose": 16 floats, the row-major 4x4
                     camera-to-world matrix (translation at indices 3, 7, 11, metres, z up),
                     "included": bool, "unobstructed": [bool per viewpoint], "height"}.
  view features      computed by the user from their own skyboxes: an .npz file, or a folder
                     of .npy files, keyed "{scan}_{viewpoint}", each float [views, C] (R2R's 36
                     views: index 12 * elevation + heading, elevation 0 / 1 / 2 = -30 / 0 /
                     +30 degrees, heading k = k * 30 degrees; the level row is 12..23).

Graphs are built as R2R's load_nav_graphs builds them: an edge joins viewpoints i and j when
both are included and i's "unobstructed"[j] holds (it must be symmetric), weighted by the 3-D
distance between the poses' translations; a viewpoint is in the graph when it has an edge.
`dist` is the all-pairs shortest path length (what R2R's eval takes from networkx), `pos` the
translation's (x, y), ids the image ids, `room` -1 (the connectivity files hold no rooms) and
the heading frame MatterSim's (0 along +y, turning right positive), which is R2R's "heading".

Where this differs from MatterSim: nothing is rendered, so an agent sees only the features the
user provides, one vector per discrete view; there is no continuous camera (no elevation
changes or arbitrary headings between views), which R2R's panoramic-action agents do not use.

`write_split` / `level_row_features` / `save_features` write vcbench-nav episodes and view
features in this layout, for R2R agents written elsewhere; read back, they train the G-VUE
job's agent to the same metrics as the generated episodes (tests/jobs/test_gvue_job.py).
"""
from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from vcbench.data.gvue import vln
from vcbench.envs.nav import viewpoints as vp

VIEWS = 36
LEVEL_ROW = 12        # first view of the level (elevation 0) row.


def _read_json(path: str):
  if not os.path.isfile(path):
    raise FileNotFoundError(f"r2r: no file {path}.")
  with open(path) as f:
    return json.load(f)


def connectivity_path(connectivity_dir: str, scan: str) -> str:
  return os.path.join(connectivity_dir, f"{scan}_connectivity.json")


def load_graph(connectivity_dir: str, scan: str) -> vp.Graph:
  """The viewpoint graph of one scan from its connectivity file."""
  path = connectivity_path(connectivity_dir, scan)
  nodes = _read_json(path)
  n = len(nodes)
  for i, node in enumerate(nodes):
    if len(node.get("pose", ())) != 16 or len(node.get("unobstructed", ())) != n:
      raise ValueError(f"r2r: {path}: viewpoint {i} ({node.get('image_id')!r}) needs a 16-float "
                       f"pose and {n} unobstructed flags, got {len(node.get('pose', ()))} and "
                       f"{len(node.get('unobstructed', ()))}.")
  included = np.array([bool(node["included"]) for node in nodes])
  link = np.array([node["unobstructed"] for node in nodes], bool) & included[:, None] & \
      included[None, :]
  np.fill_diagonal(link, False)
  if (link != link.T).any():
    i, j = np.argwhere(link != link.T)[0]
    raise ValueError(f"r2r: {path}: unobstructed is not symmetric between viewpoints "
                     f"{nodes[i]['image_id']!r} and {nodes[j]['image_id']!r}.")
  keep = np.flatnonzero(link.any(1))
  xyz = np.array([[node["pose"][3], node["pose"][7], node["pose"][11]] for node in nodes])[keep]
  length = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1)
  adj = link[np.ix_(keep, keep)]
  return vp.Graph(pos=xyz[:, :2].astype(np.float32), room=np.full(len(keep), -1, np.int32),
                  adj=adj, dist=vp.shortest_distances(adj, length),
                  ids=tuple(str(nodes[k]["image_id"]) for k in keep), frame="mattersim")


def load_split(data_dir: str, split: str, connectivity_dir: str,
               graphs: Optional[dict[str, vp.Graph]] = None) -> vln.Episodes:
  """R2R_{split}.json of `data_dir` as the episodes vln.py makes, on its scans' graphs.

  graphs: already loaded graphs by scan (loaded from `connectivity_dir` when missing).
  """
  path = os.path.join(data_dir, f"R2R_{split}.json")
  items = _read_json(path)
  scans = sorted({str(item["scan"]) for item in items})
  graphs = dict(graphs or {})
  for scan in scans:
    if scan not in graphs:
      graphs[scan] = load_graph(connectivity_dir, scan)
  index = {scan: {v: k for k, v in enumerate(graphs[scan].ids)} for scan in scans}
  rows = []
  for item in items:
    scan = str(item["scan"])
    nodes = []
    for viewpoint in item["path"]:
      if viewpoint not in index[scan]:
        raise ValueError(f"r2r: {path}: path {item['path_id']} goes through viewpoint "
                         f"{viewpoint!r}, which is not in scan {scan}'s graph "
                         f"({connectivity_path(connectivity_dir, scan)}).")
      nodes.append(index[scan][viewpoint])
    _check_steps(path, item, scan, graphs[scan], nodes)
    rows.append((scans.index(scan), nodes, float(item["heading"]),
                 tuple(str(t) for t in item["instructions"]), int(item["path_id"])))
  width = max([len(r[1]) for r in rows], default=1)
  return vln.Episodes(
      split=split, apartment=np.array([r[0] for r in rows], np.int32),
      path=np.array([r[1] + [-1] * (width - len(r[1])) for r in rows], np.int32).reshape(-1, width),
      heading=np.array([r[2] for r in rows], np.float32),
      instructions=tuple(r[3] for r in rows), path_id=np.array([r[4] for r in rows], np.int64),
      graphs=tuple(graphs[s] for s in scans), scans=tuple(scans), seeds=(-1,) * len(scans),
      grid_size=0)


def _check_steps(path, item, scan, graph, nodes):
  # R2R's paths are walks along edges; a missing edge means a mismatched connectivity file.
  for a, b in zip(nodes[:-1], nodes[1:]):
    if not graph.adj[a, b]:
      raise ValueError(f"r2r: {path}: path {item['path_id']} steps from {graph.ids[a]!r} to "
                       f"{graph.ids[b]!r}, which scan {scan}'s graph does not join.")


def view_of(heading: float, elevation_level: int = 1, headings: int = 12) -> int:
  """R2R's discrete view index of a heading (radians, MatterSim frame) and elevation level."""
  return int(elevation_level * headings + vp.view_index(heading, headings))


def candidate_views(graph: vp.Graph, node: int) -> tuple[np.ndarray, np.ndarray]:
  """(neighbours, R2R view index in the level row) of a node, as viewpoints.candidate_views."""
  nbrs, views = vp.candidate_views(graph, node, 12)
  return nbrs, views + LEVEL_ROW


class ViewFeatures:
  """Per-viewpoint view features from an .npz file or a folder of .npy files (module docstring).

  views: the expected number of views per viewpoint; dim: the expected feature size (None:
  taken from the first array read, then required of every other).
  """

  def __init__(self, source: str, views: int = VIEWS, dim: Optional[int] = None):
    self.source, self.views, self.dim = source, views, dim
    if os.path.isdir(source):
      self._npz = None
    elif os.path.isfile(source) and source.endswith(".npz"):
      self._npz = np.load(source)
    else:
      raise FileNotFoundError(f"r2r: view features {source} is neither an .npz file nor a "
                              "folder of .npy files.")

  @staticmethod
  def key(scan: str, viewpoint: str) -> str:
    return f"{scan}_{viewpoint}"

  def _file(self, key: str) -> str:
    return self.source if self._npz is not None else os.path.join(self.source, f"{key}.npy")

  def get(self, scan: str, viewpoint: str) -> np.ndarray:
    """float32 [views, C] of one viewpoint."""
    key = self.key(scan, viewpoint)
    if self._npz is not None:
      if key not in self._npz.files:
        raise KeyError(f"r2r: {self.source} has no key {key!r}.")
      array = self._npz[key]
    elif os.path.isfile(self._file(key)):
      array = np.load(self._file(key))
    else:
      raise KeyError(f"r2r: no file {self._file(key)} for key {key!r}.")
    expected = (self.views, self.dim if self.dim is not None else "C")
    if array.ndim != 2 or array.shape[0] != self.views or (
        self.dim is not None and array.shape[1] != self.dim):
      raise ValueError(f"r2r: {self._file(key)}: key {key!r} has shape {array.shape}, expected "
                       f"{expected}.")
    if not np.issubdtype(array.dtype, np.floating):
      raise ValueError(f"r2r: {self._file(key)}: key {key!r} has dtype {array.dtype}, expected "
                       "a float array.")
    self.dim = array.shape[1]
    return array.astype(np.float32)

  def graph_features(self, scan: str, graph: vp.Graph) -> np.ndarray:
    """float32 [V, views, C] for every viewpoint of a scan's graph, in its node order."""
    return np.stack([self.get(scan, v) for v in graph.ids])


def save_features(path: str, features: dict[tuple[str, str], np.ndarray]) -> None:
  """Writes {(scan, viewpoint): [views, C]} as the .npz ViewFeatures reads."""
  np.savez(path, **{ViewFeatures.key(s, v): np.asarray(a) for (s, v), a in features.items()})


# ---------------------------------------------------------------------------------------------
# Writing: vcbench-nav episodes in R2R's layout (for other R2R agents, and to test the reader).

def write_split(episodes: vln.Episodes, data_dir: str, connectivity_dir: str) -> None:
  """Writes R2R_{split}.json and each scan's connectivity file. Positions are written with x
  and y swapped, a mirror under which vcbench's headings (atan2(dy, dx)) are MatterSim's
  (atan2(dx, dy)): headings, distances and views carry over unchanged."""
  os.makedirs(data_dir, exist_ok=True)
  for scan, graph in zip(episodes.scans, episodes.graphs):
    nodes = [{"image_id": graph.ids[k], "included": True, "height": 1.5,
              "unobstructed": [bool(b) for b in graph.adj[k]],
              "pose": [1.0, 0.0, 0.0, float(y), 0.0, 1.0, 0.0, float(x), 0.0, 0.0, 1.0, 0.0,
                       0.0, 0.0, 0.0, 1.0]} for k, (x, y) in enumerate(graph.pos)]
    path = connectivity_path(connectivity_dir, scan)
    os.makedirs(os.path.dirname(path), exist_ok=True)   # scan names may hold a "/".
    with open(path, "w") as f:
      json.dump(nodes, f)
  items = []
  for i in range(len(episodes)):
    graph, path = episodes.graph(i), episodes.nodes(i)
    items.append({"scan": episodes.scans[int(episodes.apartment[i])],
                  "path_id": int(episodes.path_id[i]), "path": [graph.ids[n] for n in path],
                  "heading": float(episodes.heading[i]),
                  "distance": float(vp.path_length(graph, path)),
                  "instructions": list(episodes.instructions[i])})
  with open(os.path.join(data_dir, f"R2R_{episodes.split}.json"), "w") as f:
    json.dump(items, f)


def level_row_features(episodes: vln.Episodes, views: np.ndarray
                       ) -> dict[tuple[str, str], np.ndarray]:
  """{(scan, viewpoint): [36, C]} with each node's 12 level views ([A, V, 12, C], as
  `vln_features.split_features` makes) in the level row and zeros elsewhere."""
  out = {}
  for a, (scan, graph) in enumerate(zip(episodes.scans, episodes.graphs)):
    for k, viewpoint in enumerate(graph.ids):
      full = np.zeros((VIEWS, views.shape[-1]), np.float32)
      full[LEVEL_ROW:LEVEL_ROW + 12] = views[a, k]
      out[(scan, viewpoint)] = full
  return out
