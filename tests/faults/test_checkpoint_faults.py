"""Checkpoints are checked, not trusted: non-float or non-finite weights are refused naming the
tensor, code-executing pickles are refused without suggesting the unsafe option, and a corrupt
converted-weights cache is rebuilt with a warning."""
import pickle

import jax
import numpy as np
import pytest

from vcbench import files
from vcbench.models import convert
from vcbench.models import zoo

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
  monkeypatch.setenv("VCBENCH_CACHE", str(tmp_path / "cache"))


def _native(path, change):
  """The random ViT-Ti's variables as a native .npz, with `change(flat)` applied."""
  enc = zoo.load("random_vit_ti", img_size=32)
  flat = {k: np.asarray(v) for k, v in convert.flatten_variables(enc.params).items()}
  change(flat)
  np.savez(path, **flat)
  return path


@pytest.mark.parametrize("change, message", [
    (lambda f: f.update({sorted(f)[0]: np.ones(f[sorted(f)[0]].shape, np.int8)}), "dtype int8"),
    (lambda f: f.update({sorted(f)[0]: np.full_like(f[sorted(f)[0]], np.nan)}), "NaN or infinite"),
])
def test_native_npz_dtype_and_finiteness(tmp_path, change, message):
  path = _native(tmp_path / "w.npz", change)
  with pytest.raises(convert.CheckpointError, match=message) as e:
    zoo.load("random_vit_ti", checkpoint=str(path), img_size=32)
  assert "params/" in str(e.value)   # The tensor is named.


def _mobilenet_state():
  tv = pytest.importorskip("torchvision")
  return tv.models.mobilenet_v2().state_dict()


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_safetensors_with_integer_weights_is_refused(tmp_path, dtype):
  state = {k: v.clone() for k, v in _mobilenet_state().items()}
  key = "features.0.0.weight"
  state[key] = state[key].to(dtype)
  path = tmp_path / "w.safetensors"
  safetensors_torch.save_file(state, str(path))
  with pytest.raises(convert.CheckpointError, match=f"{key}: dtype"):
    zoo.load("in1k_mobilenetv2", checkpoint=str(path))


class _Evil:
  def __reduce__(self):
    return (print, ("this ran code",))


@pytest.mark.parametrize("legacy", [False, True])
def test_code_executing_pickle_is_refused_without_the_unsafe_advice(tmp_path, legacy, capsys):
  path = tmp_path / "evil.pth"
  torch.save({"state_dict": {"w": torch.zeros(2)}, "x": _Evil()}, path,
             _use_new_zipfile_serialization=not legacy)
  with pytest.raises(convert.CheckpointError) as e:
    convert.read_checkpoint(str(path))
  assert "could run code" in str(e.value) and "weights_only" not in str(e.value)
  assert "this ran code" not in capsys.readouterr().out


def test_plain_pickle_with_code_is_refused(tmp_path, capsys):
  path = tmp_path / "evil.pt"
  path.write_bytes(pickle.dumps({"w": _Evil()}, protocol=2))
  with pytest.raises(convert.CheckpointError):
    convert.read_checkpoint(str(path))
  assert "this ran code" not in capsys.readouterr().out


@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_truncated_files_fail_the_header_check(tmp_path, cut):
  state = {k: v for k, v in _mobilenet_state().items() if v.dtype.is_floating_point}
  for name, save in (("w.safetensors", lambda p: safetensors_torch.save_file(state, str(p))),
                     ("w.pth", lambda p: torch.save(state, p)),
                     ("w.npz", lambda p: np.savez(p, **{k: v.numpy() for k, v in
                                                        state.items()}))):
    path = tmp_path / name
    save(path)
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * cut)])
    with pytest.raises(convert.CheckpointError, match="not a readable"):
      convert.check_readable(str(path))


def test_corrupt_converted_cache_is_rebuilt_with_a_warning(tmp_path, monkeypatch):
  first = zoo.load("in1k_mobilenetv2")
  (cached,) = (tmp_path / "cache" / "converted").glob("in1k_mobilenetv2-*.npz")
  data = bytearray(cached.read_bytes())
  cached.write_bytes(bytes(data[: len(data) // 2]))           # Truncated.
  with pytest.warns(UserWarning, match="converted-weights cache unusable"):
    second = zoo.load("in1k_mobilenetv2")
  jax.tree.map(np.testing.assert_array_equal, first.params, second.params)
  data = bytearray(cached.read_bytes())
  data[len(data) // 2] ^= 0xFF                                 # Flipped in place, same size.
  cached.write_bytes(bytes(data))
  with pytest.warns(UserWarning, match="checksum"):
    third = zoo.load("in1k_mobilenetv2")
  jax.tree.map(np.testing.assert_array_equal, first.params, third.params)
  cached.write_bytes(bytes(data))
  monkeypatch.setenv(files.STRICT_ENV, "1")
  with pytest.raises(files.CorruptFileError, match="unusable: .*not rebuilt"):
    zoo.load("in1k_mobilenetv2")
