"""RoBERTa in Flax, equal to Hugging Face `transformers`' RobertaModel, and its checkpoints.

G-VUE's language-conditioned tasks (VQA, grounding, retrieval, commonsense) read their text
through a frozen RoBERTa-base. This is that encoder, written so that a Hugging Face checkpoint
computes here exactly what `RobertaModel(...).last_hidden_state` computes in PyTorch:
  * embeddings: word + token-type + position, LayerNorm. Position ids come from the input ids
    as HF makes them: real tokens count up from `pad_token_id + 1`, pad tokens get
    `pad_token_id` itself (fairseq's convention; hence 514 = 512 + 2 positions).
  * post-norm encoder layers: x = LN(x + Attn(x)); x = LN(x + FFN(x)); LayerNorm eps 1e-5,
    exact (erf) GELU; padding masked out of the attention keys.
No pooler: the tasks read token features, so a checkpoint's pooler and LM head are dropped.

`params_from_hf` maps a HF state dict onto this module (Linear weights transposed) and refuses
any checkpoint that does not account exactly for the model, listing what is missing,
unexpected or mis-shaped with the closest names, so a renamed or wrong-sized checkpoint fails
in one go. `load_hf_directory` reads a HF checkpoint folder (config.json + model.safetensors or
pytorch_model.bin, the latter without torch) into (config, params).
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import json
import os
import re
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vcbench.errors import CheckpointError
from vcbench.models import convert
from vcbench.models.vit import gelu

# Hugging Face's ACT2FN names -> the same functions.
ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": functools.partial(jax.nn.gelu, approximate=True),
    "gelu_pytorch_tanh": functools.partial(jax.nn.gelu, approximate=True),
    "quick_gelu": lambda x: x * jax.nn.sigmoid(1.702 * x),
    "relu": jax.nn.relu,
}


@dataclasses.dataclass(frozen=True)
class RobertaConfig:
  """The architecture; field names are config.json's. Defaults are RoBERTa-base."""
  vocab_size: int = 50265
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  max_position_embeddings: int = 514
  type_vocab_size: int = 1
  pad_token_id: int = 1
  layer_norm_eps: float = 1e-5
  hidden_act: str = "gelu"

  def __post_init__(self):
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(f"RobertaConfig: hidden_size {self.hidden_size} is not divisible by "
                       f"num_attention_heads {self.num_attention_heads}")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(f"RobertaConfig: hidden_act {self.hidden_act!r} is not one of "
                       f"{sorted(ACTIVATIONS)}")

  @property
  def max_tokens(self) -> int:
    """The longest input: positions start after the pad id (512 for RoBERTa-base)."""
    return self.max_position_embeddings - self.pad_token_id - 1


# ----------------------------------------------------------------------------
# The model.


def position_ids(input_ids: jax.Array, pad_token_id: int) -> jax.Array:
  """HF's `create_position_ids_from_input_ids`: pad_id + 1, pad_id + 2, ... over the real
  tokens, pad_id on pad tokens (wherever they sit)."""
  real = (input_ids != pad_token_id).astype(jnp.int32)
  return jnp.cumsum(real, axis=1) * real + pad_token_id


class SelfAttention(nn.Module):
  config: RobertaConfig

  @nn.compact
  def __call__(self, x, key_bias):
    b, t, d = x.shape
    heads = self.config.num_attention_heads
    hd = d // heads
    split = lambda y: y.reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
    q, k, v = (split(nn.Dense(d, name=n)(x)) for n in ("query", "key", "value"))
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * (hd ** -0.5) + key_bias
    weights = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bhkd->bhqd", weights, v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return nn.Dense(d, name="output")(out)


class Layer(nn.Module):
  """One post-norm encoder layer (HF's RobertaLayer)."""
  config: RobertaConfig

  @nn.compact
  def __call__(self, x, key_bias):
    cfg = self.config
    norm = functools.partial(nn.LayerNorm, epsilon=cfg.layer_norm_eps, use_fast_variance=False)
    x = norm(name="attention_norm")(x + SelfAttention(cfg, name="attention")(x, key_bias))
    h = ACTIVATIONS[cfg.hidden_act](nn.Dense(cfg.intermediate_size, name="intermediate")(x))
    return norm(name="output_norm")(x + nn.Dense(cfg.hidden_size, name="output")(h))


class Embeddings(nn.Module):
  config: RobertaConfig

  @nn.compact
  def __call__(self, input_ids, token_type_ids):
    cfg = self.config
    embed = lambda n, name: nn.Embed(n, cfg.hidden_size, name=name)
    x = (embed(cfg.vocab_size, "word_embeddings")(input_ids)
         + embed(cfg.type_vocab_size, "token_type_embeddings")(token_type_ids)
         + embed(cfg.max_position_embeddings, "position_embeddings")(
             position_ids(input_ids, cfg.pad_token_id)))
    return nn.LayerNorm(epsilon=cfg.layer_norm_eps, use_fast_variance=False, name="LayerNorm")(x)


class Roberta(nn.Module):
  """input_ids [B, T] int -> (last_hidden_state [B, T, H], {'hidden_states': (L + 1) x
  [B, T, H]}), the embedding output first, as HF's `output_hidden_states`.

  attention_mask [B, T] (1/True = attend) hides keys; None attends to every token, pads
  included, as HF does. token_type_ids default to zeros.
  """
  config: RobertaConfig

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
    cfg = self.config
    if input_ids.ndim != 2:
      raise ValueError(f"Roberta expects input_ids [B, T], got shape {input_ids.shape}")
    if input_ids.shape[1] > cfg.max_tokens:
      raise ValueError(f"Roberta: {input_ids.shape[1]} tokens, at most {cfg.max_tokens} fit "
                       f"max_position_embeddings {cfg.max_position_embeddings}")
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    x = Embeddings(cfg, name="embeddings")(input_ids, token_type_ids)
    if attention_mask is None:
      key_bias = jnp.zeros((1, 1, 1, input_ids.shape[1]), x.dtype)
    else:
      # The most negative float rather than -inf: a row whose every key is masked (an empty
      # text) averages over them instead of turning into NaN.
      key_bias = jnp.where(attention_mask.astype(bool), 0.0, jnp.finfo(x.dtype).min)
      key_bias = key_bias[:, None, None, :].astype(x.dtype)
    hidden = [x]
    for i in range(cfg.num_hidden_layers):
      x = Layer(cfg, name=f"layer_{i}")(x, key_bias)
      hidden.append(x)
    return x, {"hidden_states": tuple(hidden)}


# ----------------------------------------------------------------------------
# Hugging Face checkpoints -> params.

# HF key suffix -> (Flax leaf, transform): Linear weights are [out, in], Dense kernels [in, out].
_LINEAR = {"weight": ("kernel", "dense"), "bias": ("bias", "copy")}
_NORM = {"weight": ("scale", "copy"), "bias": ("bias", "copy")}
_EMBED = {"weight": ("embedding", "copy")}

# Tensors a RoBERTa checkpoint may hold that this encoder does not use (pattern -> reason).
DROPPED = {
    r"pooler\..*": "RobertaModel's pooler (the encoder returns token features)",
    r"lm_head\..*": "the masked-LM head",
    r"(classifier|qa_outputs)\..*": "a fine-tuning head",
    r"embeddings\.(position_ids|token_type_ids)": "a buffer of constant ids",
}


def _hf_modules(config: RobertaConfig) -> dict[str, tuple[str, dict, tuple[int, ...]]]:
  """HF module path -> (Flax module path, its leaves, the shape of its `weight`)."""
  h, i = config.hidden_size, config.intermediate_size
  modules = {
      "embeddings.word_embeddings": ("embeddings/word_embeddings", _EMBED,
                                     (config.vocab_size, h)),
      "embeddings.position_embeddings": ("embeddings/position_embeddings", _EMBED,
                                         (config.max_position_embeddings, h)),
      "embeddings.token_type_embeddings": ("embeddings/token_type_embeddings", _EMBED,
                                           (config.type_vocab_size, h)),
      "embeddings.LayerNorm": ("embeddings/LayerNorm", _NORM, (h,)),
  }
  for n in range(config.num_hidden_layers):
    hf, fx = f"encoder.layer.{n}", f"layer_{n}"
    for qkv in ("query", "key", "value"):
      modules[f"{hf}.attention.self.{qkv}"] = (f"{fx}/attention/{qkv}", _LINEAR, (h, h))
    modules[f"{hf}.attention.output.dense"] = (f"{fx}/attention/output", _LINEAR, (h, h))
    modules[f"{hf}.attention.output.LayerNorm"] = (f"{fx}/attention_norm", _NORM, (h,))
    modules[f"{hf}.intermediate.dense"] = (f"{fx}/intermediate", _LINEAR, (i, h))
    modules[f"{hf}.output.dense"] = (f"{fx}/output", _LINEAR, (h, i))
    modules[f"{hf}.output.LayerNorm"] = (f"{fx}/output_norm", _NORM, (h,))
  return modules


def hf_layout(config: RobertaConfig) -> dict[str, tuple[str, tuple[int, ...], str]]:
  """Every tensor a HF RoBERTa checkpoint must hold (without the `roberta.` prefix):
  key -> (Flax param path, the tensor's shape in the checkpoint, transform)."""
  layout = {}
  for hf, (fx, leaves, weight_shape) in _hf_modules(config).items():
    for suffix, (leaf, transform) in leaves.items():
      shape = weight_shape if suffix == "weight" else weight_shape[:1]
      layout[f"{hf}.{suffix}"] = (f"{fx}/{leaf}", shape, transform)
  return layout


def _canonical_key(key: str) -> str:
  """Drops the `roberta.` prefix of task models and renames the old LayerNorm gamma/beta, as
  HF's loader does."""
  key = key[len("roberta."):] if key.startswith("roberta.") else key
  return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight",
                re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))


def _closest(name: str, candidates) -> str:
  match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
  return f"  (closest: {match[0]})" if match else ""


def _mismatch_report(missing, unexpected, mismatched, layout, source, config) -> str:
  lines = [f"checkpoint {source} does not match {config}:"]
  if missing:
    lines.append(f"  missing ({len(missing)} tensors the model needs):")
    lines += [f"    - {k} {list(layout[k][1])}{_closest(k, unexpected)}" for k in missing]
  if unexpected:
    lines.append(f"  unexpected ({len(unexpected)} tensors no part of the model uses):")
    lines += [f"    + {k} {list(s)}{_closest(k, missing)}" for k, s in unexpected.items()]
  if mismatched:
    lines.append(f"  mismatched ({len(mismatched)} shapes):")
    lines += [f"    ! {k}: expected {list(exp)}, got {list(got)}" for k, exp, got in mismatched]
  return "\n".join(lines)


def _by_canonical_key(state: Mapping[str, Any], source: str) -> dict[str, np.ndarray]:
  out, origin = {}, {}
  for key, value in state.items():
    name = _canonical_key(key)
    if name in out:
      raise convert.ConversionError(f"checkpoint {source}: {origin[name]!r} and {key!r} are "
                                    f"the same tensor {name!r}")
    out[name], origin[name] = np.asarray(value), key
  return out


def convert_hf(state: Mapping[str, Any], config: RobertaConfig, source: str = "<state_dict>"
               ) -> tuple[dict[str, Any], dict[str, str]]:
  """(params, dropped): `params` for `Roberta(config)`, `dropped` maps each checkpoint key the
  encoder does not use (pooler, LM head, id buffers) to why. Raises ConversionError listing
  every missing, unexpected and mis-shaped tensor, with the closest names."""
  layout = hf_layout(config)
  tensors = _by_canonical_key(state, source)
  dropped = {k: reason for k in tensors for p, reason in DROPPED.items() if re.fullmatch(p, k)}
  missing = [k for k in layout if k not in tensors]
  unexpected = {k: v.shape for k, v in tensors.items() if k not in layout and k not in dropped}
  mismatched = [(k, layout[k][1], tensors[k].shape) for k in layout
                if k in tensors and tensors[k].shape != layout[k][1]]
  if missing or unexpected or mismatched:
    raise convert.ConversionError(
        _mismatch_report(missing, unexpected, mismatched, layout, source, config))
  convert.check_values(((k, tensors[k]) for k in layout), source)
  flat = {fx: convert.TRANSFORMS[transform](tensors[k].astype(np.float32), shape)
          for k, (fx, shape, transform) in layout.items()}
  return convert.unflatten_variables(flat), dropped


def params_from_hf(state_dict: Mapping[str, np.ndarray], config: RobertaConfig) -> dict:
  """A HF RobertaModel / RobertaFor* state dict (keys with or without `roberta.`) -> the params
  of `Roberta(config)`: `Roberta(config).apply({'params': params}, ids, mask)`."""
  return convert_hf(state_dict, config)[0]


# ----------------------------------------------------------------------------
# Checkpoint directories.

_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(RobertaConfig))


def config_from_hf(hf: Mapping[str, Any], source: str = "config.json") -> RobertaConfig:
  """A HF config.json (as a dict) -> RobertaConfig; refuses architectures this module does not
  compute (another model type, relative positions, a decoder)."""
  refuse = lambda why: CheckpointError(f"{source}: {why}; vcbench's RoBERTa is the "
                                       "bidirectional encoder with absolute positions")
  if hf.get("model_type", "roberta") != "roberta":
    raise refuse(f"model_type {hf['model_type']!r}, expected 'roberta'")
  if hf.get("position_embedding_type", "absolute") != "absolute":
    raise refuse(f"position_embedding_type {hf['position_embedding_type']!r}")
  if hf.get("is_decoder", False):
    raise refuse("is_decoder is true")
  try:
    return RobertaConfig(**{k: hf[k] for k in _CONFIG_FIELDS if k in hf})
  except (TypeError, ValueError) as e:
    raise CheckpointError(f"{source}: {e}") from e


def read_config(path: str) -> RobertaConfig:
  try:
    with open(path) as f:
      hf = json.load(f)
  except ValueError as e:
    raise CheckpointError(f"{path}: not a JSON file: {e}") from e
  return config_from_hf(hf, source=path)


def weights_file(directory: str) -> str:
  """model.safetensors where the safetensors package can read it, else pytorch_model.bin."""
  safetensors = os.path.join(directory, "model.safetensors")
  torch_bin = os.path.join(directory, "pytorch_model.bin")
  if os.path.exists(safetensors) and importlib.util.find_spec("safetensors") is not None:
    return safetensors
  if os.path.exists(torch_bin):
    return torch_bin
  if os.path.exists(safetensors):
    raise CheckpointError(f"{safetensors}: reading it needs the `safetensors` package "
                          "(pip install safetensors), or put pytorch_model.bin beside it")
  raise CheckpointError(f"{directory}: no model.safetensors or pytorch_model.bin (sharded "
                        "checkpoints are not supported)")


def load_hf_directory(directory: str) -> tuple[RobertaConfig, dict]:
  """A HF RoBERTa checkpoint folder (config.json + weights) -> (config, params)."""
  if not os.path.isdir(directory):
    raise CheckpointError(f"{directory}: not a directory (expected a Hugging Face RoBERTa "
                          "checkpoint folder with config.json)")
  config_path = os.path.join(directory, "config.json")
  if not os.path.exists(config_path):
    raise CheckpointError(f"{config_path}: no such file")
  config = read_config(config_path)
  path = weights_file(directory)
  params, _ = convert_hf(convert.read_checkpoint(path), config, source=path)
  return config, params


def encode_fn(config: RobertaConfig):
  """A jitted (params, input_ids, attention_mask) -> last_hidden_state; params stay an argument
  so the weights are not baked into the compiled program."""
  model = Roberta(config)
  return jax.jit(lambda params, ids, mask: model.apply({"params": params}, ids, mask)[0])


def param_shapes(config: RobertaConfig) -> dict:
  ids = jax.ShapeDtypeStruct((1, 4), jnp.int32)
  tree = jax.eval_shape(lambda i: Roberta(config).init(jax.random.key(0), i), ids)
  return jax.tree.map(lambda s: tuple(s.shape), tree["params"])

