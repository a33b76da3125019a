"""The text encoders: hashed words recomputed from their definition, RoBERTa against HF."""
import json
import math
import os
import subprocess
import sys
import zlib

import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.errors import UserError
from vcbench.models import text

TEXTS = ["What color is the large cube?", "the", "Is there a red sphere left of the cube",
         ""]


# ----------------------------------------------------------------------------
# hashed_words, recomputed from the documented definition in plain Python.


def _lowbias32(x: int) -> int:
  x ^= x >> 16
  x = (x * 0x7FEB352D) & 0xFFFFFFFF
  x ^= x >> 15
  x = (x * 0x846CA68B) & 0xFFFFFFFF
  return x ^ (x >> 16)


def reference_word_vector(word: str, dim: int = 256, seed: int = 0) -> np.ndarray:
  bucket = zlib.crc32(word.encode("utf-8")) % 2 ** 16
  key = _lowbias32(seed ^ 0x9E3779B9)
  sqrt3 = float(np.float32(math.sqrt(3.0)))
  out = []
  for c in range(dim):
    h = _lowbias32((bucket * dim + c + key) & 0xFFFFFFFF)
    odd = 2 * (h >> 8) + 1 - 2 ** 24
    out.append(odd * sqrt3 * 2.0 ** -24)   # Exact in float64; one rounding to float32.
  return np.array(out, np.float32)


def reference_position(t: int, dim: int = 256) -> np.ndarray:
  pe = []
  for i in range(dim // 2):
    angle = t / 10000.0 ** (2 * i / dim)
    pe += [math.sin(angle), math.cos(angle)]
  return np.array(pe, np.float32)


@pytest.fixture(scope="module")
def hashed():
  return text.TextEncoder()


def _encode(encoder, texts, max_len):
  tokens, mask = encoder.encode(texts, max_len)
  assert isinstance(tokens, np.ndarray) and isinstance(mask, np.ndarray)
  assert tokens.dtype == np.float32 and mask.dtype == np.bool_
  return tokens, mask


def test_default_is_hashed_words_with_the_documented_sizes(hashed):
  assert text.DEFAULT_SPEC == "hashed_words" and hashed.spec == "hashed_words"
  assert hashed.dim == 256
  tokens, mask = _encode(hashed, TEXTS, 10)
  assert tokens.shape == (4, 10, 256) and mask.shape == (4, 10)


def test_values_are_the_hashed_word_vectors_plus_sine_positions(hashed):
  tokens, mask = _encode(hashed, TEXTS[:1], 8)
  words = ["what", "color", "is", "the", "large", "cube"]
  assert text.words(TEXTS[0]) == words
  for t, w in enumerate(words):
    np.testing.assert_array_equal(text.word_vectors([w])[0], reference_word_vector(w))
    np.testing.assert_allclose(text.sine_positions(8, 256)[t], reference_position(t), atol=1e-6)
    np.testing.assert_allclose(tokens[0, t], reference_word_vector(w) + reference_position(t),
                               rtol=0, atol=2e-6)
  np.testing.assert_array_equal(mask[0], [True] * 6 + [False] * 2)


def test_jit_and_numpy_tables_are_bit_identical_with_unit_variance():
  buckets = np.arange(0, 2 ** 16, 16)
  host = text.bucket_vectors(buckets)
  device = np.asarray(text.bucket_vectors(jnp.asarray(buckets), xp=jnp))
  np.testing.assert_array_equal(host, device)
  assert host.dtype == np.float32
  assert abs(host.mean()) < 0.01 and abs(host.var() - 1.0) < 0.01
  assert np.abs(host).max() < math.sqrt(3.0)


def test_deterministic_across_calls_and_processes(hashed, tmp_path):
  a, _ = _encode(hashed, TEXTS, 12)
  b, _ = _encode(text.TextEncoder("hashed_words"), TEXTS, 12)
  np.testing.assert_array_equal(a, b)
  out = tmp_path / "tokens.npy"
  script = ("import sys, json, numpy as np; from vcbench.models import text; "
            "t, _ = text.TextEncoder().encode(json.loads(sys.argv[1]), 12); "
            "np.save(sys.argv[2], np.asarray(t))")
  # Another Python hash seed: Python's salted `hash` must play no part.
  env = {**os.environ, "PYTHONHASHSEED": "12345", "JAX_PLATFORMS": "cpu"}
  subprocess.run([sys.executable, "-c", script, json.dumps(TEXTS), str(out)], check=True,
                 env=env, timeout=120)
  np.testing.assert_array_equal(np.load(out), a)


def test_mask_marks_the_words_and_padding_is_zero(hashed):
  tokens, mask = _encode(hashed, TEXTS, 10)
  lengths = [len(text.words(t)) for t in TEXTS]
  assert lengths == [6, 1, 9, 0]
  np.testing.assert_array_equal(mask.sum(1), lengths)
  np.testing.assert_array_equal(mask, np.arange(10)[None] < np.array(lengths)[:, None])
  assert not tokens[~mask].any()
  assert (np.abs(tokens[mask]).sum(-1) > 0).all()


def test_truncation_keeps_the_first_max_len_words(hashed):
  full, _ = _encode(hashed, TEXTS[2:3], 12)
  cut, mask = _encode(hashed, TEXTS[2:3], 4)
  assert mask.all() and cut.shape == (1, 4, 256)
  np.testing.assert_array_equal(cut, full[:, :4])


def test_distinct_words_distinct_vectors_and_same_word_same_vector(hashed):
  vocab = ["red", "blue", "cube", "sphere", "left", "right", "two", "three"]
  assert len({text.word_bucket(w) for w in vocab}) == len(vocab)   # no collision among them
  vectors = text.word_vectors(vocab)
  cos = vectors @ vectors.T / np.outer(*[np.linalg.norm(vectors, axis=1)] * 2)
  assert np.abs(cos[~np.eye(len(vocab), dtype=bool)]).max() < 0.3   # near-orthogonal
  # The same word at positions 0 and 3: the tokens differ by the positions only.
  tokens, _ = _encode(hashed, ["red cube", "a big blue red"], 6)
  pos = text.sine_positions(6, 256)
  np.testing.assert_allclose(tokens[0, 0] - pos[0], tokens[1, 3] - pos[3], atol=1e-6)
  np.testing.assert_allclose(tokens[0, 0] - pos[0], text.word_vectors(["red"])[0], atol=1e-6)
  # Case and punctuation do not change a word.
  a, _ = _encode(hashed, ["Red cube!"], 4)
  b, _ = _encode(hashed, ["red, CUBE"], 4)
  np.testing.assert_array_equal(a, b)


def test_encode_in_chunks_gives_the_same_tokens(hashed):
  whole, mask = _encode(hashed, TEXTS * 2, 10)
  chunked, chunked_mask = text.TextEncoder(batch_size=3).encode(TEXTS * 2, 10)   # 3 + 3 + 2
  np.testing.assert_array_equal(chunked, whole)
  np.testing.assert_array_equal(chunked_mask, mask)


def test_load_and_check_spec(hashed, tmp_path):
  assert text.load("hashed_words").dim == hashed.dim
  text.check_spec("hashed_words")
  for bad in ("bert", "roberta:", 3):
    with pytest.raises(text.TextEncoderError, match="unknown text encoder"):
      text.check_spec(bad)
  with pytest.raises(UserError, match="not a directory"):
    text.check_spec(f"roberta:{tmp_path}/absent")
  (tmp_path / "config.json").write_text("{}")
  with pytest.raises(UserError, match="vocab.json: no such file"):
    text.check_spec(f"roberta:{tmp_path}")


def test_bad_inputs_are_refused(hashed):
  with pytest.raises(text.TextEncoderError, match="single string"):
    hashed.encode("what color", 4)
  with pytest.raises(text.TextEncoderError, match="text 1 is a int"):
    hashed.encode(["a", 3], 4)
  with pytest.raises(text.TextEncoderError, match="positive integer"):
    hashed.encode(["a"], 0)
  with pytest.raises(UserError, match="unknown text encoder 'bert'"):
    text.TextEncoder("bert")
  with pytest.raises(UserError, match="not a directory"):
    text.TextEncoder("roberta:/nonexistent/roberta-base")


# ----------------------------------------------------------------------------
# roberta:<dir> against transformers' RobertaModel + RobertaTokenizerFast.

CORPUS = ["the red cube is left of the blue sphere", "what color is the large cylinder?",
          "a man in a hat rides a horse", "how many objects are there"] * 5


@pytest.fixture(scope="module")
def roberta_folder(tmp_path_factory):
  """A tiny RoBERTa folder as Hugging Face writes it: a byte-level BPE trained on a toy corpus
  (vocab.json, merges.txt), config.json and model.safetensors of a randomised RobertaModel."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  tokenizers = pytest.importorskip("tokenizers")
  import vcb_models_testlib as lib  # pylint: disable=g-import-not-at-top
  folder = tmp_path_factory.mktemp("roberta_tiny")
  bpe = tokenizers.ByteLevelBPETokenizer()
  bpe.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1, show_progress=False,
                          special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
  bpe.save_model(str(folder))
  config = transformers.RobertaConfig(
      vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=64, max_position_embeddings=34,
      pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)
  torch.manual_seed(0)
  model = lib.randomize_(transformers.RobertaModel(config), seed=1)
  model.save_pretrained(str(folder))
  tokenizer = transformers.RobertaTokenizerFast.from_pretrained(str(folder))
  return str(folder), model, tokenizer


def test_roberta_matches_transformers_on_the_same_folder(roberta_folder):
  import torch  # pylint: disable=g-import-not-at-top
  folder, model, tokenizer = roberta_folder
  texts = ["What colour is the red cube?", "the",
           "a man in a hat rides a horse near the blue sphere, left of the cube"]
  encoder = text.TextEncoder(f"roberta:{folder}")
  assert encoder.dim == 32
  ref = tokenizer(texts, padding="max_length", truncation=True, max_length=12,
                  return_tensors="np")
  ids, mask = encoder.tokenize(texts, 12)
  np.testing.assert_array_equal(ids, ref["input_ids"])           # <s> ... </s> <pad>..., cut
  np.testing.assert_array_equal(mask, ref["attention_mask"].astype(bool))
  assert ids[2, -1] == 2 and mask[2].all()                        # truncated, </s> kept
  tokens, got_mask = _encode(encoder, texts, 12)
  np.testing.assert_array_equal(got_mask, mask)
  with torch.no_grad():
    hidden = model(torch.from_numpy(ref["input_ids"]),
                   attention_mask=torch.from_numpy(ref["attention_mask"])).last_hidden_state
  want = hidden.numpy()[mask]
  err = np.abs(tokens[mask] - want).max() / np.abs(want).max()
  assert err < 1e-5, err
  assert not tokens[~mask].any()
  text.check_spec(f"roberta:{folder}")
  chunked, _ = text.TextEncoder(f"roberta:{folder}", batch_size=2).encode(texts, 12)
  np.testing.assert_allclose(chunked, tokens, atol=1e-5)


def test_roberta_tokenizer_matches_on_odd_texts(roberta_folder):
  folder, _, tokenizer = roberta_folder
  encoder = text.TextEncoder(f"roberta:{folder}")
  odd = ["the cube <mask> ok", "<s>the</s>", "  two  spaces\tand\nnewline ", "héllo 日本", ""]
  for t in odd:
    want = tokenizer([t])["input_ids"][0]
    ids, mask = encoder.tokenize([t], 32)
    assert list(ids[0, :mask[0].sum()]) == list(want), t


def test_roberta_refuses_max_len_beyond_its_positions(roberta_folder):
  encoder = text.TextEncoder(f"roberta:{roberta_folder[0]}")
  with pytest.raises(text.TextEncoderError, match=r"in \[2, 32\]"):
    encoder.encode(["the"], 33)
