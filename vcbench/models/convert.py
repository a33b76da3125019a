"""PyTorch (and safetensors / npz) checkpoints -> Flax variables, with an audit.

Conversion is a rename table (`layouts.py`): each rule maps a regex over source
keys to a Flax variable path and a layout transform, or drops the key with a
stated reason (a classifier head, an MAE decoder, CLIP's text tower). The
converter then accounts for everything: every source tensor is used or
dropped by a rule, every target variable is filled exactly once, every shape
matches. Anything else raises `ConversionError` listing the missing,
unexpected and mismatched keys, so a wrong checkpoint fails in one go with the
whole diff instead of producing an encoder that silently computes garbage.

PyTorch files are read with NumPy alone (`torch_pickle`, the allow-list of
`torch.load(weights_only=True)`), so torch is never needed at run time.
Converted variables are saved as a flat `.npz` (`save_variables`) that later
loads read back directly.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import zipfile
from typing import Any, Callable, Mapping, Optional, Sequence

import ml_dtypes  # Also registers bfloat16 with numpy, for safetensors.
import numpy as np

from vcbench import files
from vcbench.errors import CheckpointError
from vcbench.errors import UserError
from vcbench.models import resize
from vcbench.models import torch_pickle

NATIVE_COLLECTIONS = ("params", "batch_stats")


class ConversionError(UserError, ValueError):
  """A checkpoint whose tensors do not account exactly for the target model."""


# ----------------------------------------------------------------------------
# Reading files.


def _to_numpy(value) -> Optional[np.ndarray]:
  if isinstance(value, np.ndarray):
    # Layout transforms and the value checks work in float32; bfloat16 widens exactly.
    return value.astype(np.float32) if value.dtype == ml_dtypes.bfloat16 else value
  if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
    t = value.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
      t = t.float()
    return t.numpy()
  return None


def _flatten(tree: Mapping[str, Any], sep: str, leaf: Callable[[Any], Any],
             prefix: str = "") -> dict[str, Any]:
  """Nested mappings -> {'a<sep>b<sep>c': leaf(x)}, skipping leaves mapped to None."""
  flat = {}
  for k, v in tree.items():
    key = f"{prefix}{k}"
    if isinstance(v, Mapping):
      flat.update(_flatten(v, sep, leaf, key + sep))
    elif (value := leaf(v)) is not None:
      flat[key] = value
  return flat


def flatten_state(tree: Mapping[str, Any]) -> dict[str, np.ndarray]:
  """Nested dicts of tensors -> {'a.b.c': array}; non-tensor leaves are skipped."""
  return _flatten(tree, ".", _to_numpy)


def _safetensors_header_problem(path: str) -> Optional[str]:
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    head = f.read(8)
    if len(head) < 8:
      return "shorter than a safetensors header"
    n = int.from_bytes(head, "little")
    if n > size - 8:
      return f"header of {n} bytes in a file of {size} (truncated?)"
    try:
      header = json.loads(f.read(n))
    except ValueError as e:
      return f"unreadable header ({e})"
  end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
            default=0)
  return f"tensors end at byte {8 + n + end}, the file has {size} (truncated?)" if (
      8 + n + end > size) else None


def check_readable(path: str) -> None:
  """Cheap checks that `path` is a checkpoint `read_checkpoint` can read (it exists, is a file
  of a known kind, its header or zip directory is intact), without reading the tensors: jobs
  run it on every checkpoint before any expensive work."""
  if not os.path.exists(path):
    raise CheckpointError(f"{path}: no such file")
  if os.path.isdir(path):
    raise CheckpointError(f"{path}: a directory, expected a checkpoint file")
  if os.path.getsize(path) == 0:
    raise CheckpointError(f"{path}: empty file")
  ext = os.path.splitext(path)[1].lower()
  if ext not in (".safetensors", ".npz", *_TORCH_EXTENSIONS):
    raise CheckpointError(f"{path}: unknown checkpoint extension {ext!r}; expected .pth, .pt, "
                          ".bin, .ckpt, .tar, .safetensors or .npz")
  if ext == ".safetensors":
    problem = _safetensors_header_problem(path)
  elif ext == ".npz":
    problem = None if zipfile.is_zipfile(path) else "not a zip archive (truncated or corrupt?)"
  else:
    torch_pickle.check(path)   # The pickles and storage sizes, not the tensor bytes.
    problem = None
  if problem:
    raise CheckpointError(f"{path}: not a readable checkpoint: {problem}")


_TORCH_EXTENSIONS = (".pth", ".pt", ".bin", ".ckpt", ".tar")


def read_checkpoint(path: str) -> dict[str, np.ndarray]:
  """Reads .pth/.pt/.bin/.ckpt, .safetensors or .npz into {key: ndarray}.

  Nested containers (`{'model': {...}}`) are flattened with '.', so a layout can
  select a sub-dict by prefix.
  """
  if not os.path.exists(path):
    raise CheckpointError(f"{path}: no such file")
  ext = os.path.splitext(path)[1].lower()
  if ext == ".safetensors":
    from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
    try:
      return dict(load_file(path))
    except Exception as e:
      raise CheckpointError(f"{path}: not a readable safetensors file: {e}") from e
  if ext == ".npz":
    try:
      with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
    except Exception as e:
      raise CheckpointError(f"{path}: not a readable .npz file (truncated or corrupt?): "
                            f"{type(e).__name__}: {e}") from e
  if ext in _TORCH_EXTENSIONS:
    obj = torch_pickle.load(path)
    if not isinstance(obj, Mapping):
      raise CheckpointError(f"{path}: expected a dict of tensors, got {type(obj).__name__}")
    return flatten_state(obj)
  raise CheckpointError(f"{path}: unknown checkpoint extension {ext!r}; expected .pth, .pt, "
                        ".bin, .ckpt, .safetensors or .npz")


# ----------------------------------------------------------------------------
# Layout transforms: PyTorch tensor -> Flax variable.


def _dense(x, shape):
  return x.T  # Linear [out, in] -> Dense kernel [in, out].


def _conv(x, shape):
  return x.transpose(2, 3, 1, 0)  # [O, I, kh, kw] -> [kh, kw, I, O].


def _squeezed(shape) -> tuple:
  return tuple(d for d in shape if d != 1)


def _copy(x, shape):
  """Same tensor; only size-1 axes may be added or dropped (CLIP's [D] class
  embedding -> [1, 1, D]). Any other reshape would hide a transposed tensor."""
  return x.reshape(shape) if _squeezed(x.shape) == _squeezed(shape) else x


def _posemb(x, shape):
  """Position embedding [N, D] or [1, N, D], resampled if the grid differs."""
  x = x.reshape(1, -1, x.shape[-1])
  if x.shape[1] != shape[1] and x.shape[-1] == shape[-1]:
    prefix = 1
    side = int(round((shape[1] - prefix) ** 0.5))
    x = resize.resample_pos_embed(x.astype(np.float32), (side, side), prefix)
  return _copy(x, shape)


TRANSFORMS: dict[str, Callable[[np.ndarray, tuple], np.ndarray]] = {
    "dense": _dense, "conv": _conv, "copy": _copy, "posemb": _posemb}


@dataclasses.dataclass(frozen=True)
class Rule:
  """`pattern` (full match on a source key) -> `target` ('collection/a/b', with
  regex group references) through `transform`; `target=None` drops the key and
  `reason` says why."""
  pattern: str
  target: Optional[str]
  transform: str = "copy"
  reason: str = ""


@dataclasses.dataclass(frozen=True)
class Layout:
  """How one family of checkpoints maps onto one Flax module."""
  rules: Sequence[Rule]
  # Where the encoder's tensors sit in the (flattened) file, most specific
  # first: the first prefix that some key starts with is used, keys outside it
  # are dropped with `outside_reason`. E.g. R3M's ('r3m.module.convnet.', '').
  prefixes: Sequence[str] = ("",)
  outside_reason: str = "outside the encoder"

  def with_prefixes(self, *prefixes: str, outside_reason: Optional[str] = None) -> "Layout":
    return dataclasses.replace(self, prefixes=prefixes,
                               outside_reason=outside_reason or self.outside_reason)

  def with_rules_first(self, *rules: Rule) -> "Layout":
    """The same layout with `rules` taking precedence (first match wins)."""
    return dataclasses.replace(self, rules=(*rules, *self.rules))


def _pick_prefix(keys, prefixes: Sequence[str]) -> str:
  for p in prefixes:
    if any(k.startswith(p) for k in keys):
      return p
  return prefixes[-1]


# ----------------------------------------------------------------------------
# The audit.


def flatten_variables(variables: Mapping[str, Any]) -> dict[str, Any]:
  """{'params': {'a': {'b': x}}} -> {'params/a/b': x}."""
  return _flatten(variables, "/", lambda v: v)


def unflatten_variables(flat: Mapping[str, Any]) -> dict[str, Any]:
  tree: dict[str, Any] = {}
  for key, v in flat.items():
    node = tree
    *parents, leaf = key.split("/")
    for p in parents:
      node = node.setdefault(p, {})
    node[leaf] = v
  return tree


def _format_report(missing, unexpected, mismatched, source: str) -> str:
  lines = [f"checkpoint {source} does not match the model:"]
  if missing:
    lines.append(f"  missing ({len(missing)} model variables no source tensor fills):")
    lines += [f"    - {k}" for k in sorted(missing)]
  if unexpected:
    lines.append(f"  unexpected ({len(unexpected)} source tensors no rule uses):")
    lines += [f"    + {k} {list(s)}" for k, s in sorted(unexpected)]
  if mismatched:
    lines.append(f"  mismatched ({len(mismatched)} shapes):")
    lines += [f"    ! {src} -> {dst}: expected {list(exp)}, got {list(got)}"
              for src, dst, exp, got in sorted(mismatched)]
  return "\n".join(lines)


def _target_shapes(expected: Mapping[str, Any]) -> dict[str, tuple]:
  return {k: tuple(v.shape) for k, v in flatten_variables(expected).items()}


def _bad_values(items) -> list[str]:
  """Why each (name, array) is unusable as a weight: not floating point, or not finite."""
  problems = []
  for name, value in items:
    value = np.asarray(value)
    if not (np.issubdtype(value.dtype, np.floating) or value.dtype == ml_dtypes.bfloat16):
      problems.append(f"{name}: dtype {value.dtype}, expected a floating-point weight")
    else:
      bad = int(value.size - np.count_nonzero(np.isfinite(value.astype(np.float32))))
      if bad:
        problems.append(f"{name}: {bad} of {value.size} values are NaN or infinite")
  return problems


def check_values(items, source: str) -> None:
  """Refuses weights that would load silently wrong (an int or bool tensor cast to float, NaNs
  or infinities), naming every such tensor of `source`."""
  problems = _bad_values(items)
  if problems:
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5
                                       else "")
    raise CheckpointError(f"{source}: {len(problems)} unusable tensor(s): {shown}")


def convert_state(state: Mapping[str, np.ndarray], layout: Layout,
                  expected: Mapping[str, Any], source: str = "<state>",
                  dtype=np.float32) -> tuple[dict[str, Any], dict[str, str]]:
  """Maps a flat state dict onto the variables `expected` (a shape tree).

  Returns (variables, dropped) where `dropped` maps every dropped source key to
  its reason. Raises ConversionError with the full diff on any mismatch.
  """
  shapes = _target_shapes(expected)
  filled: dict[str, np.ndarray] = {}
  dropped: dict[str, str] = {}
  unexpected, mismatched, duplicate = [], [], []
  used = []   # (source key, tensor) of every tensor that fills a variable.
  prefix = _pick_prefix(state, layout.prefixes)
  for key, value in state.items():
    if not key.startswith(prefix):
      dropped[key] = layout.outside_reason
      continue
    name = key[len(prefix):]
    rule = next((r for r in layout.rules if re.fullmatch(r.pattern, name)), None)
    if rule is None:
      unexpected.append((key, value.shape))
      continue
    if rule.target is None:
      dropped[key] = rule.reason
      continue
    target = re.sub(rf"^{rule.pattern}$", rule.target, name)
    if target not in shapes:
      unexpected.append((key, value.shape))
      continue
    if target in filled:
      duplicate.append(target)
    out = TRANSFORMS[rule.transform](np.asarray(value), shapes[target])
    if tuple(out.shape) != shapes[target]:
      mismatched.append((key, target, shapes[target], tuple(value.shape)))
      continue
    filled[target] = out.astype(dtype)
    used.append((key, value))
  missing = [k for k in shapes if k not in filled and k not in
             {m[1] for m in mismatched}]
  if duplicate:
    raise ConversionError(f"checkpoint {source}: several source tensors fill "
                          f"{sorted(set(duplicate))}")
  if missing or unexpected or mismatched:
    raise ConversionError(_format_report(missing, unexpected, mismatched, source))
  check_values(used, source)
  return unflatten_variables(filled), dropped


def check_native(flat: Mapping[str, np.ndarray], expected: Mapping[str, Any],
                 source: str) -> dict[str, Any]:
  """Validates an already converted (vcbench-native) flat dict against the model."""
  shapes = _target_shapes(expected)
  missing = [k for k in shapes if k not in flat]
  unexpected = [(k, v.shape) for k, v in flat.items() if k not in shapes]
  mismatched = [(k, k, shapes[k], tuple(v.shape)) for k, v in flat.items()
                if k in shapes and tuple(v.shape) != shapes[k]]
  if missing or unexpected or mismatched:
    raise ConversionError(_format_report(missing, unexpected, mismatched, source))
  check_values(flat.items(), source)
  return unflatten_variables({k: np.asarray(v) for k, v in flat.items()})


def is_native(flat: Mapping[str, Any]) -> bool:
  return bool(flat) and all(k.split("/", 1)[0] in NATIVE_COLLECTIONS for k in flat)


# ----------------------------------------------------------------------------
# Saving converted variables.


def save_variables(path: str, variables: Mapping[str, Any]) -> None:
  """Writes variables as a flat .npz, atomically (temp file + rename)."""
  flat = {k: np.asarray(v) for k, v in flatten_variables(variables).items()}
  files.atomic_write(path, lambda f: np.savez(f, **flat))


def load_variables(path: str, expected: Mapping[str, Any]) -> dict[str, Any]:
  """Reads a .npz written by `save_variables` and checks it against `expected`."""
  flat = read_checkpoint(path)
  if not is_native(flat):
    raise CheckpointError(f"{path}: not a converted vcbench file (keys should start with "
                          f"{'/'.join(NATIVE_COLLECTIONS)}/, e.g. {next(iter(flat), '')!r})")
  return check_native(flat, expected, path)
