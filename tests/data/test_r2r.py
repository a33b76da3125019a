"""The R2R loader on tiny hand-written fixtures: two scans' connectivity files, an R2R split
file and view features, with graphs, distances and paths worked out by hand."""
import json
import math
import os

import numpy as np
import pytest

from vcbench.data.gvue import r2r, vln


def pose(x, y, z):
  return [1, 0, 0, x, 0, 1, 0, y, 0, 0, 1, z, 0, 0, 0, 1]


def node(image_id, xyz, links, included=True):
  return {"image_id": image_id, "pose": pose(*xyz), "included": included,
          "unobstructed": links, "height": 1.5}


# Scan "alpha": a-b-c-d in a line along +x (c one metre up a stair), e off b along +y; f is not
# included, so its flags do not count.
ALPHA = [
    node("a", (0, 0, 0), [0, 1, 0, 0, 0, 1]),
    node("b", (2, 0, 0), [1, 0, 1, 0, 1, 0]),
    node("c", (4, 0, 1), [0, 1, 0, 1, 0, 0]),
    node("d", (6, 0, 1), [0, 0, 1, 0, 0, 0]),
    node("e", (2, 3, 0), [0, 1, 0, 0, 0, 0]),
    node("f", (0, 1, 0), [1, 0, 0, 0, 0, 0], included=False),
]
# Scan "beta": p-q-r a triangle with no p-r edge; s has no edge, so it is not in the graph.
BETA = [
    node("p", (0, 0, 0), [0, 1, 0, 0]),
    node("q", (0, 2, 0), [1, 0, 1, 0]),
    node("r", (2, 2, 0), [0, 1, 0, 0]),
    node("s", (9, 9, 0), [0, 0, 0, 0]),
]
ITEMS = [
    {"distance": 6.47, "scan": "alpha", "path_id": 11, "path": ["a", "b", "c", "d"],
     "heading": 1.0, "instructions": ["Go east up the step.", "Walk to d.", "Head to d."]},
    {"distance": 5.0, "scan": "alpha", "path_id": 12, "path": ["e", "b", "a"],
     "heading": -2.0, "instructions": ["one", "two", "three"]},
    {"distance": 4.0, "scan": "beta", "path_id": 13, "path": ["p", "q", "r"],
     "heading": 0.5, "instructions": ["x", "y", "z"]},
]


def write(tmp_path, items=ITEMS, scans=(("alpha", ALPHA), ("beta", BETA)), split="val_seen"):
  conn = tmp_path / "connectivity"
  conn.mkdir(exist_ok=True)
  for scan, nodes in scans:
    (conn / f"{scan}_connectivity.json").write_text(json.dumps(nodes))
  (tmp_path / f"R2R_{split}.json").write_text(json.dumps(items))
  return str(tmp_path), str(conn)


def test_graphs_follow_load_nav_graphs(tmp_path):
  _, conn = write(tmp_path)
  alpha = r2r.load_graph(conn, "alpha")
  assert alpha.ids == ("a", "b", "c", "d", "e") and alpha.frame == "mattersim"
  expected = {("a", "b"), ("b", "c"), ("c", "d"), ("b", "e")}
  edges = {(alpha.ids[i], alpha.ids[j]) for i, j in zip(*np.nonzero(np.triu(alpha.adj)))}
  assert edges == expected
  np.testing.assert_allclose(alpha.pos, [[0, 0], [2, 0], [4, 0], [6, 0], [2, 3]])
  assert (alpha.room == -1).all()
  step = math.sqrt(5.0)                     # b -> c climbs a metre: distances are 3-D.
  a, b, c, d, e = range(5)
  assert alpha.dist[a, d] == pytest.approx(2 + step + 2)
  assert alpha.dist[e, c] == pytest.approx(3 + step)
  assert alpha.dist[a, a] == 0
  beta = r2r.load_graph(conn, "beta")
  assert beta.ids == ("p", "q", "r")        # s has no edge; R2R's graphs leave it out.
  assert not beta.adj[0, 2] and beta.dist[0, 2] == pytest.approx(4.0)


def test_headings_are_mattersims(tmp_path):
  _, conn = write(tmp_path)
  alpha = r2r.load_graph(conn, "alpha")
  assert alpha.heading(0, 1) == pytest.approx(math.pi / 2)   # a -> b: along +x, a right turn.
  assert alpha.heading(1, 4) == pytest.approx(0.0)           # b -> e: along +y.
  nbrs, views = r2r.candidate_views(alpha, 1)
  assert dict(zip(nbrs.tolist(), views.tolist())) == {0: 12 + 9, 2: 12 + 3, 4: 12 + 0}
  assert r2r.view_of(math.radians(95), 0) == 3 and r2r.view_of(-math.radians(31), 2) == 35


def test_split_becomes_episodes(tmp_path):
  data, conn = write(tmp_path)
  episodes = r2r.load_split(data, "val_seen", conn)
  assert episodes.scans == ("alpha", "beta") and episodes.seeds == (-1, -1)
  assert episodes.grid_size == 0
  np.testing.assert_array_equal(episodes.apartment, [0, 0, 1])
  np.testing.assert_array_equal(episodes.path, [[0, 1, 2, 3], [4, 1, 0, -1], [0, 1, 2, -1]])
  np.testing.assert_array_equal(episodes.path_id, [11, 12, 13])
  np.testing.assert_allclose(episodes.heading, [1.0, -2.0, 0.5])
  assert episodes.instructions[0] == ("Go east up the step.", "Walk to d.", "Head to d.")
  result = vln.evaluate(episodes, [[0, 1, 2], [4, 1], [0]])
  # Stops 2 m short of d (success), 2 m short of a (success), 4 m short of r (failure).
  assert result["success_rate"] == pytest.approx(2 / 3)
  assert result["nav_error"] == pytest.approx((2 + 2 + 4) / 3)


def test_missing_scan_file_is_named(tmp_path):
  data, conn = write(tmp_path, scans=(("alpha", ALPHA),))
  with pytest.raises(FileNotFoundError, match="beta_connectivity.json"):
    r2r.load_split(data, "val_seen", conn)
  with pytest.raises(FileNotFoundError, match="R2R_train.json"):
    r2r.load_split(data, "train", conn)


def test_path_through_a_viewpoint_not_in_the_graph(tmp_path):
  bad = [dict(ITEMS[0], path=["a", "f"]), ITEMS[2]]   # f is not included.
  data, conn = write(tmp_path, items=bad)
  with pytest.raises(ValueError, match="path 11 goes through viewpoint 'f'.*scan alpha"):
    r2r.load_split(data, "val_seen", conn)
  jump = [dict(ITEMS[0], path=["a", "c"])]              # no a-c edge.
  data, conn = write(tmp_path, items=jump)
  with pytest.raises(ValueError, match="from 'a' to 'c'"):
    r2r.load_split(data, "val_seen", conn)


def test_asymmetric_or_malformed_connectivity(tmp_path):
  broken = [dict(n) for n in BETA]
  broken[0] = dict(broken[0], unobstructed=[0, 0, 0, 0])   # q says p, p does not say q.
  _, conn = write(tmp_path, scans=(("beta", broken),))
  with pytest.raises(ValueError, match="not symmetric between viewpoints 'p' and 'q'"):
    r2r.load_graph(conn, "beta")
  short = [dict(n) for n in BETA]
  short[1] = dict(short[1], pose=[0.0] * 12)
  _, conn = write(tmp_path, scans=(("beta", short),))
  with pytest.raises(ValueError, match="viewpoint 1 \\('q'\\) needs a 16-float pose"):
    r2r.load_graph(conn, "beta")


def test_view_features_from_npz_and_folder(tmp_path):
  _, conn = write(tmp_path)
  beta = r2r.load_graph(conn, "beta")
  rng = np.random.default_rng(0)
  arrays = {("beta", v): rng.normal(size=(36, 8)).astype(np.float32) for v in beta.ids}
  npz = str(tmp_path / "features.npz")
  r2r.save_features(npz, arrays)
  folder = tmp_path / "features"
  folder.mkdir()
  for (scan, v), a in arrays.items():
    np.save(folder / f"{scan}_{v}.npy", a)
  for source in (npz, str(folder)):
    feats = r2r.ViewFeatures(source)
    np.testing.assert_array_equal(feats.get("beta", "q"), arrays["beta", "q"])
    stacked = feats.graph_features("beta", beta)
    assert stacked.shape == (3, 36, 8) and stacked.dtype == np.float32
    np.testing.assert_array_equal(stacked[2], arrays["beta", "r"])
    with pytest.raises(KeyError, match="beta_s"):
      feats.get("beta", "s")


def test_view_features_of_the_wrong_shape_are_named(tmp_path):
  npz = str(tmp_path / "features.npz")
  r2r.save_features(npz, {("alpha", "a"): np.zeros((36, 4)), ("alpha", "b"): np.zeros((12, 4)),
                          ("alpha", "c"): np.zeros((36, 5))})
  feats = r2r.ViewFeatures(npz)
  with pytest.raises(ValueError, match=r"features.npz: key 'alpha_b' has shape \(12, 4\), "
                                       r"expected \(36, 'C'\)"):
    feats.get("alpha", "b")
  feats.get("alpha", "a")                    # fixes C = 4 for every later array.
  with pytest.raises(ValueError, match=r"key 'alpha_c' has shape \(36, 5\), expected \(36, 4\)"):
    feats.get("alpha", "c")
  folder = tmp_path / "folder"
  folder.mkdir()
  np.save(folder / "alpha_d.npy", np.zeros((36,)))
  with pytest.raises(ValueError, match=f"{os.sep}alpha_d.npy: key 'alpha_d' has shape \\(36,\\)"):
    r2r.ViewFeatures(str(folder), dim=4).get("alpha", "d")
  with pytest.raises(FileNotFoundError, match="neither an .npz file nor a folder"):
    r2r.ViewFeatures(str(tmp_path / "nothing.npz"))
