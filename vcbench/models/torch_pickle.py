"""Reading PyTorch checkpoints with NumPy alone: what `torch.load(weights_only=True)` reads.

`torch.save` writes one of two formats, both built on a protocol-2 pickle of the saved object
(usually a dict of tensors) in which every tensor is a call to a rebuild function in
`torch._utils` taking a storage, an offset, a size and a stride. Storages are not in the pickle:
the pickle names them by a persistent id, `('storage', <torch.*Storage class>, key, location,
numel)`, and their bytes are stored beside it.

* The zip format (torch >= 1.6, the default): a zip archive with one top-level folder (any
  name; `archive/` today) holding `data.pkl` (the pickle), `data/<key>` (one record per
  storage, its raw bytes), `byteorder` ('little' or 'big'; absent in older files, which are
  little-endian) and bookkeeping records (`version`, ...). `numel` counts elements for typed
  storages and bytes for `UntypedStorage`, which newer dtypes (uint16, float8) use together
  with `_rebuild_tensor_v3`, whose extra argument is the dtype.
* The legacy format (`_use_new_zipfile_serialization=False`, and every file before 1.6): five
  pickles in a row - the magic number 0x1950a86a20f9469cfc6c, the protocol version 1001, a
  dict of system information (`little_endian`, ...), the object itself, and the list of
  storage keys - followed by each storage in that order, as an int64 element count and then
  the raw bytes. The persistent ids carry a sixth field, an optional view of another storage
  (files from torch < 1.0).

Unpickling runs whatever callables the pickle names, so the unpickler here resolves only an
allow-list equivalent to torch's `weights_only=True`: the tensor and parameter rebuild
functions, the storage classes and dtypes, `OrderedDict`, `torch.Size` and the builtins that
protocol 2 needs for bytes, sets and complex numbers. They resolve to functions of this module,
never to torch or to the names' real objects, and any other global is refused before anything
is called. Tensors come back as contiguous NumPy arrays (bfloat16 and float8 as `ml_dtypes`
arrays, exact bits), parameters as their data, `torch.Size` as a tuple, dtypes as NumPy dtypes.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import os
import pickle
import zipfile
from typing import Any, BinaryIO, Callable, Optional

import ml_dtypes
import numpy as np

from vcbench.errors import CheckpointError

MAGIC_NUMBER = 0x1950a86a20f9469cfc6c
PROTOCOL_VERSION = 1001

# torch.<Name>Storage -> element type. Quantized storages are deliberately absent.
_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_, "ComplexFloatStorage": np.complex64,
    "ComplexDoubleStorage": np.complex128,
}

# torch.<dtype> -> NumPy dtype, for `_rebuild_tensor_v3` and dtype objects in the pickle.
_TORCH_DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
    "uint64": np.uint64, "bool": np.bool_, "complex64": np.complex64,
    "complex128": np.complex128, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2, "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}

# Globals torch's allow-list accepts for tensors this reader does not rebuild (sparse,
# quantized, nested, meta, numpy-backed). They are reported as unsupported, not as unsafe.
_UNSUPPORTED = {
    "torch._utils._rebuild_qtensor", "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_wrapper_subclass", "torch._utils._rebuild_device_tensor_from_numpy",
    "torch.serialization._get_layout", "torch.QInt8Storage", "torch.QUInt8Storage",
    "torch.QInt32Storage", "torch.QUInt4x2Storage", "torch.QUInt2x4Storage",
    "torch.per_tensor_affine", "torch.per_tensor_symmetric", "torch.per_channel_affine",
    "torch.per_channel_symmetric", "torch.per_channel_affine_float_qparams",
}


@dataclasses.dataclass(frozen=True)
class _StorageType:
  """What a `torch.*Storage` global stands for: its element type (bytes when untyped)."""
  name: str
  dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class _TensorClass:
  """`torch.Tensor` or `torch.nn.Parameter`, as named by `_rebuild_from_type_v2`."""
  name: str


@dataclasses.dataclass
class _Storage:
  """One storage's bytes (`data` is None while only its size is known)."""
  key: str
  dtype: np.dtype
  nbytes: int
  data: Optional[np.ndarray] = None


def _latin1_encode(text, encoding="latin1"):
  # Protocol 2 has no bytes opcode: Python pickles bytes as _codecs.encode(str, 'latin1').
  if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
    raise pickle.UnpicklingError(f"_codecs.encode({type(text).__name__}, {encoding!r})")
  return text.encode(encoding)


def _bytearray(source=b"", *encoding):
  # Protocol 2 pickles a bytearray as bytearray(str, 'latin-1'); an int would only allocate.
  if not isinstance(source, (str, bytes, list)):
    raise pickle.UnpicklingError(f"bytearray({type(source).__name__})")
  return bytearray(source, *encoding)


def _device(kind, index=None):
  return str(kind) if index is None else f"{kind}:{index}"


_PLAIN_GLOBALS: dict[str, Any] = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "builtins.set": set,
    "builtins.bytearray": _bytearray,
    "builtins.complex": complex,
    "_codecs.encode": _latin1_encode,
    "torch.Size": tuple,
    "torch.device": _device,
    "torch.Tensor": _TensorClass("torch.Tensor"),
    "torch.nn.parameter.Parameter": _TensorClass("torch.nn.parameter.Parameter"),
    "torch.UntypedStorage": _StorageType("UntypedStorage", np.dtype(np.uint8)),
    "torch.storage.UntypedStorage": _StorageType("UntypedStorage", np.dtype(np.uint8)),
    **{f"{module}.{name}": _StorageType(name, np.dtype(dtype))
       for name, dtype in _STORAGE_DTYPES.items() for module in ("torch", "torch.cuda")},
    **{f"torch.{name}": np.dtype(dtype) for name, dtype in _TORCH_DTYPES.items()},
}

# Rebuild functions, resolved to methods of the unpickler reading the file.
_REBUILD_METHODS = {
    f"torch._utils.{name}": name for name in (
        "_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_parameter",
        "_rebuild_parameter_with_state", "_rebuild_device_tensor_from_cpu_tensor")}
_REBUILD_METHODS["torch._tensor._rebuild_from_type_v2"] = "_rebuild_from_type_v2"


def _corrupt(path: str, problem: str) -> CheckpointError:
  return CheckpointError(f"{path}: not a readable PyTorch checkpoint (truncated or corrupt?): "
                         f"{problem}")


def _swap_bytes(a: np.ndarray) -> np.ndarray:
  """A big-endian array's values in native order (each half of a complex on its own)."""
  width = a.dtype.itemsize // (2 if a.dtype.kind == "c" else 1)
  if width == 1:
    return a
  swapped = a.reshape(-1).view(np.uint8).reshape(-1, width)[:, ::-1]
  return np.ascontiguousarray(swapped).view(a.dtype).reshape(a.shape)


class _Unpickler(pickle.Unpickler):
  """A pickle reader that resolves only the allow-listed globals.

  `storage_for(storage_type, key, numel)` returns the `_Storage` a persistent id names. With
  `materialize=False` tensors are checked against their storage's size but not built (the
  storage bytes may not have been read), and come back as None.
  """

  def __init__(self, file: BinaryIO, path: str,
               storage_for: Optional[Callable[[_StorageType, str, int], _Storage]] = None,
               materialize: bool = True, big_endian: bool = False):
    super().__init__(file, encoding="utf-8")
    self._path = path
    self._storage_for = storage_for
    self._materialize = materialize
    self._big_endian = big_endian

  def find_class(self, module: str, name: str) -> Any:
    if module == "__builtin__":   # Pickles written by Python 2.
      module = "builtins"
    full = f"{module}.{name}"
    if full in _PLAIN_GLOBALS:
      return _PLAIN_GLOBALS[full]
    if full in _REBUILD_METHODS:
      return getattr(self, _REBUILD_METHODS[full])
    if full in _UNSUPPORTED:
      raise CheckpointError(
          f"{self._path}: holds {full} (a quantized, sparse, nested or meta tensor), which "
          "vcbench does not read; re-save the state_dict with dense tensors")
    raise CheckpointError(
        f"{self._path}: refused: the pickle holds Python objects other than tensors and "
        "plain containers, and unpickling them could run code. Re-save a plain state_dict. "
        f"(refused global: {full})")

  def persistent_load(self, pid: Any) -> _Storage:
    if self._storage_for is None:
      raise _corrupt(self._path, f"a storage reference where none belongs: {pid!r}")
    if (not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] != "storage"
        or not isinstance(pid[1], _StorageType)):
      raise _corrupt(self._path, f"unexpected persistent id {pid!r}")
    storage_type, key, numel = pid[1], str(pid[2]), pid[4]
    root = self._storage_for(storage_type, key, numel)
    view = pid[5] if len(pid) == 6 else None
    return root if view is None else self._storage_view(root, *view)

  def _storage_view(self, root: _Storage, key: str, offset: int, numel: int) -> _Storage:
    """A view into another storage, as written by torch < 1.0."""
    start, end = offset * root.dtype.itemsize, (offset + numel) * root.dtype.itemsize
    if end > root.nbytes:
      raise _corrupt(self._path, f"storage view {key} ends at byte {end} of storage "
                     f"{root.key}, which holds {root.nbytes}")
    data = None if root.data is None else root.data[start:end]
    return _Storage(str(key), root.dtype, end - start, data)

  # The rebuild functions: signatures as torch.save writes them.

  def _rebuild_tensor(self, storage, storage_offset, size, stride):
    return self._tensor(storage, storage.dtype if isinstance(storage, _Storage) else None,
                        storage_offset, size, stride)

  def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False,
                         backward_hooks=None, metadata=None):
    del requires_grad, backward_hooks, metadata  # Autograd state, not values.
    return self._rebuild_tensor(storage, storage_offset, size, stride)

  def _rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad,
                         backward_hooks, dtype, metadata=None):
    del requires_grad, backward_hooks, metadata
    return self._tensor(storage, dtype, storage_offset, size, stride)

  def _rebuild_parameter(self, data, requires_grad, backward_hooks):
    del requires_grad, backward_hooks
    return data

  def _rebuild_parameter_with_state(self, data, requires_grad, backward_hooks, state):
    del requires_grad, backward_hooks, state   # Python attributes set on the Parameter.
    return data

  def _rebuild_device_tensor_from_cpu_tensor(self, data, dtype, device, requires_grad):
    del dtype, device, requires_grad   # `data` already holds the values, on the CPU.
    return data

  def _rebuild_from_type_v2(self, func, new_type, args, state):
    """A tensor with Python attributes: rebuilt by `func`, the attributes dropped."""
    del state
    if not isinstance(new_type, _TensorClass) or not callable(func):
      raise CheckpointError(
          f"{self._path}: holds a tensor subclass ({new_type!r}), which vcbench does not read; "
          "re-save a plain state_dict")
    return func(*args)

  def _tensor(self, storage, dtype, offset, size, stride) -> Optional[np.ndarray]:
    """The tensor `size`/`stride` describes from element `offset` of `storage`, copied."""
    if not isinstance(storage, _Storage) or not isinstance(dtype, np.dtype):
      raise _corrupt(self._path, "a tensor without a storage or dtype")
    size, stride = tuple(size), tuple(stride)
    if (not all(isinstance(n, int) for n in (offset, *size, *stride))
        or len(size) != len(stride) or min((offset, *size, *stride)) < 0):
      raise _corrupt(self._path, f"tensor of size {size}, stride {stride} at offset {offset}")
    itemsize = dtype.itemsize
    elements = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    needed = elements * itemsize
    if needed > storage.nbytes:
      raise _corrupt(self._path, f"a {dtype} tensor of size {size} at offset {offset} needs "
                     f"{needed} bytes of storage {storage.key}, which holds {storage.nbytes}")
    if not self._materialize:
      return None
    if elements == 0:
      return np.zeros(size, dtype)
    # Strided through opaque items of the element's width: as_strided cannot take ml_dtypes.
    items = storage.data[offset * itemsize:needed].view(np.dtype((np.void, itemsize)))
    strided = np.lib.stride_tricks.as_strided(
        items, shape=size, strides=tuple(s * itemsize for s in stride), writeable=False)
    out = np.array(strided, copy=True).view(dtype)
    return _swap_bytes(out) if self._big_endian else out


@contextlib.contextmanager
def _reading(path: str):
  """Anything that goes wrong while reading becomes a CheckpointError naming `path`: only
  allow-listed code runs, so any other exception means a damaged file."""
  try:
    yield
  except (CheckpointError, OSError):
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise _corrupt(path, f"{type(e).__name__}: {e}") from e


# ----------------------------------------------------------------------------
# The zip format.


def _is_torchscript(names: list[str]) -> bool:
  return any(n.endswith("constants.pkl") or "/code/" in n for n in names)


def _archive_folder(path: str, names: list[str]) -> str:
  """The top-level folder holding data.pkl ('archive/' today, the file's stem before)."""
  folders = [n[:-len("data.pkl")] for n in names
             if n.endswith("/data.pkl") and n.count("/") == 1]
  if not folders:
    raise CheckpointError(f"{path}: a zip archive without a data.pkl record: not a PyTorch "
                          "checkpoint (truncated or corrupt?)")
  if len(folders) > 1:
    raise _corrupt(path, f"several data.pkl records ({', '.join(sorted(folders))})")
  return folders[0]


def _zip_byteorder(path: str, zf: zipfile.ZipFile, folder: str) -> bool:
  """Whether the storages are big-endian."""
  try:
    order = zf.read(folder + "byteorder").decode("ascii", "replace").strip()
  except KeyError:
    return False   # Written before torch recorded it: little-endian.
  if order not in ("little", "big"):
    raise _corrupt(path, f"byteorder record says {order!r}")
  return order == "big"


def _read_zip(path: str, zf: zipfile.ZipFile, materialize: bool) -> Any:
  names = zf.namelist()
  if _is_torchscript(names):
    raise CheckpointError(
        f"{path}: a TorchScript archive (or a zip that is no checkpoint); load it once "
        "with torch.jit.load and save model.state_dict() with torch.save instead")
  folder = _archive_folder(path, names)
  big_endian = _zip_byteorder(path, zf, folder)
  storages: dict[str, _Storage] = {}

  def storage_for(storage_type: _StorageType, key: str, numel: int) -> _Storage:
    if key in storages:
      return storages[key]
    record = f"{folder}data/{key}"
    try:
      nbytes = zf.getinfo(record).file_size
    except KeyError:
      raise _corrupt(path, f"storage record {record} is missing") from None
    declared = numel * storage_type.dtype.itemsize
    if nbytes < declared:
      raise _corrupt(path, f"storage record {record} holds {nbytes} bytes, the pickle "
                     f"declares {declared}")
    data = np.frombuffer(zf.read(record), np.uint8) if materialize else None
    storages[key] = _Storage(key, storage_type.dtype, nbytes, data)
    return storages[key]

  pickled = zf.read(folder + "data.pkl")
  return _Unpickler(io.BytesIO(pickled), path, storage_for, materialize, big_endian).load()


# ----------------------------------------------------------------------------
# The legacy format.


def _small_pickle(path: str, f: BinaryIO) -> Any:
  """One of the legacy header pickles, read with the same allow-list (no storages)."""
  return _Unpickler(f, path).load()


def _legacy_header(path: str, f: BinaryIO) -> bool:
  """Reads the three header pickles; returns whether the storages are big-endian."""
  try:
    magic = _small_pickle(path, f)
  except CheckpointError:
    raise   # A refused global: the file is hostile, not merely foreign.
  except Exception as e:  # pylint: disable=broad-except  # Any other bytes: reported below.
    magic = e
  if magic != MAGIC_NUMBER:
    raise _corrupt(path, f"neither a zip archive nor a pickle that opens with PyTorch's "
                   f"magic number {MAGIC_NUMBER:#x}")
  protocol = _small_pickle(path, f)
  if protocol != PROTOCOL_VERSION:
    raise _corrupt(path, f"legacy protocol version {protocol!r}, expected {PROTOCOL_VERSION}")
  sys_info = _small_pickle(path, f)
  if not isinstance(sys_info, dict):
    raise _corrupt(path, f"system information is a {type(sys_info).__name__}, not a dict")
  return not sys_info.get("little_endian", True)


def _read_legacy_storages(path: str, f: BinaryIO, storages: dict[str, _Storage],
                          big_endian: bool, materialize: bool) -> None:
  """The storages after the pickles: per key an int64 element count, then the bytes."""
  keys = _small_pickle(path, f)
  if not isinstance(keys, list) or sorted(map(str, keys)) != sorted(storages):
    raise _corrupt(path, "the list of storage keys does not match the storages the pickle uses")
  size = os.fstat(f.fileno()).st_size
  for key in map(str, keys):
    storage = storages[key]
    head = f.read(8)
    if len(head) < 8:
      raise _corrupt(path, f"storage {key} is cut off before its size")
    count = int.from_bytes(head, "big" if big_endian else "little", signed=True)
    if count * storage.dtype.itemsize != storage.nbytes:
      raise _corrupt(path, f"storage {key} holds {count} elements, the pickle declares "
                     f"{storage.nbytes // storage.dtype.itemsize}")
    if materialize:
      storage.data = np.frombuffer(f.read(storage.nbytes), np.uint8)
      short = storage.data.size < storage.nbytes
    else:
      f.seek(storage.nbytes, os.SEEK_CUR)
      short = f.tell() > size
    if short:
      raise _corrupt(path, f"storage {key} is cut off: the file ends inside its "
                     f"{storage.nbytes} bytes")


def _read_legacy(path: str, f: BinaryIO, materialize: bool) -> Any:
  """Two passes over the object pickle: the storages it declares follow it in the file, so
  the first pass records them (and checks every tensor fits), the second builds tensors."""
  big_endian = _legacy_header(path, f)
  start = f.tell()
  storages: dict[str, _Storage] = {}

  def declare(storage_type: _StorageType, key: str, numel: int) -> _Storage:
    if key not in storages:
      storages[key] = _Storage(key, storage_type.dtype, numel * storage_type.dtype.itemsize)
    return storages[key]

  _Unpickler(f, path, declare, materialize=False).load()
  _read_legacy_storages(path, f, storages, big_endian, materialize)
  if not materialize:
    return None
  f.seek(start)
  return _Unpickler(f, path, lambda _, key, __: storages[key], True, big_endian).load()


# ----------------------------------------------------------------------------
# Entry points.


def _read(path: str, materialize: bool) -> Any:
  with _reading(path):
    if zipfile.is_zipfile(path):
      with zipfile.ZipFile(path) as zf:
        return _read_zip(path, zf, materialize)
    with open(path, "rb") as f:
      if f.read(4) == b"PK\x03\x04":
        raise _corrupt(path, "a zip archive without its central directory")
      f.seek(0)
      return _read_legacy(path, f, materialize)


def load(path: str) -> Any:
  """The object a PyTorch checkpoint holds, tensors as NumPy arrays; raises CheckpointError
  (naming `path`) for a damaged file or one whose pickle names anything off the allow-list."""
  return _read(path, materialize=True)


def check(path: str) -> None:
  """Everything `load` checks except the storage bytes themselves (zip CRCs): the pickle, the
  allow-list, and that every storage is present and long enough for its tensors."""
  _read(path, materialize=False)
