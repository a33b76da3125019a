"""open_clip visual towers (OpenAI layout) -> vcbench ViT / ResNet(stem='clip'): parity."""
import pytest

torch = pytest.importorskip("torch")
open_clip = pytest.importorskip("open_clip")

from open_clip.modified_resnet import ModifiedResNet  # pylint: disable=g-import-not-at-top
from open_clip.transformer import QuickGELU, VisionTransformer

from vcbench.models import convert  # pylint: disable=g-import-not-at-top
from vcbench.models import layouts
from vcbench.models import zoo
from vcbench.models.resnet import ResNet
from vcbench.models.vit import ViT

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

TEXT_KEYS = ("transformer.resblocks.0.ln_1.weight", "transformer.resblocks.0.attn.in_proj_weight",
             "token_embedding.weight", "positional_embedding", "ln_final.weight",
             "text_projection", "logit_scale")


def clip_file(visual, path):
  """A full CLIP state dict: 'visual.*' plus a (fake) text tower and logit scale."""
  state = {f"visual.{k}": v for k, v in visual.state_dict().items()}
  for k in TEXT_KEYS:
    state[k] = torch.randn(8, 8) if k != "logit_scale" else torch.tensor(4.6052)
  return lib.save_state(state, path)


def assert_text_dropped(dropped):
  for k in TEXT_KEYS:
    assert k in dropped and "text" in dropped[k], k
  # Of the visual tower only BatchNorm step counters may be dropped.
  assert not [k for k in dropped
              if k.startswith("visual.") and not k.endswith("num_batches_tracked")]


def clip_vit(image_size=64, patch=16, width=64, layers=2, heads=2, output_dim=32, seed=0):
  torch.manual_seed(seed)
  model = VisionTransformer(image_size=image_size, patch_size=patch, width=width, layers=layers,
                            heads=heads, mlp_ratio=4.0, output_dim=output_dim,
                            act_layer=QuickGELU, output_tokens=True)
  return lib.randomize_(model, seed)


def vit_reference(model, x):
  with torch.no_grad():
    pooled, tokens = model(lib.nchw(x))
  return pooled.numpy(), tokens.numpy()


@pytest.mark.parametrize("patch, image_size, layers, heads", [(16, 64, 2, 2), (32, 64, 4, 4)])
def test_clip_vit_parity(tmp_path, patch, image_size, layers, heads):
  model = clip_vit(image_size, patch, 64, layers, heads, 32)
  path = clip_file(model, tmp_path / "open_clip_pytorch_model.bin")
  module = ViT(64, layers, heads, patch=patch, img_size=image_size, act="quick_gelu",
               ln_eps=1e-5, patch_bias=False, pre_norm=True, proj_dim=32,
               pyramid_layers=tuple(range(layers)) * (4 // layers))
  variables, dropped = lib.convert_file(path, layouts.CLIP_VIT, module, image_size)
  assert_text_dropped(dropped)
  x = lib.images(2, image_size, seed=20)
  out, _ = lib.run(module, variables, x)
  pooled, tokens = vit_reference(model, x)
  assert out["cls"].shape == (2, 32)
  lib.assert_close(out["cls"], pooled, "cls vs pooled @ proj")
  lib.assert_close(out["tokens"], tokens, "tokens vs ln_post tokens")


def test_clip_vit_safetensors(tmp_path):
  """open_clip also ships .safetensors: same tensors, same result."""
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top
  model = clip_vit(seed=1)
  state = {f"visual.{k}": v.contiguous() for k, v in model.state_dict().items()}
  state["logit_scale"] = torch.tensor([4.6])
  path = str(tmp_path / "open_clip_model.safetensors")
  save_file(state, path)
  module = ViT(64, 2, 2, patch=16, img_size=64, act="quick_gelu", ln_eps=1e-5,
               patch_bias=False, pre_norm=True, proj_dim=32, pyramid_layers=(0, 0, 1, 1))
  variables, _ = lib.convert_file(path, layouts.CLIP_VIT, module, 64)
  x = lib.images(2, 64, seed=21)
  out, _ = lib.run(module, variables, x)
  pooled, tokens = vit_reference(model, x)
  lib.assert_close(out["cls"], pooled, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")


def clip_resnet(layers, output_dim, heads, image_size, width, seed=0):
  torch.manual_seed(seed)
  return lib.randomize_(ModifiedResNet(layers=list(layers), output_dim=output_dim, heads=heads,
                                       image_size=image_size, width=width), seed)


def resnet_reference(model, x):
  with torch.no_grad():
    t = lib.nchw(x)
    h = model.stem(t)
    stages = []
    for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
      h = layer(h)
      stages.append(lib.to_nhwc(h))
    return model(t).numpy(), stages


@pytest.mark.parametrize("layers, width, heads, image_size", [
    ((1, 1, 1, 1), 16, 8, 64),
    ((2, 1, 2, 1), 16, 4, 96),    # 3x3 final grid, two-block stages.
])
def test_clip_modified_resnet_parity(tmp_path, layers, width, heads, image_size):
  model = clip_resnet(layers, 48, heads, image_size, width)
  path = clip_file(model, tmp_path / "clip_rn.pt")
  module = ResNet(stage_sizes=layers, width=width, stem="clip", attn_heads=heads, output_dim=48,
                  img_size=image_size)
  variables, dropped = lib.convert_file(path, layouts.CLIP_RESNET, module, image_size)
  assert_text_dropped(dropped)
  x = lib.images(2, image_size, seed=22)
  out, _ = lib.run(module, variables, x)
  pooled, stages = resnet_reference(model, x)
  assert out["cls"].shape == (2, 48)
  lib.assert_close(out["cls"], pooled, "cls vs attnpool output")
  lib.assert_close(out["tokens"], stages[-1].reshape(2, -1, width * 32), "tokens")
  for i, (ours, theirs) in enumerate(zip(out["pyramid"], stages)):
    lib.assert_close(ours, theirs, f"pyramid[{i}]")


def test_clip_checkpoint_without_visual_prefix_fails_loudly(tmp_path):
  model = clip_vit(seed=2)
  path = lib.save_state(model.state_dict(), tmp_path / "bare.pth")   # No 'visual.' prefix.
  module = ViT(64, 2, 2, patch=16, img_size=64, act="quick_gelu", ln_eps=1e-5,
               patch_bias=False, pre_norm=True, proj_dim=32, pyramid_layers=(0, 0, 1, 1))
  with pytest.raises(convert.ConversionError, match="missing"):
    lib.convert_file(path, layouts.CLIP_VIT, module, 64)


def test_zoo_clip_vitb16(tmp_path):
  model = clip_vit(224, 16, 768, 12, 12, 512, seed=3)
  path = clip_file(model, tmp_path / "vitb16.bin")
  enc = zoo.load("clip_vitb16", checkpoint=path, cache=False)
  x = lib.images(1, 224, seed=23)
  out, _ = lib.run(enc.module, enc.params, x)
  pooled, tokens = vit_reference(model, x)
  assert out["cls"].shape == (1, 512)
  lib.assert_close(out["cls"], pooled, "cls")
  lib.assert_close(out["tokens"], tokens, "tokens")


def test_zoo_clip_rn50(tmp_path):
  model = clip_resnet((3, 4, 6, 3), 1024, 32, 224, 64, seed=4)
  path = clip_file(model, tmp_path / "rn50.bin")
  enc = zoo.load("clip_rn50", checkpoint=path, cache=False)
  x = lib.images(1, 224, seed=24)
  out, _ = lib.run(enc.module, enc.params, x)
  pooled, stages = resnet_reference(model, x)
  assert out["cls"].shape == (1, 1024)
  lib.assert_close(out["cls"], pooled, "cls")
  lib.assert_close(out["tokens"], stages[-1].reshape(1, -1, 2048), "tokens")
  for i, (ours, theirs) in enumerate(zip(out["pyramid"], stages)):
    lib.assert_close(ours, theirs, f"pyramid[{i}]")


def test_transposed_projection_is_a_shape_mismatch(tmp_path):
  model = clip_vit(seed=5)
  state = {f"visual.{k}": v for k, v in model.state_dict().items()}
  state["visual.proj"] = state["visual.proj"].t().contiguous()   # [32, 64], not [64, 32].
  path = lib.save_state(state, tmp_path / "transposed.pth")
  module = ViT(64, 2, 2, patch=16, img_size=64, act="quick_gelu", ln_eps=1e-5,
               patch_bias=False, pre_norm=True, proj_dim=32, pyramid_layers=(0, 0, 1, 1))
  try:
    lib.convert_file(path, layouts.CLIP_VIT, module, 64)
  except convert.ConversionError as e:
    assert "mismatched" in str(e) and "visual.proj" in str(e)
  else:
    raise AssertionError("a transposed projection was accepted")
