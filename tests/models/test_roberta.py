"""Flax RoBERTa against Hugging Face `transformers`' RobertaModel: conversion, parity, folders."""
import dataclasses
import json

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from vcbench.errors import UserError  # pylint: disable=g-import-not-at-top
from vcbench.models import convert
from vcbench.models import roberta

import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top

TINY = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=40, type_vocab_size=1,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)


def hf_config(**overrides):
  return transformers.RobertaConfig(**{**TINY, **overrides})


def hf_model(cls=None, seed=0, **overrides):
  torch.manual_seed(seed)
  model = (cls or transformers.RobertaModel)(hf_config(**overrides))
  return lib.randomize_(model, seed)


def numpy_state(model) -> dict:
  return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def padded_batch(seed=0, batch=3, length=12, vocab=100):
  """<s> ... </s> rows with pads (id 1) after the end; row 1 also has a pad in the middle, which
  HF's position ids skip."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(3, vocab, (batch, length)).astype(np.int64)
  lengths = [length, 7, 4][:batch]
  mask = np.zeros((batch, length), np.int64)
  for row, n in enumerate(lengths):
    ids[row, 0], ids[row, n - 1], ids[row, n:] = 0, 2, 1
    mask[row, :n] = 1
  ids[1, 3] = 1
  return ids, mask


def hf_forward(model, ids, mask):
  with torch.no_grad():
    out = model(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                output_hidden_states=True)
  return out.last_hidden_state.numpy(), [h.numpy() for h in out.hidden_states]


def flax_forward(config, params, ids, mask):
  last, aux = roberta.Roberta(config).apply({"params": params}, ids.astype(np.int32), mask)
  return np.asarray(last), [np.asarray(h) for h in aux["hidden_states"]]


def test_config_from_hf_reads_the_architecture():
  cfg = roberta.config_from_hf(hf_config().to_dict())
  assert cfg == roberta.RobertaConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=128,
                                      max_position_embeddings=40)
  assert cfg.max_tokens == 40 - 2
  base = roberta.RobertaConfig()
  assert (base.vocab_size, base.hidden_size, base.num_hidden_layers, base.num_attention_heads,
          base.intermediate_size, base.max_position_embeddings, base.pad_token_id,
          base.layer_norm_eps, base.max_tokens) == (50265, 768, 12, 12, 3072, 514, 1, 1e-5, 512)


def test_position_ids_as_hugging_face_computes_them():
  ids, _ = padded_batch()
  ref = transformers.models.roberta.modeling_roberta.RobertaEmbeddings \
      .create_position_ids_from_input_ids(torch.from_numpy(ids), 1).numpy()
  np.testing.assert_array_equal(np.asarray(roberta.position_ids(ids, 1)), ref)


@pytest.mark.parametrize("cls, dropped_prefix", [
    (transformers.RobertaModel, "pooler."),            # keys without a prefix
    (transformers.RobertaForMaskedLM, "lm_head."),     # 'roberta.' keys and the MLM head
])
def test_parity_with_transformers(cls, dropped_prefix):
  model = hf_model(cls)
  config = roberta.config_from_hf(model.config.to_dict())
  params, dropped = roberta.convert_hf(numpy_state(model), config)
  assert dropped and all(k.startswith(dropped_prefix) for k in dropped), dropped
  ids, mask = padded_batch()
  encoder = model if cls is transformers.RobertaModel else model.roberta
  ref_last, ref_hidden = hf_forward(encoder, ids, mask)
  last, hidden = flax_forward(config, params, ids, mask)
  lib.assert_close(last, ref_last, "last_hidden_state")
  assert len(hidden) == len(ref_hidden) == 3
  for i, (a, b) in enumerate(zip(hidden, ref_hidden)):
    lib.assert_close(a, b, f"hidden_states[{i}]")


def test_attention_mask_hides_padding_and_none_attends_everything():
  model = hf_model()
  config = roberta.config_from_hf(model.config.to_dict())
  params = roberta.params_from_hf(numpy_state(model), config)
  ids, mask = padded_batch()
  masked, _ = flax_forward(config, params, ids, mask)
  # The real tokens of row 2 do not depend on what its masked pads hold.
  other = ids.copy()
  other[2, 4:] = 50
  changed, _ = flax_forward(config, params, other, mask)
  np.testing.assert_allclose(changed[2, :4], masked[2, :4], atol=1e-6)
  # Without a mask every token (pads included) is attended to, as in HF.
  with torch.no_grad():
    ref = model(torch.from_numpy(ids)).last_hidden_state.numpy()
  last, _ = roberta.Roberta(config).apply({"params": params}, ids.astype(np.int32))
  lib.assert_close(np.asarray(last), ref, "no mask")


def test_converted_tree_is_the_modules_params():
  config = roberta.config_from_hf(hf_config().to_dict())
  params = roberta.params_from_hf(numpy_state(hf_model()), config)
  shapes = roberta.param_shapes(config)
  got = convert.flatten_variables(params)
  want = convert.flatten_variables(shapes)
  assert sorted(got) == sorted(want)
  assert all(tuple(got[k].shape) == want[k] for k in got)
  assert all(v.dtype == np.float32 for v in got.values())


def test_legacy_layernorm_gamma_beta_names_convert_the_same():
  model = hf_model()
  config = roberta.config_from_hf(model.config.to_dict())
  state = numpy_state(model)
  legacy = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                     "LayerNorm.beta"): v
            for k, v in state.items()}
  assert legacy.keys() != state.keys()
  a, b = roberta.params_from_hf(state, config), roberta.params_from_hf(legacy, config)
  for k, v in convert.flatten_variables(a).items():
    np.testing.assert_array_equal(convert.flatten_variables(b)[k], v)


def test_converter_refuses_a_checkpoint_that_does_not_fit_and_lists_the_difference():
  config = roberta.config_from_hf(hf_config().to_dict())
  state = numpy_state(hf_model())
  typo = "encoder.layer.1.attention.self.qeury.weight"
  state[typo] = state.pop("encoder.layer.1.attention.self.query.weight")
  del state["encoder.layer.0.output.LayerNorm.bias"]
  state["embeddings.word_embeddings.weight"] = np.zeros((120, 64), np.float32)
  state["decoder.extra.weight"] = np.zeros((3,), np.float32)
  with pytest.raises(convert.ConversionError) as err:
    roberta.params_from_hf(state, config)
  msg = str(err.value)
  assert isinstance(err.value, UserError)
  assert "missing (2" in msg and "unexpected (2" in msg and "mismatched (1" in msg, msg
  assert ("- encoder.layer.1.attention.self.query.weight [64, 64]  (closest: "
          f"{typo})") in msg, msg
  assert f"+ {typo} [64, 64]  (closest: encoder.layer.1.attention.self.query.weight)" in msg
  assert "- encoder.layer.0.output.LayerNorm.bias [64]" in msg
  assert "+ decoder.extra.weight [3]" in msg
  assert "! embeddings.word_embeddings.weight: expected [100, 64], got [120, 64]" in msg


def test_converter_refuses_wrong_depth_duplicates_and_nan():
  state = numpy_state(hf_model())
  config = roberta.config_from_hf(hf_config().to_dict())
  deeper = dataclasses.replace(config, num_hidden_layers=3)
  with pytest.raises(convert.ConversionError, match=r"missing \(16 "):
    roberta.params_from_hf(state, deeper)
  both = {**state, "roberta.embeddings.LayerNorm.bias": state["embeddings.LayerNorm.bias"]}
  with pytest.raises(convert.ConversionError, match="the same tensor"):
    roberta.params_from_hf(both, config)
  state["embeddings.LayerNorm.bias"] = np.full((64,), np.nan, np.float32)
  with pytest.raises(UserError, match="NaN"):
    roberta.params_from_hf(state, config)


def _write_folder(path, model, weights: str):
  path.mkdir()
  model.config.to_json_file(str(path / "config.json"))
  if weights == "safetensors":
    from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
    save_file(numpy_state(model), str(path / "model.safetensors"))
  else:
    torch.save(model.state_dict(), str(path / "pytorch_model.bin"))
  return str(path)


def test_load_hf_directory_reads_safetensors_and_pytorch_bin(tmp_path):
  model = hf_model(transformers.RobertaForMaskedLM)
  ids, mask = padded_batch()
  ref, _ = hf_forward(model.roberta, ids, mask)
  for weights in ("safetensors", "bin"):
    config, params = roberta.load_hf_directory(_write_folder(tmp_path / weights, model, weights))
    assert config.hidden_size == 64 and config.num_hidden_layers == 2
    last = roberta.encode_fn(config)(params, ids.astype(np.int32), mask)
    lib.assert_close(np.asarray(last), ref, weights)


def test_load_hf_directory_errors_name_the_file(tmp_path):
  with pytest.raises(UserError, match="not a directory"):
    roberta.load_hf_directory(str(tmp_path / "absent"))
  folder = tmp_path / "empty"
  folder.mkdir()
  with pytest.raises(UserError, match="config.json: no such file"):
    roberta.load_hf_directory(str(folder))
  (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
  with pytest.raises(UserError, match="model_type 'bert'"):
    roberta.load_hf_directory(str(folder))
  (folder / "config.json").write_text(json.dumps(hf_config().to_dict()))
  with pytest.raises(UserError, match="no model.safetensors or pytorch_model.bin"):
    roberta.load_hf_directory(str(folder))


def test_too_many_tokens_is_refused():
  config = roberta.config_from_hf(hf_config().to_dict())
  ids = np.full((1, config.max_tokens + 1), 5, np.int32)
  with pytest.raises(ValueError, match="at most 38"):
    roberta.Roberta(config).init(jax.random.key(0), ids)
