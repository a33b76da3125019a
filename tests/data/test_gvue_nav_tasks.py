"""The G-VUE tasks generated from vcbench-nav: determinism, apartment splits, the split contract,
and every label checked against an independent rendering of the example's pose (a plain jitted
`render.render` of the apartment regenerated from its seed, not the generator's batched path)."""
import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.data.gvue import nav_pool as pl
from vcbench.data.gvue import nav_tasks as nt
from vcbench.data.gvue import nav_text as tx
from vcbench.data.gvue import nav_views
from vcbench.data.gvue.split import check
from vcbench.envs.nav import render as rd
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import scenes, textures

SIZE = 32
NUM = 8


@functools.lru_cache(maxsize=None)
def split_of(task, split="train", seed=0, num=NUM, size=SIZE):
  return nt.make_split(task, split, num, seed, size)


@functools.lru_cache(maxsize=None)
def examples_of(task, split="train", seed=0, num=NUM, size=SIZE):
  return nt.examples(task, split, num, seed, size)


@functools.lru_cache(maxsize=None)
def apartment(scene_name):
  return jax.tree.map(jnp.asarray, scenes.generate(int(scene_name.rsplit("-", 1)[1]),
                                                    objects=nav_views.OBJECTS))


@functools.partial(jax.jit, static_argnums=(4,))
def _render(scene, atlas, pos, heading, camera):
  return rd.render(scene, atlas, pos, heading, camera, rd.SENSORS)


def rerender(view, size=SIZE):
  """The renderer's own output at the view's pose (atlas of 64 texels: the generator's below
  129 pixels)."""
  out = _render(apartment(view.scene), jnp.asarray(textures.atlas(64)),
                jnp.asarray(view.position), jnp.float32(view.heading),
                rd.Camera(height=size, width=size))
  return {k: np.asarray(v) for k, v in out.items()}


def visible_instances(instance, scene_name):
  """{instance: (category, material, pixel count, mean column / width)} from an instance map."""
  s = apartment(scene_name)
  out = {}
  for inst in np.unique(instance[instance >= 0]).tolist():
    cols = np.nonzero(instance == inst)[1]
    out[inst] = (int(s.inst_cat[inst]), int(s.inst_mat[inst]), len(cols),
                 (cols.mean() + 0.5) / instance.shape[1])
  return out


# ---------------------------------------------------------------------------------------------
# Determinism, splits, the contract.

@pytest.mark.parametrize("task", nt.TASKS)
def test_deterministic_and_seed_dependent(task):
  a, b = split_of(task), nt.make_split(task, "train", NUM, 0, SIZE)
  assert np.array_equal(a.images, b.images) and a.texts == b.texts and a.scene == b.scene
  for name in a.targets:
    assert np.array_equal(a.targets[name], b.targets[name])
  other = split_of(task, seed=1)
  assert not np.array_equal(a.images, other.images)


@pytest.mark.parametrize("task", nt.TASKS)
def test_split_contract(task):
  s = check(split_of(task))
  assert s.task == task and len(s) == NUM and s.images.shape == (NUM, SIZE, SIZE, 3)
  assert len(s.scene) == NUM and all(name.startswith("vcbench-nav/apartment-") for name in s.scene)


@pytest.mark.parametrize("task", [t for t in nt.TASKS if t != "camera_pose"])
def test_train_and_test_share_no_apartment(task):
  train, test = split_of(task, "train", num=40), split_of(task, "test", num=20)
  assert len(set(train.scene)) == 3 and len(set(test.scene)) == 2   # ceil(num / 16).
  assert not set(train.scene) & set(test.scene)


def test_camera_pose_splits_are_walks_in_the_same_apartments():
  train, test = split_of("camera_pose", "train", num=80), split_of("camera_pose", "test", num=80)
  assert set(train.scene) == set(test.scene) == {"vcbench-nav/apartment-0",
                                                 "vcbench-nav/apartment-1"}
  positions = lambda s: {tuple(p) for p in s.targets["position"]}
  assert not positions(train) & positions(test)


def test_bad_arguments_name_the_field():
  with pytest.raises(nt.NavTaskError, match="unknown task"):
    nt.make_split("reconstruction_3d", "train", 4, 0, 32)
  with pytest.raises(nt.NavTaskError, match="split"):
    nt.make_split("vqa", "val", 4, 0, 32)
  with pytest.raises(nt.NavTaskError, match="size"):
    nt.make_split("vqa", "train", 4, 0, 8)
  with pytest.raises(nt.NavTaskError, match="num"):
    nt.make_split("vqa", "train", 0, 0, 32)


# ---------------------------------------------------------------------------------------------
# Labels against the renderer.

def test_depth_is_the_renderers_depth_and_the_image_its_rgb():
  s, exs = split_of("depth_estimation", "test"), examples_of("depth_estimation", "test")
  for i, e in enumerate(exs):
    ref = rerender(e.view)
    depth = np.where(ref["depth"][..., 0] < 10.0, ref["depth"][..., 0], 0.0)
    np.testing.assert_allclose(s.targets["depth"][i], depth, atol=1e-4)
    assert np.mean(s.images[i] != ref["rgb"]) < 0.01
  valid = s.targets["depth"][s.targets["depth"] > 0]
  assert valid.min() > 1e-3 and valid.max() < 10.0


def test_segmentation_labels_are_semantics_plus_one():
  s, exs = split_of("semantic_segmentation"), examples_of("semantic_segmentation")
  assert s.meta["num_classes"] == 9 and s.meta["class_names"][3] == "chair"
  for i, e in enumerate(exs):
    assert np.array_equal(s.targets["labels"][i], rerender(e.view)["semantic"] + 1)
  assert 1 <= s.targets["labels"].min() and s.targets["labels"].max() <= 9


def test_grounding_box_is_the_named_instances_pixels():
  size = 48
  s, exs = split_of("phrase_grounding", num=10, size=size), examples_of("phrase_grounding", num=10,
                                                                         size=size)
  for i, e in enumerate(exs):
    instance = rerender(e.view, size)["instance"]
    thing = e.payload[0]
    rows, cols = np.nonzero(instance == thing.inst)
    assert len(rows) >= max(4, math.ceil(0.01 * size * size))
    expected = [cols.min() / size, rows.min() / size, (cols.max() + 1) / size,
                (rows.max() + 1) / size]
    np.testing.assert_allclose(s.targets["box"][i], expected, atol=1e-6)
    text = s.texts[i][0]
    assert tx.CATEGORY[thing.category] in text
    if e.key == "category":   # "the {category}": the only instance of it in view.
      cats = [v[0] for v in visible_instances(instance, e.view.scene).values()]
      assert cats.count(thing.category) == 1
  assert set(s.meta["templates"]) == set(tx.GROUNDING_TEMPLATES)


def test_vqa_answers_match_the_instance_map():
  s, exs = split_of("vqa", num=24, size=48), examples_of("vqa", num=24, size=48)
  by_count = {tx.count_question(c): c for c in tx.CATEGORY}
  by_exist = {tx.exist_question(c): c for c in tx.CATEGORY}
  checked = 0
  for i, e in enumerate(exs):
    question, answer = s.texts[i][0], s.meta["answers"][s.targets["answer"][i]]
    seen = visible_instances(rerender(e.view, 48)["instance"], e.view.scene)
    cats = [v[0] for v in seen.values()]
    if question in by_count:
      assert answer == str(cats.count(by_count[question]))
      checked += 1
    elif question in by_exist:
      assert answer == ("yes" if by_exist[question] in cats else "no")
      checked += 1
  assert checked >= 10
  assert set(s.meta["blind_baseline"]) == set(tx.QUESTION_TYPES)


def test_vqa_draw_balances_every_questions_answers():
  rng = np.random.default_rng(0)
  offered = sorted(set(tx.question_keys()), key=repr)
  draw = pl.balanced_questions()
  keys = [draw(rng, i, offered) for i in range(2400)]
  baseline = pl.blind_baselines(keys)
  # With every key on offer, each question's answers come out uniform: a question-only model
  # gets 1 / (its answers) right -- 1/2 for yes/no, 1/6 for the room.
  assert baseline["exist"]["per_question"] == pytest.approx(0.5, abs=0.01)
  assert baseline["room"]["per_question"] == pytest.approx(1 / 6, abs=0.01)
  expected = np.mean([1 / len(tx.COUNT_ANSWERS[c]) for c in tx.CATEGORY])
  assert baseline["count"]["per_question"] == pytest.approx(expected, abs=0.02)
  assert [k[0] for k in keys[:8]] == list(tx.QUESTION_TYPES) * 2


def _parse_choice(text):
  """'the blue sofa on the left' -> (category, material, side index)."""
  for material, word in tx.ATTRIBUTES.items():
    for category, name in tx.CATEGORY.items():
      for side, where in enumerate(("on the left", "in the middle", "on the right")):
        if text == f"the {word} {name} {where}":
          return category, material, side
  raise AssertionError(f"unparsable choice {text!r}")


def test_commonsense_has_exactly_one_right_choice():
  size = 48
  s, exs = (split_of("commonsense_reasoning", num=12, size=size),
            examples_of("commonsense_reasoning", num=12, size=size))
  questions = {q: right for q, right, _ in tx.AFFORDANCES}
  for i, e in enumerate(exs):
    question, *choices = s.texts[i]
    seen = {(cat, mat, min(int(x * 3), 2)) for cat, mat, _, x in
            visible_instances(rerender(e.view, size)["instance"], e.view.scene).values()}
    right = [j for j, c in enumerate(choices)
             if _parse_choice(c)[0] in questions[question] and _parse_choice(c) in seen]
    assert right == [int(s.targets["answer"][i])], (question, choices, seen)
    assert len(set(choices)) == 4
  assert np.bincount(s.targets["answer"], minlength=4).tolist() == [3, 3, 3, 3]


def test_camera_pose_is_the_rendered_pose():
  s, exs = split_of("camera_pose"), examples_of("camera_pose")
  q = s.targets["quaternion"]
  np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-6)
  assert (q[:, 0] >= 0).all() and np.allclose(q[:, 1:3], 0)
  np.testing.assert_allclose(s.targets["position"][:, 2], -sc.CAMERA_HEIGHT)
  for i, e in enumerate(exs):
    np.testing.assert_allclose(s.targets["position"][i, :2], e.view.position, atol=1e-6)
    w, _, _, z = q[i]
    forward = (w * w - z * z, 2 * w * z)           # the rotation of +x about +z.
    np.testing.assert_allclose(forward, (math.cos(e.view.heading), math.sin(e.view.heading)),
                               atol=1e-5)
    assert np.mean(s.images[i] != rerender(e.view)["rgb"]) < 0.01


def test_retrieval_captions_name_what_is_visible_and_each_names_one_image():
  s, exs = split_of("image_text_retrieval", size=48), examples_of("image_text_retrieval", size=48)
  every = [c for caps in s.texts for c in caps]
  assert len(every) == len(set(every))
  for i, e in enumerate(exs):
    full = tx.captions(e.view)
    assert 2 <= len(s.texts[i]) <= 4 and set(s.texts[i]) <= set(full)
    seen = visible_instances(rerender(e.view, 48)["instance"], e.view.scene)
    counts = {}
    for cat, mat, *_ in seen.values():
      counts[cat, mat] = counts.get((cat, mat), 0) + 1
    assert full[0].endswith(f" with {tx.described(counts)}.")


def test_generation_speed(capsys):
  split_of("depth_estimation", num=64, size=64)   # compile for these shapes first.
  start = time.perf_counter()
  nt.make_split("depth_estimation", "train", 64, 5, 64)
  rate = 64 / (time.perf_counter() - start)
  with capsys.disabled():
    print(f"\nvcbench-nav G-VUE depth_estimation at 64 px: {rate:.0f} images/s")
  assert rate > 10
