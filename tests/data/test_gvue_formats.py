"""The G-VUE real-format loaders, end to end on tiny files written in each dataset's own layout:
values come back in the contract's units at the right place (depth mm -> m per pixel, COCO xywh
-> normalised xyxy, captions per image, GQA answer indices, VCR text and box highlights, the
Bongard layout), and each malformed file is refused naming the file and the field or line."""
import json
import pickle

import numpy as np
import pytest
from PIL import Image

from vcbench.data.gvue import formats
from vcbench.data.gvue import formats_perceive as perceive
from vcbench.data.gvue import formats_vcr as vcr
from vcbench.data.gvue import split as split_lib
from vcbench.errors import UserError

SIZE = 16


def _save(path, array, mode=None):
  path.parent.mkdir(parents=True, exist_ok=True)
  Image.fromarray(np.asarray(array), mode).save(path)
  return path


def _solid(path, rgb, hw=(12, 20)):
  return _save(path, np.full(hw + (3,), rgb, np.uint8))


def _json(path, data):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data))
  return path


def _text(path, lines):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("\n".join(lines) + "\n")
  return path


def test_registry_covers_every_non_act_task():
  # Manipulation's real data (CLIPort's demos) has its own reader, data/gvue/cliport.py.
  assert sorted(formats.LOADERS.names()) == sorted(set(split_lib.TARGETS) - {"manipulation"})


# --- depth_estimation: NYUv2 as BTS lays it out -------------------------------------------------

def _nyu_depth_mm():
  """480x640 uint16 mm, constant on the 30x40 cells that become the 16x16 output pixels:
  1000 + 100 * cell row + cell column, and 0 (invalid) in cell (0, 0)."""
  rows, cols = np.meshgrid(np.arange(480) // 30, np.arange(640) // 40, indexing="ij")
  depth = (1000 + 100 * rows + cols).astype(np.uint16)
  depth[:30, :40] = 0
  return depth


def _nyu(tmp_path, depth=None):
  _solid(tmp_path / "kitchen_0028b" / "rgb_00045.jpg", (200, 40, 10), (480, 640))
  _save(tmp_path / "kitchen_0028b" / "sync_depth_00045.png",
        _nyu_depth_mm() if depth is None else depth)
  return _text(tmp_path / "nyudepthv2_train_files_with_gt.txt",
               ["/kitchen_0028b/rgb_00045.jpg /kitchen_0028b/sync_depth_00045.png 518.8579"])


def test_nyu_depth_comes_back_in_metres_at_each_pixel(tmp_path):
  _nyu(tmp_path)
  got = formats.LOADERS["depth_estimation"](root=tmp_path, split="train", size=SIZE)
  rows, cols = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
  expected = (1000 + 100 * rows + cols) / 1000.0
  expected[0, 0] = 0.0
  np.testing.assert_allclose(got.targets["depth"][0], expected, rtol=0, atol=1e-6)
  assert got.targets["depth"].dtype == np.float32 and got.images.shape == (1, SIZE, SIZE, 3)
  assert np.abs(got.images[0].astype(int) - (200, 40, 10)).max() <= 3   # JPEG.
  assert got.scene == ("kitchen_0028b",)
  # Eigen crop rows 45:471, cols 41:601 of 480x640, scaled to 16: 1.5, 15.7, 1.025, 15.025.
  assert got.meta["eval_crop"] == (2, 16, 1, 15)
  assert perceive.eigen_crop(480) == (45, 471, 31, 451)


def test_nyu_refuses_a_short_line_and_an_8_bit_depth(tmp_path):
  index = _nyu(tmp_path)
  index.write_text(index.read_text() + "kitchen_0028b/rgb_00046.jpg\n")
  with pytest.raises(formats.FormatError, match=r"nyudepthv2_train_files_with_gt\.txt: line 2 "
                     r"has 1 fields"):
    formats.load_depth_estimation(tmp_path, "train", SIZE)
  _nyu(tmp_path, depth=np.zeros((480, 640), np.uint8))
  with pytest.raises(formats.FormatError, match=r"sync_depth_00045\.png: depth must be a 16-bit"):
    formats.load_depth_estimation(tmp_path, "train", SIZE)


# --- camera_pose: PoseNet-style lists ------------------------------------------------------------

def _three_bands(path):
  """64x36 (16:9): red, green, blue columns with green exactly the centred 36x36 square."""
  image = np.zeros((36, 64, 3), np.uint8)
  image[:, :14] = (255, 0, 0)
  image[:, 14:50] = (0, 255, 0)
  image[:, 50:] = (0, 0, 255)
  return _save(path, image)


def test_cambridge_poses_and_centre_crop(tmp_path):
  header = ["Visual Landmark Dataset V1", "ImageFile, Camera Position [X Y Z W P Q R]", ""]
  _text(tmp_path / "KingsCollege" / "dataset_test.txt", header + [
      "seq2/frame00001.png 1.5 -2.0 3.25 2.0 0.0 0.0 0.0",
      "seq3/frame00007.png 0 0 0 0.5 0.5 0.5 0.5"])
  _three_bands(tmp_path / "KingsCollege" / "seq2" / "frame00001.png")
  _three_bands(tmp_path / "KingsCollege" / "seq3" / "frame00007.png")
  got = formats.LOADERS["camera_pose"](root=tmp_path, split="test", size=SIZE)
  np.testing.assert_allclose(got.targets["position"], [[1.5, -2.0, 3.25], [0, 0, 0]])
  np.testing.assert_allclose(got.targets["quaternion"], [[1, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]])
  assert (got.images[:, :, :, 1] == 255).all() and (got.images[:, :, :, [0, 2]] == 0).all()
  assert got.scene == ("KingsCollege/seq2", "KingsCollege/seq3")


def test_seven_scenes_reads_the_val_list_for_test(tmp_path):
  _text(tmp_path / "7Scenes_PoseNet_TrainVal" / "heads_val.txt",
        ["7-Scenes", "ImageFile, Camera Position [X Y Z W P Q R]", "",
         "/seq-02/frame-000000.color.png 0.1 0.2 0.3 0 0 0 1"])
  _solid(tmp_path / "heads" / "seq-02" / "frame-000000.color.png", (9, 9, 9), (48, 64))
  got = formats.load_camera_pose(tmp_path, "test", SIZE, scene="heads", dataset="7scenes")
  np.testing.assert_allclose(got.targets["quaternion"], [[0, 0, 0, 1]])
  assert got.scene == ("heads/seq-02",)


def test_camera_pose_refuses_a_short_pose_line(tmp_path):
  _text(tmp_path / "ShopFacade" / "dataset_train.txt",
        ["title", "columns", "", "seq1/frame1.png 1 2 3 1 0 0"])
  with pytest.raises(formats.FormatError, match=r"dataset_train\.txt: line 4 has 7 fields"):
    formats.load_camera_pose(tmp_path, "train", SIZE, scene="ShopFacade")


# --- reconstruction_3d: ShapeNet renderings + AutoSDF SDF grids ----------------------------------

def _shapenet(tmp_path, sdf_shape=(1, 8, 8, 8)):
  _json(tmp_path / "info.json", {"cats": {"chair": "03001627", "car": "02958343"},
                                 "all_cats": ["chair", "car"]})
  _text(tmp_path / "filelists" / "03001627_test.lst", ["m1", "m2"])
  _text(tmp_path / "filelists" / "02958343_test.lst", ["m3"])
  sdfs = {}
  for k, (synset, model) in enumerate([("03001627", "m1"), ("03001627", "m2"),
                                       ("02958343", "m3")]):
    for view in range(2):
      rgba = np.zeros((20, 20, 4), np.uint8)
      rgba[..., 0], rgba[..., 1], rgba[..., 3] = 50 * k, 100 * view, 255
      _save(tmp_path / "ShapeNetRendering" / synset / model / "rendering" / f"{view:02d}.png",
            rgba, "RGBA")
    sdf = np.full(sdf_shape, 0.2, np.float32)
    sdf.reshape(-1, 8, 8, 8)[0, 2:4, 1 + k:6, 5:8] = -0.05      # the inside, negative.
    (tmp_path / "x" / synset / model).mkdir(parents=True)
    np.save(tmp_path / "x" / synset / model / "x.npy", sdf)
    sdfs[model] = sdf.reshape(8, 8, 8)
  return sdfs


def test_shapenet_occupancy_is_the_negative_sdf_per_view(tmp_path):
  sdfs = _shapenet(tmp_path)
  got = formats.LOADERS["reconstruction_3d"](root=tmp_path, split="test", size=SIZE,
                                             views=(0, 1), resolution=8, limit=5)
  assert got.scene == ("03001627/m1",) * 2 + ("03001627/m2",) * 2 + ("02958343/m3",)
  np.testing.assert_array_equal(got.targets["occupancy"][0], sdfs["m1"] < 0)
  np.testing.assert_array_equal(got.targets["occupancy"][4], sdfs["m3"] < 0)
  assert got.targets["occupancy"][2].sum() == 2 * 4 * 3     # m2: rows 2:4, 2:6, 5:8.
  assert tuple(got.images[1, 0, 0]) == (0, 100, 0) and tuple(got.images[4, 0, 0]) == (100, 0, 0)


def test_shapenet_coarse_voxel_is_occupied_if_any_fine_one_is(tmp_path):
  sdfs = _shapenet(tmp_path)
  got = formats.load_reconstruction_3d(tmp_path, "test", SIZE, categories="car", resolution=4)
  fine = sdfs["m3"] < 0
  coarse = np.zeros((4, 4, 4), bool)
  for i, j, k in zip(*np.nonzero(fine)):
    coarse[i // 2, j // 2, k // 2] = True
  np.testing.assert_array_equal(got.targets["occupancy"][0], coarse)


def test_shapenet_refuses_a_flat_sdf_grid(tmp_path):
  _shapenet(tmp_path, sdf_shape=(8, 64))
  with pytest.raises(formats.FormatError, match=r"m1/x\.npy: SDF grid must be float"):
    formats.load_reconstruction_3d(tmp_path, "test", SIZE)


# --- image_text_retrieval: Flickr30k ------------------------------------------------------------

def _karpathy(tmp_path, drop_sentences=False):
  images = [
      {"filename": "100.jpg", "split": "test", "sentences": [{"raw": f"A dog {i} ."}
                                                             for i in range(5)]},
      {"filename": "200.jpg", "split": "train", "sentences": [{"raw": "A cat."}]},
      {"filename": "300.jpg", "split": "test", "sentences": [{"raw": " Two men talk. "},
                                                             {"raw": "People."}]},
  ]
  if drop_sentences:
    del images[2]["sentences"]
  for name, rgb in (("100.jpg", (250, 0, 0)), ("200.jpg", (0, 250, 0)), ("300.jpg", (0, 0, 250))):
    _solid(tmp_path / "flickr30k-images" / name, rgb)
  return _json(tmp_path / "dataset_flickr30k.json", {"images": images, "dataset": "flickr30k"})


def test_flickr_captions_are_grouped_per_image(tmp_path):
  _karpathy(tmp_path)
  got = formats.LOADERS["image_text_retrieval"](root=tmp_path, split="test", size=SIZE)
  assert got.texts == (tuple(f"A dog {i} ." for i in range(5)), ("Two men talk.", "People."))
  assert got.scene == ("100", "300") and got.images[1, 5, 5, 2] > 240
  albef = _json(tmp_path / "flickr30k_train.json", [
      {"image": "flickr30k-images/200.jpg", "caption": "A cat.", "image_id": "200"},
      {"image": "flickr30k-images/100.jpg", "caption": "A dog.", "image_id": "100"},
      {"image": "flickr30k-images/200.jpg", "caption": "A cat naps.", "image_id": "200"}])
  got = formats.load_image_text_retrieval(tmp_path, "train", SIZE, annotations=albef)
  assert got.texts == (("A cat.", "A cat naps."), ("A dog.",)) and got.scene == ("200", "100")


def test_flickr_refuses_an_image_without_sentences(tmp_path):
  _karpathy(tmp_path, drop_sentences=True)
  with pytest.raises(formats.FormatError,
                     match=r"dataset_flickr30k\.json: images\[2\] has no 'sentences'"):
    formats.load_image_text_retrieval(tmp_path, "test", SIZE)


# --- phrase_grounding: RefCOCO ------------------------------------------------------------------

def _refcoco(tmp_path, bbox=(10, 20, 30, 40)):
  refs = [
      {"split": "train", "ann_id": 7, "image_id": 1, "ref_id": 0,
       "sentences": [{"sent": "left dog", "raw": "Left dog"}]},
      {"split": "val", "ann_id": 8, "image_id": 2, "ref_id": 1,
       "sentences": [{"sent": "man in red", "raw": "Man in red."}, {"sent": "red shirt guy"}]},
  ]
  (tmp_path / "refs(unc).p").write_bytes(pickle.dumps(refs))
  _json(tmp_path / "instances.json", {
      "images": [{"id": 1, "file_name": "COCO_train2014_000000000001.jpg"},
                 {"id": 2, "file_name": "COCO_train2014_000000000002.jpg"}],
      "annotations": [{"id": 7, "image_id": 1, "bbox": [0, 0, 5, 5]},
                      {"id": 8, "image_id": 2, "bbox": list(bbox)}]})
  _solid(tmp_path / "images" / "COCO_train2014_000000000001.jpg", (1, 2, 3), (50, 50))
  _solid(tmp_path / "images" / "COCO_train2014_000000000002.jpg", (4, 5, 6), (80, 100))


def test_refcoco_box_is_normalised_xyxy(tmp_path):
  _refcoco(tmp_path)
  got = formats.LOADERS["phrase_grounding"](root=tmp_path, split="test", size=SIZE)
  # COCO [x, y, w, h] = [10, 20, 30, 40] on a 100x80 image.
  np.testing.assert_allclose(got.targets["box"], [[0.1, 0.25, 0.4, 0.75]], atol=1e-7)
  assert got.texts == (("man in red",),) and got.scene == ("2",)
  every = formats.load_phrase_grounding(tmp_path, "val", SIZE, all_sentences=True)
  assert every.texts == (("man in red",), ("red shirt guy",)) and len(every) == 2


def test_refcoco_refuses_a_three_number_bbox(tmp_path):
  _refcoco(tmp_path, bbox=(10, 20, 30))
  with pytest.raises(formats.FormatError,
                     match=r"instances\.json: annotations\[1\]\['bbox'\] has 3 entries"):
    formats.load_phrase_grounding(tmp_path, "val", SIZE)


# --- semantic_segmentation: ADE20K SceneParsing --------------------------------------------------

def _ade(tmp_path, top_label=150):
  labels = np.zeros((24, 40), np.uint8)          # 16x16 out of 24x40: cells 1.5 x 2.5 px.
  labels[:12, 20:] = 7
  labels[12:, :20] = top_label
  _solid(tmp_path / "images" / "validation" / "ADE_val_00000001.jpg", (90, 90, 90), (24, 40))
  _save(tmp_path / "annotations" / "validation" / "ADE_val_00000001.png", labels)
  return labels


def test_ade_labels_keep_their_classes_under_nearest_resize(tmp_path):
  _ade(tmp_path)
  got = formats.LOADERS["semantic_segmentation"](root=tmp_path, split="test", size=SIZE)
  labels = got.targets["labels"][0]
  assert labels.dtype == np.int32 and set(np.unique(labels)) == {0, 7, 150}
  assert labels[0, 0] == 0 and labels[0, -1] == 7 and labels[-1, 0] == 150
  assert (labels[:8, 8:] == 7).all() and (labels[8:, :8] == 150).all()
  assert got.meta["num_classes"] == 150 and got.scene == ("ADE_val_00000001",)
  index = _text(tmp_path / "ADE20K_object150_val.txt", ["validation/ADE_val_00000001.jpg"])
  assert len(formats.load_semantic_segmentation(tmp_path, "val", SIZE, index_file=index)) == 1


def test_ade_refuses_a_class_beyond_150(tmp_path):
  _ade(tmp_path, top_label=151)
  with pytest.raises(formats.FormatError, match=r"ADE_val_00000001\.png: class index 151"):
    formats.load_semantic_segmentation(tmp_path, "val", SIZE)


# --- vqa: GQA balanced questions -----------------------------------------------------------------

def _gqa(tmp_path, drop_answer=False):
  train = {"t1": {"imageId": "n1", "question": "What color is the car?", "answer": "red"},
           "t2": {"imageId": "n1", "question": "Is it a car?", "answer": "yes"}}
  val = {"v1": {"imageId": "n2", "question": "What is it?", "answer": "dog"}}
  testdev = {"d1": {"imageId": "n3", "question": "Is it red?", "answer": "yes"},
             "d2": {"imageId": "n3", "question": "What animal?", "answer": "dog"}}
  if drop_answer:
    del testdev["d2"]["answer"]
  for name, questions in (("train", train), ("val", val), ("testdev", testdev)):
    _json(tmp_path / f"{name}_balanced_questions.json", questions)
  for image_id in ("n1", "n2", "n3"):
    _solid(tmp_path / "images" / f"{image_id}.jpg", (30, 60, 90))


def test_gqa_answers_index_the_vocabulary_built_as_g_vue_does(tmp_path):
  _gqa(tmp_path)
  got = formats.LOADERS["vqa"](root=tmp_path, split="test", size=SIZE)
  assert got.meta["answers"] == ("red", "yes", "dog") == tuple(formats.build_gqa_answers(tmp_path))
  assert got.targets["answer"].tolist() == [1, 2]
  assert got.texts == (("Is it red?",), ("What animal?",)) and got.scene == ("n3", "n3")
  vocabulary = _json(tmp_path / "answers.json", {"dog": 0, "yes": 1, "red": 2})
  got = formats.load_vqa(tmp_path, "train", SIZE, answers_file=vocabulary, limit=1)
  assert got.meta["answers"] == ("dog", "yes", "red") and got.targets["answer"].tolist() == [2]


def test_gqa_refuses_a_question_without_answer(tmp_path):
  _gqa(tmp_path, drop_answer=True)
  with pytest.raises(formats.FormatError,
                     match=r"testdev_balanced_questions\.json: question 'd2' has no 'answer'"):
    formats.load_vqa(tmp_path, "testdev", SIZE)


# --- commonsense_reasoning: VCR ------------------------------------------------------------------

def _vcr(tmp_path, question_object=2, choices=4):
  item = {
      "question": ["Why", "is", [0], "pointing", "at", [question_object], "?"],
      "answer_choices": [["He", "is", "angry", "at", [2, 3], "."],
                         ["He", "does", "n't", "like", [1], "."],
                         ["Because", [0, 2, 3], "are", "friends", "."],
                         ["No", "reason", "."]][:choices],
      "answer_label": 1, "img_fn": "movie1/img.png", "metadata_fn": "movie1/img.json",
      "movie": "movie1", "annot_id": "val-0"}
  _text(tmp_path / "val.jsonl", [json.dumps(item)])
  _save(tmp_path / "vcr1images" / "movie1" / "img.png", np.full((64, 64, 3), 255, np.uint8))
  _json(tmp_path / "vcr1images" / "movie1" / "img.json", {
      "names": ["person", "car", "person", "dog"], "width": 64, "height": 64,
      "boxes": [[4, 4, 28, 28, 0.9], [40, 40, 60, 60, 0.9], [30, 4, 60, 30, 0.8],
                [4, 40, 20, 60, 0.7]]})


def test_vcr_tokens_become_colour_words_matching_the_drawn_boxes(tmp_path):
  _vcr(tmp_path)
  got = formats.LOADERS["commonsense_reasoning"](root=tmp_path, split="test", size=64)
  assert got.texts[0] == (
      "Why is the person in the red box pointing at the person in the green box?",
      "He is angry at the person in the green box and the dog in the blue box.",
      "He doesn't like the car in the yellow box.",
      "Because the person in the red box, the person in the green box and the dog in the blue "
      "box are friends.",
      "No reason.")
  assert got.targets["answer"].tolist() == [1] and got.scene == ("movie1",)
  image = got.images[0].astype(int)
  assert tuple(image[4, 16]) == vcr.BOX_COLOURS[0][1]          # person 0's outline, red.
  tint = vcr.BOX_FILL_ALPHA / 255
  expected = 255 * (1 - tint) + np.array(vcr.BOX_COLOURS[0][1]) * tint
  np.testing.assert_allclose(image[16, 16], expected, atol=1.5)  # inside: white tinted red.
  assert tuple(image[62, 32]) == (255, 255, 255)                 # no box there.


def test_vcr_names_follow_zellers(tmp_path):
  _vcr(tmp_path)
  got = formats.load_commonsense_reasoning(tmp_path, "val", SIZE, refer_by="name")
  assert got.texts[0][:3] == ("Why is Person 1 pointing at Person 2?",
                              "He is angry at Person 2 and the dog.",
                              "He doesn't like the car.")


def test_vcr_refuses_an_object_index_beyond_the_metadata(tmp_path):
  _vcr(tmp_path, question_object=9)
  with pytest.raises(formats.FormatError, match=r"val\.jsonl: line 1: object indices .* beyond "
                     r"the 4 objects"):
    formats.load_commonsense_reasoning(tmp_path, "val", SIZE)
  _vcr(tmp_path, choices=3)
  with pytest.raises(formats.FormatError,
                     match=r"val\.jsonl: line 1\['answer_choices'\] has 3 entries, expected 4"):
    formats.load_commonsense_reasoning(tmp_path, "val", SIZE)


# --- abstract_reasoning: Bongard-HOI -------------------------------------------------------------

def _bongard(tmp_path, positives=7):
  def side(tag, n):
    entries = []
    for i in range(n):
      path = f"hake/{tag}{i}.jpg"
      _solid(tmp_path / "images" / path, (20 * i, 0, 0) if tag == "pos" else (0, 20 * i, 0))
      entries.append({"im_path": path, "crop_bbox": [0, 0, 20, 12]})
    return entries
  problem = [side("pos", positives), side("neg", 7), "ride bicycle"]
  _json(tmp_path / "bongard_hoi_test_seen_obj_seen_act.json", [problem])


def test_bongard_problem_becomes_two_queries_after_twelve_shots(tmp_path):
  _bongard(tmp_path)
  got = formats.LOADERS["abstract_reasoning"](root=tmp_path, split="test", size=SIZE,
                                              tasks=("seen_obj_seen_act",))
  assert got.images.shape == (2, 13, SIZE, SIZE, 3)
  assert got.targets["label"].tolist() == [1, 0]
  red, green = got.images[..., 4, 4, 0].astype(int), got.images[..., 4, 4, 1].astype(int)
  for example in range(2):
    assert np.abs(red[example, :6] - 20 * np.arange(6)).max() <= 2      # positives 0..5.
    assert np.abs(green[example, 6:12] - 20 * np.arange(6)).max() <= 2  # negatives 0..5.
  assert abs(red[0, 12] - 120) <= 2 and abs(green[1, 12] - 120) <= 2     # the two queries.
  assert got.scene[0] == got.scene[1]


def test_bongard_refuses_a_side_without_seven_images(tmp_path):
  _bongard(tmp_path, positives=6)
  with pytest.raises(formats.FormatError, match=r"bongard_hoi_test_seen_obj_seen_act\.json: "
                     r"\[0\]\[0\] has 6 entries, expected 7"):
    formats.load_abstract_reasoning(tmp_path, "test", SIZE, tasks=("seen_obj_seen_act",))


# --- what every loader shares --------------------------------------------------------------------

def test_missing_files_and_bad_requests_are_user_errors(tmp_path):
  with pytest.raises(formats.MissingFile, match=r"dataset_flickr30k\.json: Flickr30k captions"):
    formats.load_image_text_retrieval(tmp_path, "test", SIZE)
  with pytest.raises(UserError, match="unknown split 'dev'"):
    formats.load_vqa(tmp_path, "dev", SIZE)
  with pytest.raises(UserError, match="limit must be None or a positive int"):
    formats.load_semantic_segmentation(tmp_path, "val", SIZE, limit=0)
  _karpathy(tmp_path)
  (tmp_path / "flickr30k-images" / "300.jpg").unlink()
  with pytest.raises(formats.MissingFile, match=r"images\[2\] names image .*300\.jpg"):
    formats.load_image_text_retrieval(tmp_path, "test", SIZE)
