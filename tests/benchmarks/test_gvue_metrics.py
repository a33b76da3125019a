"""G-VUE's losses and metrics against independent references (torchvision's box ops, torch's
losses, scipy's rotations, the ADE20K toolkit's intersection-and-union, per-image NumPy loops)
and on data built so that a wrong mask, ignore rule, threshold or average would show."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.benchmarks import gvue_losses as L
from vcbench.benchmarks import gvue_metrics as M


def rng(seed=0):
  return np.random.default_rng(seed)


def torch_or_skip():
  return pytest.importorskip("torch")


# --- boxes -------------------------------------------------------------------------------------

def random_boxes(r, n):
  corner = r.uniform(0, 0.7, (n, 2))
  return np.concatenate([corner, corner + r.uniform(0.01, 0.5, (n, 2))], axis=1)


def test_box_iou_and_generalized_iou_match_torchvision():
  torch = torch_or_skip()
  ops = pytest.importorskip("torchvision.ops")
  r = rng(1)
  a, b = random_boxes(r, 9), random_boxes(r, 6)
  b[0] = a[0]                                   # identical: IoU 1
  b[1] = [0.9, 0.9, 0.95, 0.99]                 # disjoint from most: GIoU < 0
  ta, tb = torch.tensor(a), torch.tensor(b)
  np.testing.assert_allclose(L.box_iou(a, b, xp=np), ops.box_iou(ta, tb).numpy(), atol=1e-12)
  np.testing.assert_allclose(L.generalized_box_iou(a, b, xp=np),
                             ops.generalized_box_iou(ta, tb).numpy(), atol=1e-12)
  np.testing.assert_allclose(L.box_iou(jnp.asarray(a), jnp.asarray(b)),
                             ops.box_iou(ta, tb).numpy(), atol=1e-6)
  paired_ref = ops.generalized_box_iou(ta[:6], tb).numpy().diagonal()
  np.testing.assert_allclose(L.paired_generalized_box_iou(a[:6], b), paired_ref, atol=1e-6)
  np.testing.assert_allclose(L.paired_box_iou(a[:6], b, xp=np),
                             ops.box_iou(ta[:6], tb).numpy().diagonal(), atol=1e-12)
  assert (L.generalized_box_iou(a, b, xp=np) < 0).any()


def test_box_loss_is_two_giou_plus_five_smooth_l1_as_torch_computes_them():
  torch = torch_or_skip()
  ops = pytest.importorskip("torchvision.ops")
  r = rng(2)
  pred, target = random_boxes(r, 16), random_boxes(r, 16)
  pred[:3] += 1.5           # Some coordinates more than 1 off: SmoothL1's linear branch.
  tp, tt = torch.tensor(pred), torch.tensor(target)
  expected = (2 * ops.generalized_box_iou_loss(tp, tt, reduction="mean")
              + 5 * torch.nn.functional.smooth_l1_loss(tp, tt, beta=1.0)).item()
  got = jax.jit(L.box_loss)(jnp.asarray(pred, jnp.float32), jnp.asarray(target, jnp.float32))
  assert float(got) == pytest.approx(expected, rel=1e-5)


def test_boxes_from_logits_and_the_box_loss_gradient():
  torch = torch_or_skip()
  ops = pytest.importorskip("torchvision.ops")
  logits = rng(3).normal(size=(8, 4)).astype(np.float32)
  expected = ops.box_convert(torch.sigmoid(torch.tensor(logits)), "cxcywh", "xyxy").numpy()
  np.testing.assert_allclose(L.boxes_from_logits(logits), expected, atol=1e-6)
  target = jnp.asarray(random_boxes(rng(4), 8), jnp.float32)
  grad = jax.jit(jax.grad(lambda x: L.box_loss(L.boxes_from_logits(x), target)))(logits)
  assert np.isfinite(grad).all() and np.abs(grad).sum() > 0


def test_grounding_accuracy_counts_iou_of_exactly_one_half():
  target = np.tile([[0.0, 0.0, 0.5, 1.0]], (4, 1))
  pred = np.array([[0.0, 0.0, 0.25, 1.0],    # IoU exactly 0.5: a hit (G-VUE uses >=)
                   [0.0, 0.0, 0.2, 1.0],     # 0.4
                   [0.0, 0.0, 0.5, 1.0],     # 1
                   [0.6, 0.0, 0.9, 1.0]])    # 0
  assert M.grounding_metrics(pred, target) == {"acc@0.5": 50.0}


# --- camera pose -------------------------------------------------------------------------------

def wxyz(rotation):
  return np.roll(rotation.as_quat(), 1, axis=-1)   # scipy is scalar-last.


def test_orientation_error_matches_scipy_rotations():
  transform = pytest.importorskip("scipy.spatial.transform")
  true = transform.Rotation.random(64, random_state=5)
  pred = true * transform.Rotation.from_rotvec(rng(6).normal(scale=0.6, size=(64, 3)))
  scale = rng(7).uniform(0.3, 3.0, (64, 1)) * rng(8).choice([-1.0, 1.0], (64, 1))
  expected = np.degrees((true.inv() * pred).magnitude())
  np.testing.assert_allclose(M.orientation_error(wxyz(pred) * scale, wxyz(true)), expected,
                             atol=1e-5)
  assert expected.max() > 60    # The range spans large angles, not only small ones.


def test_pose_errors_and_the_mean_over_scenes():
  r = rng(9)
  position, quaternion = r.normal(size=(10, 3)), r.normal(size=(10, 4))
  offset = np.zeros((10, 3))
  offset[:9, 0], offset[9, 0] = 1.0, 11.0
  pred = np.concatenate([position + offset, quaternion * 2], axis=1)
  pos_err, orient_err = M.pose_errors(pred, position, quaternion)
  np.testing.assert_allclose(pos_err, [np.linalg.norm(o) for o in offset])
  np.testing.assert_allclose(orient_err, 0, atol=1e-5)
  assert M.pose_metrics(pred, position, quaternion)["position_error"] == pytest.approx(2.0)
  scenes = ["chess"] * 9 + ["fire"]
  assert M.pose_metrics(pred, position, quaternion, scenes)["position_error"] == pytest.approx(6.0)


def test_pose_loss_matches_torch():
  torch = torch_or_skip()
  F = torch.nn.functional
  r = rng(10)
  pred, position, quaternion = r.normal(size=(6, 7)), r.normal(size=(6, 3)), r.normal(size=(6, 4))
  tp, tq = torch.tensor(pred), torch.tensor(quaternion)
  expected = (F.mse_loss(tp[:, :3], torch.tensor(position))
              + 150 * F.mse_loss(F.normalize(tp[:, 3:]), F.normalize(tq))).item()
  got = jax.jit(L.pose_loss)(*(jnp.asarray(x, jnp.float32) for x in (pred, position, quaternion)))
  assert float(got) == pytest.approx(expected, rel=1e-5)


# --- depth -------------------------------------------------------------------------------------

def depth_pair(seed, n=5, size=12):
  r = rng(seed)
  target = r.uniform(0.5, 9.0, (n, size, size))
  target[r.random(target.shape) < 0.2] = 0.0      # not measured
  target[r.random(target.shape) < 0.05] = 12.0    # beyond the 10 m range
  pred = target * r.uniform(0.6, 1.5, target.shape) + 0.1
  pred[r.random(pred.shape) < 0.05] = 15.0        # clipped to 10 m
  pred[r.random(pred.shape) < 0.05] = 1e-5        # clipped to 1 mm
  return pred, target


def loop_depth_metrics(pred, target):
  """The metrics written out image by image, pixel lists and all."""
  rows = []
  for p, t in zip(pred, target):
    valid = (t > 1e-3) & (t < 10)
    p, t = np.clip(p[valid], 1e-3, 10), t[valid]
    ratio = np.maximum(p / t, t / p)
    e = np.log(p) - np.log(t)
    rows.append([np.mean(ratio < 1.25), np.mean(ratio < 1.25 ** 2), np.mean(ratio < 1.25 ** 3),
                 np.mean(np.abs(p - t) / t), np.mean((p - t) ** 2 / t),
                 np.sqrt(np.mean((p - t) ** 2)), np.sqrt(np.mean(e ** 2)),
                 np.mean(np.abs(np.log10(p / t))),
                 100 * np.sqrt(np.mean(e ** 2) - np.mean(e) ** 2)])
  return dict(zip(M.DEPTH_KEYS, np.mean(rows, axis=0)))


def test_depth_metrics_match_a_per_image_loop():
  pred, target = depth_pair(11)
  got, expected = M.depth_metrics(pred, target), loop_depth_metrics(pred, target)
  assert list(got) == list(M.DEPTH_KEYS)
  for key in M.DEPTH_KEYS:
    assert got[key] == pytest.approx(expected[key], rel=1e-9), key


def test_depth_metrics_average_images_not_pixels_and_ignore_invalid_pixels():
  target = np.zeros((2, 4, 4))
  target[0, 0, 0] = 1.0          # one valid pixel, predicted 2 m: abs_rel 1
  target[1] = 2.0                # sixteen valid pixels, predicted right: abs_rel 0
  pred = target.copy()
  pred[0] = 2.0
  got = M.depth_metrics(pred, target)
  assert got["abs_rel"] == pytest.approx(0.5)       # pooled over pixels it would be 1/17
  garbage = pred.copy()
  garbage[target == 0] = 7.0
  assert M.depth_metrics(garbage, target) == got
  assert M.depth_metrics(pred + 0.5, target) != got


def test_eigen_crop_and_images_without_valid_pixels():
  crop = M.eigen_crop(480, 640)
  assert crop.sum() == (471 - 45) * (601 - 41)
  assert crop[45, 41] and crop[470, 600] and not crop[44, 41] and not crop[45, 601]
  pred, target = depth_pair(12, n=2, size=32)
  crop = M.eigen_crop(32, 32)
  assert 0 < crop.sum() < crop.size
  outside = pred.copy()
  outside[:, ~crop] = 9.9
  assert M.depth_metrics(outside, target, crop) == M.depth_metrics(pred, target, crop)
  assert M.depth_metrics(outside, target) != M.depth_metrics(pred, target)
  blank = np.concatenate([target, np.zeros_like(target[:1])])
  assert M.depth_metrics(np.concatenate([pred, pred[:1]]), blank) == M.depth_metrics(pred, target)
  with pytest.raises(M.MetricInputError, match="valid pixel"):
    M.depth_metrics(pred, np.zeros_like(target))


def test_silog_loss_pools_the_batch_and_has_finite_gradients():
  pred, target = depth_pair(13, n=3)
  valid = L.depth_valid(target)
  d = np.log(pred[valid] / target[valid])
  expected = 10 * np.sqrt(np.mean(d ** 2) - 0.85 * np.mean(d) ** 2)
  got = jax.jit(L.silog_loss)(jnp.asarray(pred, jnp.float32), jnp.asarray(target, jnp.float32),
                              jnp.asarray(valid))
  assert float(got) == pytest.approx(expected, rel=1e-5)
  grad = jax.grad(L.silog_loss)(jnp.asarray(target + 1.0, jnp.float32),
                                jnp.asarray(target, jnp.float32), jnp.asarray(valid))
  assert np.isfinite(grad).all() and (np.asarray(grad)[~valid] == 0).all()
  exact = jax.grad(L.silog_loss)(jnp.asarray(np.where(valid, target, 1.0), jnp.float32),
                                 jnp.asarray(target, jnp.float32), jnp.asarray(valid))
  assert np.isfinite(exact).all()


# --- segmentation ------------------------------------------------------------------------------

def label_maps(seed, n=4, size=16, num_classes=6):
  r = rng(seed)
  labels = r.integers(0, num_classes + 1, (n, size, size))
  pred = np.where(r.random(labels.shape) < 0.6, labels, r.integers(0, num_classes + 1,
                                                                   labels.shape))
  return pred, labels


def test_intersection_and_union_match_the_ade20k_toolkit():
  semseg = pytest.importorskip("mit_semseg.utils")
  pred, labels = label_maps(14)
  inter, union, _ = M.intersection_and_union(pred, labels, num_classes=6)
  # The toolkit stores classes 0..C-1 with -1 unlabelled; ours are 1..C with 0 ignored.
  ref_inter, ref_union = semseg.intersectionAndUnion(pred - 1, labels - 1, 6)
  np.testing.assert_array_equal(inter, ref_inter)
  np.testing.assert_array_equal(union, ref_union)


def test_segmentation_accumulates_over_the_split_and_ignores_label_zero():
  pred, labels = label_maps(15)
  accumulator = M.SegmentationAccumulator(6)
  for p, lab in zip(pred, labels):
    accumulator.update(p, lab)
  whole = M.segmentation_metrics(pred, labels, 6)
  assert accumulator.result() == whole
  rewritten = np.where(labels == 0, (pred + 3) % 7, pred)
  assert M.segmentation_metrics(rewritten, labels, 6) == whole
  valid = labels != 0
  assert whole["pixel_accuracy"] == pytest.approx(100 * np.mean(pred[valid] == labels[valid]))


def test_miou_sums_over_the_split_and_skips_classes_never_seen():
  # Image 1: class 1 right on 1 pixel. Image 2: class 1 on 99 pixels, predicted 2 on all.
  labels = np.zeros((2, 10, 10), int)
  pred = np.zeros_like(labels)
  labels[0, 0, 0] = pred[0, 0, 0] = 1
  labels[1].flat[:99], pred[1].flat[:99] = 1, 2
  got = M.segmentation_metrics(pred, labels, num_classes=5)
  # Split sums: class 1 IoU 1/100, class 2 IoU 0/99; classes 3..5 have no union: left out.
  assert got["miou"] == pytest.approx(100 * (0.01 + 0.0) / 2)
  per_image = [M.segmentation_metrics(p, lab, 5)["miou"] for p, lab in zip(pred, labels)]
  assert np.mean(per_image) != pytest.approx(got["miou"])
  with pytest.raises(M.MetricInputError, match="0..5"):
    M.segmentation_metrics(pred, labels + 5, num_classes=5)


def test_segmentation_loss_matches_torch_cross_entropy_with_ignore():
  torch = torch_or_skip()
  r = rng(16)
  logits = r.normal(size=(2, 5, 6, 7)).astype(np.float32)
  labels = r.integers(0, 7, (2, 5, 6))
  expected = torch.nn.functional.cross_entropy(
      torch.tensor(logits).permute(0, 3, 1, 2), torch.tensor(labels), ignore_index=0).item()
  got = jax.jit(L.segmentation_loss)(logits, labels)
  assert float(got) == pytest.approx(expected, rel=1e-5)
  changed = logits.copy()
  changed[labels == 0] += r.normal(size=(int((labels == 0).sum()), 7)).astype(np.float32) * 5
  assert float(L.segmentation_loss(changed, labels)) == pytest.approx(float(got), rel=1e-6)


# --- retrieval ---------------------------------------------------------------------------------

SIMILARITY = np.array([[0.9, 0.1, 0.8, 0.2],
                       [0.5, 0.8, 0.7, 0.3],
                       [0.4, 0.0, 0.1, 0.9]])
CAPTION_IMAGE = np.array([0, 0, 1, 2])


def test_recall_on_a_matrix_whose_ranks_are_known():
  np.testing.assert_array_equal(M.image_to_text_ranks(SIMILARITY, CAPTION_IMAGE), [0, 1, 0])
  np.testing.assert_array_equal(M.text_to_image_ranks(SIMILARITY, CAPTION_IMAGE), [0, 1, 1, 0])
  got = M.recall_at_k(SIMILARITY, CAPTION_IMAGE, ks=(1, 2))
  assert got == pytest.approx({"r@1": 200 / 3, "r@2": 100.0, "t2i_r@1": 50.0, "t2i_r@2": 100.0})


def test_an_image_is_hit_when_any_of_its_captions_ranks_in_the_top_k():
  r = rng(17)
  num_images, per_image = 30, 3
  caption_image = np.repeat(np.arange(num_images), per_image)
  want = r.integers(0, 25, num_images)
  similarity = r.uniform(0, 1, (num_images, num_images * per_image))
  for i, rank in enumerate(want):
    others = np.sort(similarity[i, caption_image != i])[::-1]
    mine = np.flatnonzero(caption_image == i)
    similarity[i, mine] = -1.0                                     # two captions far behind
    similarity[i, mine[r.integers(per_image)]] = (others[rank - 1] + others[rank]) / 2 \
        if rank else others[0] + 0.1
  np.testing.assert_array_equal(M.image_to_text_ranks(similarity, caption_image), want)
  got = M.recall_at_k(similarity, caption_image)
  for k in (1, 5, 10):
    assert got[f"r@{k}"] == pytest.approx(100 * np.mean(want < k))


def test_ties_count_against_the_model_and_bad_captions_are_refused():
  flat = np.ones((3, 4))
  got = M.recall_at_k(flat, CAPTION_IMAGE, ks=(1, 3, 4))
  assert got["r@1"] == 0 and got["t2i_r@1"] == 0 and got["r@4"] == 100 and got["t2i_r@3"] == 100
  with pytest.raises(M.MetricInputError, match="no caption"):
    M.recall_at_k(SIMILARITY, np.array([0, 0, 1, 1]))
  with pytest.raises(M.MetricInputError, match="index the 3 images"):
    M.recall_at_k(SIMILARITY, np.array([0, 1, 2, 3]))


def test_retrieval_loss_matches_a_torch_contrastive_loss():
  torch = torch_or_skip()
  F = torch.nn.functional
  r = rng(18)
  image, text = r.normal(size=(8, 16)).astype(np.float32), r.normal(size=(8, 16)).astype(np.float32)
  logits = F.normalize(torch.tensor(image)) @ F.normalize(torch.tensor(text)).T / 0.07
  match = torch.arange(8)
  expected = ((F.cross_entropy(logits, match) + F.cross_entropy(logits.T, match)) / 2).item()
  assert float(jax.jit(L.retrieval_loss)(image, text)) == pytest.approx(expected, rel=1e-5)
  assert float(L.retrieval_loss(image, image)) < float(L.retrieval_loss(image, text))


# --- 3-D reconstruction, labels ----------------------------------------------------------------

def test_reconstruction_miou_is_per_shape_then_mean():
  target = np.zeros((2, 4, 4, 4), bool)
  target[0, 0, 0, 0] = True               # predicted right: IoU 1
  target[1, :2] = True                    # 32 voxels, 16 predicted: IoU 0.5
  logits = np.where(target, 3.0, -3.0)
  logits[1, 1] = -3.0
  assert M.reconstruction_metrics(logits, target) == {"miou": pytest.approx(75.0)}
  assert M.reconstruction_metrics(logits, target, threshold=5.0) == {"miou": 0.0}
  np.testing.assert_array_equal(M.voxel_iou(np.zeros((1, 2, 2, 2)), np.zeros((1, 2, 2, 2))), [1.0])


def test_label_losses_and_accuracy_match_torch():
  torch = torch_or_skip()
  F = torch.nn.functional
  r = rng(19)
  logits, labels = r.normal(size=(10, 4)).astype(np.float32), r.integers(0, 4, 10)
  expected = F.cross_entropy(torch.tensor(logits), torch.tensor(labels)).item()
  assert float(jax.jit(L.classification_loss)(logits, labels)) == pytest.approx(expected, rel=1e-5)
  voxels = r.normal(size=(2, 3, 3, 3)).astype(np.float32)
  occupied = r.random((2, 3, 3, 3)) < 0.4
  expected = F.binary_cross_entropy_with_logits(torch.tensor(voxels),
                                                torch.tensor(occupied, dtype=torch.float32))
  assert float(L.occupancy_loss(voxels, occupied)) == pytest.approx(expected.item(), rel=1e-5)
  hits = np.mean(logits.argmax(-1) == labels)
  assert M.accuracy(logits, labels) == M.accuracy(logits.argmax(-1), labels) == {
      "accuracy": pytest.approx(100 * hits)}


def test_wrong_shapes_are_named():
  with pytest.raises(M.MetricInputError, match=r"pose_loss: quaternion must have shape \[2, 4\]"):
    L.pose_loss(jnp.zeros((2, 7)), jnp.zeros((2, 3)), jnp.zeros((2, 3)))
  with pytest.raises(M.MetricInputError, match="pred, target must have the same shape"):
    M.depth_metrics(np.ones((1, 4, 4)), np.ones((1, 4, 5)))
  with pytest.raises(M.MetricInputError, match=r"box_loss: boxes2 must have shape \[3, 4\]"):
    L.box_loss(jnp.zeros((3, 4)), jnp.zeros((2, 4)))
