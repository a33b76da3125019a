"""torchvision ResNet-50 checkpoints (ImageNet, R3M, MoCo, VIP) -> vcbench ResNet: parity."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from vcbench.models import convert  # pylint: disable=g-import-not-at-top
from vcbench.models import zoo

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

SIZE = 64  # Real architecture; 64 px gives layer4 a 2x2 grid.


def resnet50(head: int = 0, seed: int = 0):
  torch.manual_seed(seed)
  model = torchvision.models.resnet50()
  if head:
    model.fc = torch.nn.Linear(2048, head)    # VIP's embedding head.
  else:
    model.fc = torch.nn.Identity()
  return lib.randomize_(model, seed)


def reference(model, x):
  """Stage outputs (NHWC), the pooled feature and the full forward."""
  with torch.no_grad():
    t = lib.nchw(x)
    h = model.maxpool(model.relu(model.bn1(model.conv1(t))))
    stages = []
    for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
      h = layer(h)
      stages.append(lib.to_nhwc(h))
    pooled = model.avgpool(h).flatten(1).numpy()
    full = model(t).numpy()
  return stages, pooled, full


@pytest.fixture(scope="module")
def tv_model():
  model = resnet50()
  return model, reference(model, lib.images(2, SIZE, seed=10))


def check_encoder(enc, stages, pooled):
  out, inter = lib.run(enc.module, enc.params, lib.images(2, SIZE, seed=10))
  assert out["cls"].shape == (2, 2048)
  lib.assert_close(out["cls"], pooled, "cls vs avg-pooled layer4")
  lib.assert_close(out["tokens"], stages[-1].reshape(2, -1, 2048), "tokens vs flat layer4")
  assert len(out["pyramid"]) == 4
  for i, (ours, theirs) in enumerate(zip(out["pyramid"], stages)):
    assert ours.shape == (2, SIZE // 4 // 2 ** i, SIZE // 4 // 2 ** i, 256 * 2 ** i)
    lib.assert_close(ours, theirs, f"pyramid[{i}] vs layer{i + 1}")
  assert {"stem", "layer1", "layer2", "layer3", "layer4"} <= set(inter)
  return out


def test_in1k_rn50(tmp_path, tv_model):
  model, (stages, pooled, _) = tv_model
  state = dict(model.state_dict())
  # torchvision's file carries the ImageNet classifier; it is dropped.
  state["fc.weight"], state["fc.bias"] = torch.randn(1000, 2048), torch.randn(1000)
  path = lib.save_state(state, tmp_path / "resnet50.pth")
  check_encoder(zoo.load("in1k_rn50", checkpoint=path, cache=False), stages, pooled)


def test_r3m_rn50(tmp_path, tv_model):
  model, (stages, pooled, _) = tv_model
  ckpt = {"r3m": {**{f"module.convnet.{k}": v for k, v in model.state_dict().items()},
                  "module.lang_enc.proj.weight": torch.randn(8, 8),
                  "module.lang_rew.0.weight": torch.randn(4, 8)}}
  path = lib.save_state(ckpt, tmp_path / "model.pt")
  check_encoder(zoo.load("r3m_rn50", checkpoint=path, cache=False), stages, pooled)
  # The audit: everything outside the convnet is dropped with R3M's reason.
  flat = convert.read_checkpoint(path)
  _, dropped = convert.convert_state(flat, zoo.entry("r3m_rn50").layout,
                                     lib.expected_tree(zoo.entry("r3m_rn50").build(224, np.float32), 64))
  assert "r3m.module.lang_enc.proj.weight" in dropped
  assert "language" in dropped["r3m.module.lang_enc.proj.weight"]


def test_moco_rn50(tmp_path, tv_model):
  model, (stages, pooled, _) = tv_model
  q = model.state_dict()
  other = resnet50(seed=1).state_dict()   # The momentum encoder differs from the query one.
  state = {f"module.encoder_q.{k}": v for k, v in q.items()}
  state.update({f"module.encoder_k.{k}": v for k, v in other.items()})
  state.update({  # MoCo v2's MLP head, and the queue.
      "module.encoder_q.fc.0.weight": torch.randn(2048, 2048),
      "module.encoder_q.fc.0.bias": torch.randn(2048),
      "module.encoder_q.fc.2.weight": torch.randn(128, 2048),
      "module.encoder_q.fc.2.bias": torch.randn(128),
      "module.queue": torch.randn(128, 64), "module.queue_ptr": torch.zeros(1, dtype=torch.long)})
  optimizer = {"state": {0: {"momentum_buffer": torch.randn(64, 3, 7, 7)}},
               "param_groups": [{"lr": 0.03, "momentum": 0.9, "params": [0]}]}
  path = lib.save_state({"epoch": 800, "arch": "resnet50", "state_dict": state,
                         "optimizer": optimizer},
                        tmp_path / "moco_v2_800ep_pretrain.pth.tar")
  check_encoder(zoo.load("moco_rn50", checkpoint=path, cache=False), stages, pooled)


def test_vip_rn50_keeps_its_head(tmp_path):
  model = resnet50(head=1024, seed=2)
  x = lib.images(2, SIZE, seed=10)
  stages, pooled, full = reference(model, x)
  ckpt = {"vip": {f"module.convnet.{k}": v for k, v in model.state_dict().items()}}
  path = lib.save_state(ckpt, tmp_path / "model.pt")
  enc = zoo.load("vip_rn50", checkpoint=path, cache=False)
  out, inter = lib.run(enc.module, enc.params, x)
  assert out["cls"].shape == (2, 1024)
  lib.assert_close(out["cls"], full, "cls vs VIP's output (fc on the pool)")
  lib.assert_close(inter["pooled"], pooled, "pooled")
  lib.assert_close(out["tokens"], stages[-1].reshape(2, -1, 2048), "tokens")
  for i, (ours, theirs) in enumerate(zip(out["pyramid"], stages)):
    lib.assert_close(ours, theirs, f"pyramid[{i}]")


def test_vip_without_head_is_missing_fc(tmp_path, tv_model):
  model, _ = tv_model
  ckpt = {"vip": {f"module.convnet.{k}": v for k, v in model.state_dict().items()}}
  path = lib.save_state(ckpt, tmp_path / "model.pt")
  with pytest.raises(convert.ConversionError) as e:
    zoo.load("vip_rn50", checkpoint=path, cache=False)
  assert "params/fc/kernel" in str(e.value) and "missing" in str(e.value)
