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
  c = _tiny(tmp_path, ("navigation",))
  with pytest.raises(Exception, match="tasks"):
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
