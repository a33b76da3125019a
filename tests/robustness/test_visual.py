"""vcbench.robustness.visual against the reference corruptions (imagecorruptions 1.1.2 and
RobustNav's skimage lighting), on 32 crops of real photographs at RobustNav's 224x224, plus
the functional contract (keys, jit, vmap, errors, scale) and the registry.

Deterministic corruptions must match the reference's uint8 output to a mean absolute
difference of at most 2 levels per severity; random ones must match the per-channel mean and
std of (corrupted - clean) to 5% (relative; means near 0 use an absolute floor of 0.5 level).
Every jitted function is compiled once per severity and fed the whole batch through vmap.
"""
import functools

import numpy as np
import pytest
from PIL import Image

import vcbench  # noqa: F401  # XLA defaults before JAX starts.
import jax
import jax.numpy as jnp
from skimage import data

from launch.bench import corruptions as bench_corruptions
from vcbench.viz import galleries
from vcbench.viz import gallery
from vcbench.robustness import imageops
from vcbench.robustness import visual

SEVERITIES = (1, 2, 3, 4, 5)
NUM_IMAGES = 32
MAX_MAD = 2.0            # uint8 levels.
STAT_RTOL = 0.05
MEAN_FLOOR = 0.5         # uint8 levels: the absolute tolerance for means near 0.
# Draws per image and severity for the random corruptions' statistics. Over 32 images the
# std of spatter's difference varies by 3.4% between draws at severity 1 (a few droplets per
# image) and 2.3% at 2 (under 1% from 3 on, and for speckle): enough draws that the 5%
# tolerance is 3 standard deviations of the difference of two independent estimates.
DRAWS = {"speckle_noise": (1, 1, 1, 1, 1), "spatter": (8, 4, 1, 1, 1)}
NAMES = {"defocus_blur", "motion_blur", "speckle_noise", "spatter", "low_lighting",
         "lower_fov", "camera_crack"}


@pytest.fixture(scope="module")
def reference():
  """imagecorruptions.corruptions; it imports setuptools' pkg_resources (for its frost images,
  unused here), which the helper stands in for when it is missing."""
  return bench_corruptions.import_imagecorruptions()


def _tinted(gray: np.ndarray, dark, light) -> np.ndarray:
  """A grey photograph coloured between two RGB colours, like vcbench-nav's photo textures."""
  t = gray[..., None].astype(np.float64) / 255.0
  return ((1 - t) * np.asarray(dark) + t * np.asarray(light)).astype(np.uint8)


def _photos() -> list[np.ndarray]:
  """Colour photographs and the greyscale ones vcbench-nav's textures are made from."""
  return [data.astronaut(), data.coffee(), data.chelsea(), data.rocket(),
          data.immunohistochemistry(),
          _tinted(data.brick(), (70, 36, 28), (214, 150, 120)),
          _tinted(data.gravel(), (60, 56, 50), (210, 200, 184)),
          _tinted(data.grass(), (14, 40, 12), (120, 190, 80))]


@pytest.fixture(scope="module")
def images() -> np.ndarray:
  return bench_corruptions.photo_batch(NUM_IMAGES, 224, seed=20251202, photos=_photos())


def _ours(name, images, severity, seed=0):
  return np.asarray(visual.apply(name, jax.random.key(seed), jnp.asarray(images), severity))


def _mad(a, b) -> float:
  return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean())


# ---------------------------------------------------------------------------------------------
# Parity with the reference.

def _assert_close_per_severity(mads: dict[int, float], name: str):
  report = (f"{name}: mean absolute difference to the reference per severity (uint8 levels) "
            f"{ {s: round(m, 4) for s, m in mads.items()} }, allowed {MAX_MAD}")
  print(report)  # Shown with `pytest -s`: the measured parity.
  assert all(m <= MAX_MAD for m in mads.values()), report


def test_defocus_blur_matches_imagecorruptions(images, reference):
  mads = {}
  for s in SEVERITIES:
    ref = np.stack([np.uint8(reference.defocus_blur(Image.fromarray(x), s)) for x in images])
    mads[s] = _mad(_ours("defocus_blur", images, s), ref)
  _assert_close_per_severity(mads, "defocus_blur")


def test_motion_blur_at_angle_matches_imagecorruptions(images, reference):
  angles = np.random.default_rng(1).uniform(-45, 45, len(images)).astype(np.float32)
  mads = {}
  for s in SEVERITIES:
    radius, sigma = [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)][s - 1]
    ref = np.stack([np.uint8(np.clip(reference._motion_blur(x, radius, sigma, float(a)), 0, 255))
                    for x, a in zip(images, angles)])
    ours = jax.jit(jax.vmap(functools.partial(visual.motion_blur_at_angle, severity=s)))(
        jnp.asarray(images), angle=jnp.asarray(angles))
    mads[s] = _mad(np.asarray(ours), ref)
  _assert_close_per_severity(mads, "motion_blur")


def test_low_lighting_matches_robustnav(images):
  lighting = bench_corruptions.robustnav_lighting
  mads = {s: _mad(_ours("low_lighting", images, s), np.stack([lighting(x, s) for x in images]))
          for s in SEVERITIES}
  _assert_close_per_severity(mads, "low_lighting")


def _diff_stats(corrupted: np.ndarray, clean: np.ndarray) -> np.ndarray:
  """Per-channel [mean, std] of (corrupted - clean) on the uint8 scale, [2, 3]."""
  d = corrupted.astype(np.float64) - clean.astype(np.float64)
  return np.stack([d.mean(axis=(0, 1, 2)), d.std(axis=(0, 1, 2))])


@pytest.mark.parametrize("name", ["speckle_noise", "spatter"])
def test_random_corruption_statistics_match_imagecorruptions(name, images, reference):
  report, worst = [], 0.0
  for s in SEVERITIES:
    batch = np.tile(images, (DRAWS[name][s - 1], 1, 1, 1))
    np.random.seed(s)
    ref = np.stack([np.uint8(getattr(reference, name)(Image.fromarray(x), s)) for x in batch])
    want, got = _diff_stats(ref, batch), _diff_stats(_ours(name, batch, s, seed=s), batch)
    tol = np.stack([np.maximum(STAT_RTOL * np.abs(want[0]), MEAN_FLOOR), STAT_RTOL * want[1]])
    worst = max(worst, float((np.abs(got - want) / np.abs(want)).max()))
    report.append(f"severity {s} ({len(batch)} draws): mean ref {np.round(want[0], 2)} ours "
                  f"{np.round(got[0], 2)}, std ref {np.round(want[1], 2)} ours "
                  f"{np.round(got[1], 2)}")
    assert np.all(np.abs(got - want) <= tol), f"{name}:\n" + "\n".join(report)
  print(f"{name}: largest relative deviation of mean/std {worst:.3f}\n" + "\n".join(report))


# ---------------------------------------------------------------------------------------------
# The contract, at 32x32 (the navigation agents' input), one compile per corruption.

@pytest.fixture(scope="module")
def small(images) -> np.ndarray:
  return np.stack([np.asarray(Image.fromarray(x).resize((32, 32), Image.BILINEAR))
                   for x in images[:4]])


def test_registry_lists_every_corruption():
  assert set(visual.CORRUPTIONS) == NAMES
  for name, c in visual.CORRUPTIONS.items():
    assert c.name == name and c.severities == SEVERITIES and c.description
    assert visual.get(name) is c
  assert {n for n, c in visual.CORRUPTIONS.items() if c.deterministic} == {
      "defocus_blur", "low_lighting", "lower_fov"}
  with pytest.raises(ValueError, match="unknown visual corruption 'fog'.*Known: .*camera_crack"):
    visual.get("fog")
  assert [n for n, c in visual.CORRUPTIONS.items() if c.per_scene] == ["camera_crack"]


def test_a_corruption_made_outside_the_module_is_checked_like_the_others():
  c = visual.corruption("negative", lambda key, image, severity, *, scale: 255 - image,
                        deterministic=True, description="test")
  img = np.zeros((8, 8, 3), np.uint8)
  np.testing.assert_array_equal(c.fn(None, img, 3), 255 - img)
  with pytest.raises(ValueError, match="negative: severity must be"):
    c.fn(None, img, 6)
  with visual.CORRUPTIONS.temporarily("negative", c):
    assert visual.get("negative") is c
  assert "negative" not in visual.CORRUPTIONS


@pytest.mark.parametrize("name", sorted(NAMES))
def test_keys_jit_vmap_and_scale(name, small):
  """Same key, same images; another key, other images (random ones only); vmap agrees with
  the unbatched call; severity 5 changes a 32x32 image but leaves it recognisable."""
  c = visual.get(name)
  a = _ours(name, small, 5, seed=0)
  assert a.dtype == np.uint8 and a.shape == small.shape
  np.testing.assert_array_equal(a, _ours(name, small, 5, seed=0))
  b = _ours(name, small, 5, seed=1)
  assert np.array_equal(a, b) == c.deterministic
  key = jax.random.split(jax.random.key(0), len(small))[2]
  one = jax.jit(functools.partial(c.fn, severity=5))(key, jnp.asarray(small[2]))
  np.testing.assert_array_equal(np.asarray(one), a[2])
  assert _mad(a, small) > 1.0, f"{name} at severity 5 leaves a 32x32 image unchanged"
  if name != "lower_fov":  # A zoom is not expected to correlate pixel by pixel.
    corr = np.corrcoef(a.astype(np.float64).ravel(), small.astype(np.float64).ravel())[0, 1]
    assert corr > 0.5, f"{name} at severity 5 destroys a 32x32 image (correlation {corr:.2f})"


def test_defocus_severities_are_ordered_at_32(small):
  """At 32x32 the 224-pixel disk is integrated over coarse pixels: severity 1 fits inside one
  pixel (the identity), and blur grows with severity."""
  mads = [_mad(_ours("defocus_blur", small, s), small) for s in SEVERITIES]
  assert mads[0] == 0.0 and all(a < b for a, b in zip(mads, mads[1:])), mads


def test_scale_defaults_to_min_side_over_224(images):
  x = jnp.asarray(images[0, :, :200])
  fn = visual.get("defocus_blur").fn
  np.testing.assert_array_equal(fn(None, x, 2), fn(None, x, 2, scale=200 / 224))
  assert not np.array_equal(fn(None, x, 2), fn(None, x, 2, scale=1.0))


def test_bad_arguments_raise_value_error(small):
  key, x = jax.random.key(0), jnp.asarray(small[0])
  for severity in (0, 6, 2.0, True):
    with pytest.raises(ValueError, match=r"spatter.*1\.\.5.*got"):
      visual.spatter(key, x, severity)
  with pytest.raises(ValueError, match="uint8 image.*float32"):
    visual.speckle_noise(key, x.astype(jnp.float32), 1)
  with pytest.raises(ValueError, match=r"\[H, W, 3\].*\(32, 32\)"):
    visual.defocus_blur(key, x[..., 0], 1)
  with pytest.raises(ValueError, match="motion_blur_at_angle.*severity"):
    visual.motion_blur_at_angle(x, 9, 10.0)
  with pytest.raises(ValueError, match="target_hfov"):
    visual.lower_fov(key, x, 1, target_hfov=90.0)
  with pytest.raises(ValueError, match=r"\[B, H, W, 3\]"):
    visual.apply("spatter", key, x, 1)


# ---------------------------------------------------------------------------------------------
# Primitives the parity rests on, against OpenCV directly.

def test_canny_and_equalize_hist_match_opencv():
  import cv2  # pylint: disable=g-import-not-at-top - imagecorruptions' dependency.
  rng = np.random.default_rng(3)
  liquid = cv2.GaussianBlur(rng.normal(0.65, 0.3, (96, 96)), (0, 0), 2.0)
  liquid = np.uint8(np.where(liquid < 0.68, 0, liquid) * 255)
  ours = jax.jit(lambda z: imageops.canny(z, 50, 150))(jnp.asarray(liquid))
  np.testing.assert_array_equal(np.asarray(ours), cv2.Canny(liquid, 50, 150) > 0)
  levels = np.uint8(rng.integers(0, 21, (96, 96)) * (rng.random((96, 96)) < 0.7))
  np.testing.assert_array_equal(np.asarray(imageops.equalize_hist(jnp.asarray(levels))),
                                cv2.equalizeHist(levels))


def test_gallery_sheet_layout():
  clean = np.zeros((32, 32, 3), np.uint8)
  grid = {"a": [clean] * 5, "b": [clean] * 5}
  sheet = galleries.corruption_sheet(clean, grid)
  panel, gap, header = 96, gallery._GAP, gallery._HEADER_H  # 32² frames enlarged to 96².
  assert sheet.size == (110 + 6 * (panel + gap), header + 2 * (panel + gap))
  tiles = gallery.labelled_grid({"a": [clean, None]}, ["x", "y"], label_width=10)
  assert np.asarray(tiles)[header + 5, 10 + panel + gap + 5].tolist() == [200, 200, 200]
