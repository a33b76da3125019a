"""The G-VUE job end to end on a tiny budget: splits, features, decoders, store, report, gallery."""
import json

import pytest

from configs import gvue as gvue_config
from vcbench import jobs


def _tiny(tmp_path, tasks):
  c = gvue_config.get_config("tiny")
  c.workdir = str(tmp_path / "gvue")
  c.tasks = tasks
  return c


def test_tiny_run_records_each_cell_and_resumes(tmp_path):
  c = _tiny(tmp_path, ("vqa", "semantic_segmentation"))
  text = jobs.resolve(c).run(c)
  rows = [json.loads(l) for l in open(tmp_path / "gvue" / "results.jsonl")]
  assert sorted(r["cell"]["task"] for r in rows) == ["semantic_segmentation", "vqa"]
  vqa = next(r for r in rows if r["cell"]["task"] == "vqa")["metrics"]
  assert 0 <= vqa["accuracy"] <= 100 and vqa["task_score"] == vqa["accuracy"]
  seg = next(r for r in rows if r["cell"]["task"] == "semantic_segmentation")["metrics"]
  assert 0 <= seg["miou"] <= 100 and "pixel_accuracy" in seg
  assert "Summary score (partial)" in text and "Reason / vqa" in text
  for name in ("gvue.md", "gvue_radar.png", "gallery/vqa.png",
               "gallery/semantic_segmentation.png"):
    assert (tmp_path / "gvue" / name).exists(), name
  # A second run finds every cell in the store and trains nothing.
  jobs.resolve(c).run(c)
  assert len(open(tmp_path / "gvue" / "results.jsonl").readlines()) == 2


@pytest.mark.slow
def test_tiny_run_of_all_nine_tasks(tmp_path):
  c = _tiny(tmp_path, gvue_config.gvue.NON_ACT)
  jobs.resolve(c).run(c)
  assert len(open(tmp_path / "gvue" / "results.jsonl").readlines()) == 9


def test_bad_configs_are_refused_before_work(tmp_path):
  c = _tiny(tmp_path, ("navigatoin",))
  with pytest.raises(Exception, match="navigation"):
    jobs.resolve(c)
  c = _tiny(tmp_path, ("navigation",))
  c.navigation.source = "r2r"
  with pytest.raises(Exception, match="navigation.r2r.data_dir"):
    jobs.resolve(c)
  c = _tiny(tmp_path, ("vqa",))
  c.data.sources["vqa"] = "nope"
  with pytest.raises(Exception, match="nope"):
    jobs.resolve(c)
  c = _tiny(tmp_path, ("manipulation",))
  c.manipulation.tasks = ("put_block_in_cup",)
  with pytest.raises(Exception, match="put_block_in_bowl"):
    jobs.resolve(c)


def test_tiny_manipulation_trains_on_demos_and_scores_unseen_episodes(tmp_path):
  c = _tiny(tmp_path, ("manipulation",))
  text = jobs.resolve(c).run(c)
  rows = [json.loads(l) for l in open(tmp_path / "gvue" / "results.jsonl")]
  assert len(rows) == 1 and rows[0]["cell"]["task"] == "manipulation"
  m = rows[0]["metrics"]
  assert 0 <= m["score@unseen"] <= 100 and m["task_score"] == m["score@unseen"]
  assert m["test_episodes"] == 1 and m["train_examples"] >= 1
  assert "Act / manipulation" in text
  # Demos and their features are cached: a second seed trains without collecting again.
  c.seeds = (0, 1)
  jobs.resolve(c).run(c)
  assert len(open(tmp_path / "gvue" / "results.jsonl").readlines()) == 2
  assert len(list((tmp_path / "gvue" / "data" / "gvue_data" / "manipulation").iterdir())) >= 1


def test_tiny_navigation_trains_an_agent_and_scores_unseen_spl(tmp_path):
  c = _tiny(tmp_path, ("navigation",))
  text = jobs.resolve(c).run(c)
  rows = [json.loads(l) for l in open(tmp_path / "gvue" / "results.jsonl")]
  assert len(rows) == 1 and rows[0]["cell"]["task"] == "navigation"
  m = rows[0]["metrics"]
  assert 0 <= m["spl@unseen"] <= m["success@unseen"] <= 100
  assert m["task_score"] == m["spl@unseen"] and m["test_episodes"] == 4
  assert "| Act / navigation | SPL (unseen) ↑ |" in text and "SPL (seen) ↑" in text
  # Episodes and features are cached: a second seed renders and encodes nothing.
  data = tmp_path / "gvue" / "data"
  made = {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()}
  c.seeds = (0, 1)
  jobs.resolve(c).run(c)
  assert len(open(tmp_path / "gvue" / "results.jsonl").readlines()) == 2
  assert {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()} == made
  assert {p.parent.name for p in made} == {"navigation"}


def test_navigation_on_r2r_files_matches_the_generated_episodes(tmp_path):
  """The generated episodes written in R2R's layout (JSON, connectivity, per-view features)
  and run with source 'r2r' train the same agent to the same metrics."""
  from vcbench.data.gvue import r2r, vln_features as vf
  c = _tiny(tmp_path, ("navigation",))
  jobs.resolve(c).run(c)
  root, pvr = f"{c.workdir}/data", c.pvrs[0]
  splits = vf.load_or_make_splits(root, c.navigation)
  feats = vf.load_or_compute_features(root, c.navigation, pvr, splits,
                                      lambda: pytest.fail("features not cached"))
  views = {}
  for name, episodes in splits.items():
    r2r.write_split(episodes, str(tmp_path / "r2r"), str(tmp_path / "connectivity"))
    views.update(r2r.level_row_features(episodes, feats[name]["views"]))
  r2r.save_features(str(tmp_path / f"{pvr}.npz"), views)
  d = _tiny(tmp_path / "from_files", ("navigation",))
  d.navigation.source = "r2r"
  d.navigation.r2r.update(data_dir=str(tmp_path / "r2r"),
                          connectivity_dir=str(tmp_path / "connectivity"),
                          features=str(tmp_path / "{pvr}.npz"))
  jobs.resolve(d).run(d)
  generated, read = ([json.loads(l)["metrics"] for l in open(f"{w}/results.jsonl")]
                     for w in (c.workdir, d.workdir))
  for key in ("success@unseen", "spl@unseen", "success@seen", "spl@seen"):
    assert read[0][key] == pytest.approx(generated[0][key], abs=1e-6), key


def test_each_task_hashes_only_the_config_it_reads(tmp_path):
  from vcbench.jobs import gvue as job
  c = _tiny(tmp_path, ("vqa", "manipulation"))
  vqa, manip = job.task_hash(c, "vqa"), job.task_hash(c, "manipulation")
  c.manipulation.demos += 1
  c.data.sources["manipulation"] = "real"
  assert job.task_hash(c, "vqa") == vqa and job.task_hash(c, "manipulation") != manip
  manip = job.task_hash(c, "manipulation")
  c.decoder.width += 1
  assert job.task_hash(c, "manipulation") == manip and job.task_hash(c, "vqa") != vqa
  nav, vqa = job.task_hash(c, "navigation"), job.task_hash(c, "vqa")
  c.navigation.max_steps += 1
  assert job.task_hash(c, "navigation") != nav
  assert (job.task_hash(c, "vqa"), job.task_hash(c, "manipulation")) == (vqa, manip)
  nav = job.task_hash(c, "navigation")
  c.image_size, c.text_max_len = 32, 16        # what the other tasks read, navigation not.
  assert job.task_hash(c, "navigation") == nav
