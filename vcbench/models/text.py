"""The text encoders of G-VUE's language-conditioned tasks (VQA, grounding, retrieval,
commonsense): texts -> token features and a mask, behind one API.

    encoder = TextEncoder("hashed_words")            # or "roberta:/path/to/roberta-base"
    tokens, mask = encoder.encode(["what color is the cube?"], max_len=16)
    # tokens float32 [1, 16, encoder.dim], mask bool [1, 16] (True = a real token)

The text side is frozen and the same for every PVR: G-VUE compares visual encoders, and the
language features only have to carry the question, phrase or caption into the decoders.

Two kinds, chosen by a spec string:
  * "hashed_words" (the default, offline): pretrained RoBERTa weights cannot be downloaded on
    these machines, so the default needs no file. Lower-cased words (runs of `\\w`, punctuation
    dropped) are hashed with CRC-32 (`zlib.crc32` of the UTF-8 bytes, stable across processes
    and machines, unlike Python's salted `hash`) into 2^16 buckets; each bucket has a frozen
    random 256-d vector (`bucket_vectors`), and the token is that vector plus the fixed sine
    position of the word (`sine_positions`, position 0 = first word). The vectors come from an
    integer hash of (seed, bucket, channel), not from a random number generator: integer
    arithmetic then a single float32 multiply, so they do not change with NumPy or JAX versions
    or across processes, and NumPy and jit give the same bits (tested on the CPU; the design
    leaves nothing for a GPU to round differently). The values are uniform, unit variance.
    Why it is fair: it is identical for every PVR and carries word identity and order only, so
    any difference between PVRs on a text task comes from the visual features.
    What it cannot do: it has no pretrained semantics (synonyms, paraphrases and word sense
    look unrelated), sees no sub-word structure, and distinct words that share a bucket share a
    vector (with V distinct words about V^2 / 2^17 colliding pairs: ~760 for 10,000 words).
    Expect lower absolute scores on text tasks than with RoBERTa; it is there to rank PVRs
    under one fixed text side.
  * "roberta:<dir>": a Hugging Face RoBERTa checkpoint folder the user provides (config.json,
    model.safetensors or pytorch_model.bin, vocab.json, merges.txt), tokenised like HF's
    RobertaTokenizer (byte-level BPE through the `tokenizers` library, <s> text </s>, cut to
    max_len) and run through the frozen Flax RoBERTa (`roberta.py`, no torch needed); tokens
    are its last hidden state. The special tokens are matched whole inside a text, without the
    lstrip that roberta-base's tokenizer.json gives <mask> (G-VUE's texts hold none).
Both pad every batch to max_len (one compiled program per batch size and max_len) and set the
tokens of padding to zero, so a masked position never leaks a value into a decoder that forgets
the mask.
"""
from __future__ import annotations

import json
import os
import re
import zlib
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vcbench.errors import UserError
from vcbench.models import roberta

DEFAULT_SPEC = "hashed_words"
WORD_BUCKETS = 2 ** 16
WORD_DIM = 256
WORD_SEED = 0


class TextEncoderError(UserError, ValueError):
  """A bad text-encoder spec, checkpoint folder or input."""


# ----------------------------------------------------------------------------
# hashed_words.

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
  """The lower-cased words of `text`: runs of letters, digits and underscores."""
  return _WORD.findall(text.lower())


def word_bucket(word: str, buckets: int = WORD_BUCKETS) -> int:
  return zlib.crc32(word.encode("utf-8")) % buckets


def _mix32(x):
  """A bijective 32-bit integer hash (Wellons' lowbias32); NumPy or JAX uint32 in, out. Both
  wrap uint32 products modulo 2^32, so the two give the same bits."""
  x = x ^ (x >> 16)
  x = x * np.uint32(0x7FEB352D)
  x = x ^ (x >> 15)
  x = x * np.uint32(0x846CA68B)
  return x ^ (x >> 16)


def _seed_key(seed: int) -> np.ndarray:
  # A 1-element array, not a scalar: NumPy warns on scalar overflow, arrays wrap silently.
  return _mix32(np.array([(seed ^ 0x9E3779B9) & 0xFFFFFFFF], np.uint32))


# Unit variance: uniform on (-sqrt 3, sqrt 3). The scale is a power of two times
# float32(sqrt 3), so one float32 multiply of an exact integer is the only rounding.
_UNIFORM_SCALE = np.float32(np.sqrt(3.0)) * np.float32(2.0 ** -24)


def bucket_vectors(buckets, dim: int = WORD_DIM, seed: int = WORD_SEED, xp=np):
  """The frozen embedding table's rows for `buckets` (int array [...]) -> float32 [..., dim].

  Entry (b, c) is hash(seed, b * dim + c) mapped to an odd integer s in (-2^24, 2^24), times
  sqrt(3) / 2^24. Integer work then one float32 multiply: the same bits under NumPy (`xp=np`)
  and inside jit (`xp=jnp`), tested on the CPU.
  """
  index = xp.asarray(buckets).astype(xp.uint32)[..., None] * np.uint32(dim)
  index = index + xp.arange(dim, dtype=xp.uint32)
  h = _mix32(index + _seed_key(seed))
  odd = (h >> 8).astype(xp.int32) * 2 + (1 - 2 ** 24)
  return odd.astype(xp.float32) * _UNIFORM_SCALE


def word_vectors(word_list: Sequence[str], dim: int = WORD_DIM, seed: int = WORD_SEED,
                 buckets: int = WORD_BUCKETS) -> np.ndarray:
  """The vector of each word (before positions are added), float32 [len(word_list), dim]."""
  ids = np.array([word_bucket(w, buckets) for w in word_list], np.int64)
  return bucket_vectors(ids, dim, seed)


def sine_positions(length: int, dim: int) -> np.ndarray:
  """Transformer sine positions, float32 [length, dim]: channel 2i is sin(t / 10000^(2i/dim)),
  2i + 1 its cosine. Computed in float64 on the host, so every backend adds the same values."""
  t = np.arange(length, dtype=np.float64)[:, None]
  freq = 10000.0 ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
  pe = np.zeros((length, dim), np.float64)
  pe[:, 0::2] = np.sin(t * freq)
  pe[:, 1::2] = np.cos(t * freq)
  return pe.astype(np.float32)


def _hashed_tokens(bucket_ids, mask, positions, *, dim: int, seed: int):
  tokens = bucket_vectors(bucket_ids, dim, seed, xp=jnp) + positions[None]
  return jnp.where(mask[..., None], tokens, 0.0)


class HashedWords:
  """The offline default: hashed word vectors plus sine positions (see the module docstring)."""

  def __init__(self, dim: int = WORD_DIM, buckets: int = WORD_BUCKETS, seed: int = WORD_SEED):
    if dim < 2 or dim % 2:
      raise TextEncoderError(f"hashed_words: dim must be even and >= 2, got {dim}")
    if buckets < 1 or buckets * dim > 2 ** 32:
      raise TextEncoderError(f"hashed_words: buckets x dim must be in [1, 2^32], got "
                             f"{buckets} x {dim}")
    self.dim, self.buckets, self.seed = dim, buckets, seed
    self._forward = jax.jit(lambda ids, mask, pos: _hashed_tokens(ids, mask, pos, dim=dim,
                                                                  seed=seed))

  def tokenize(self, texts: Sequence[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """-> bucket ids int32 [B, max_len], mask bool [B, max_len]; words past max_len are cut,
    and a text without a word has an all-False mask row."""
    ids = np.zeros((len(texts), max_len), np.int32)
    mask = np.zeros((len(texts), max_len), bool)
    for row, text in enumerate(texts):
      kept = words(text)[:max_len]
      ids[row, :len(kept)] = [word_bucket(w, self.buckets) for w in kept]
      mask[row, :len(kept)] = True
    return ids, mask

  def forward(self, ids: np.ndarray, mask: np.ndarray) -> jax.Array:
    return self._forward(ids, mask, sine_positions(ids.shape[1], self.dim))


# ----------------------------------------------------------------------------
# roberta:<dir>.

_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def _require_file(directory: str, name: str) -> str:
  path = os.path.join(directory, name)
  if not os.path.isfile(path):
    raise TextEncoderError(f"{path}: no such file (a RoBERTa folder needs config.json, "
                           "vocab.json, merges.txt and model.safetensors or pytorch_model.bin)")
  return path


def _add_prefix_space(directory: str) -> bool:
  """tokenizer_config.json's add_prefix_space where the folder has one; HF's default, False,
  otherwise."""
  path = os.path.join(directory, "tokenizer_config.json")
  if not os.path.isfile(path):
    return False
  with open(path) as f:
    return bool(json.load(f).get("add_prefix_space", False))


def byte_level_bpe(directory: str):
  """The folder's vocab.json + merges.txt as HF's RobertaTokenizer builds them: byte-level
  BPE, no lower-casing, the special tokens matched whole wherever they appear in a text."""
  try:
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise TextEncoderError("the roberta text encoder needs the `tokenizers` package "
                           "(pip install tokenizers)") from e
  tok = ByteLevelBPETokenizer.from_file(_require_file(directory, "vocab.json"),
                                        _require_file(directory, "merges.txt"),
                                        add_prefix_space=_add_prefix_space(directory))
  tok.add_special_tokens([t for t in _SPECIAL_TOKENS if tok.token_to_id(t) is not None])
  return tok


def _special_id(tok, token: str, directory: str) -> int:
  i = tok.token_to_id(token)
  if i is None:
    raise TextEncoderError(f"{directory}/vocab.json: no {token} token (RoBERTa wraps texts "
                           "in <s> ... </s> and pads with <pad>)")
  return i


class RobertaWords:
  """A user's HF RoBERTa checkpoint folder, frozen: texts -> last hidden state."""

  def __init__(self, directory: str):
    self.config, params = roberta.load_hf_directory(directory)
    self.dim = self.config.hidden_size
    self._tok = byte_level_bpe(directory)
    self._cls, self._sep, self._pad = (_special_id(self._tok, t, directory)
                                       for t in ("<s>", "</s>", "<pad>"))
    if self._pad != self.config.pad_token_id:
      raise TextEncoderError(f"{directory}: vocab.json's <pad> is {self._pad}, config.json's "
                             f"pad_token_id is {self.config.pad_token_id}; they must agree "
                             "(RoBERTa's positions skip the pad id)")
    self._params = jax.device_put(params)
    self._encode = roberta.encode_fn(self.config)

  def tokenize(self, texts: Sequence[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """<s> text </s>, the text cut to max_len - 2 tokens, padded with <pad> to max_len."""
    if not 2 <= max_len <= self.config.max_tokens:
      raise TextEncoderError(f"roberta: max_len must be in [2, {self.config.max_tokens}] "
                             f"(<s> and </s> included), got {max_len}")
    ids = np.full((len(texts), max_len), self._pad, np.int32)
    mask = np.zeros((len(texts), max_len), bool)
    for row, enc in enumerate(self._tok.encode_batch(list(texts), add_special_tokens=False)):
      seq = [self._cls, *enc.ids[:max_len - 2], self._sep]
      ids[row, :len(seq)] = seq
      mask[row, :len(seq)] = True
    return ids, mask

  def forward(self, ids: np.ndarray, mask: np.ndarray) -> jax.Array:
    hidden = self._encode(self._params, ids, mask)
    return jnp.where(mask[..., None], hidden, 0.0)


# ----------------------------------------------------------------------------
# The front.


def _parse_spec(spec) -> tuple[str, str]:
  """'hashed_words' -> ('hashed_words', ''); 'roberta:<dir>' -> ('roberta', dir)."""
  if spec == "hashed_words":
    return "hashed_words", ""
  if isinstance(spec, str) and spec.startswith("roberta:") and spec[len("roberta:"):]:
    return "roberta", os.path.expanduser(spec[len("roberta:"):])
  raise TextEncoderError(f"unknown text encoder {spec!r}: expected 'hashed_words' or "
                         "'roberta:<Hugging Face RoBERTa checkpoint folder>'")


def check_spec(spec: str) -> None:
  """Refuses a bad spec, or a RoBERTa folder without its files, before any weight is read (a
  job checks its config up front)."""
  kind, folder = _parse_spec(spec)
  if kind == "roberta":
    if not os.path.isdir(folder):
      raise TextEncoderError(f"{folder}: not a directory (expected a Hugging Face RoBERTa "
                             "checkpoint folder)")
    for name in ("config.json", "vocab.json", "merges.txt"):
      _require_file(folder, name)
    roberta.weights_file(folder)


def _check_texts(texts) -> list[str]:
  if isinstance(texts, (str, bytes)):
    raise TextEncoderError("encode takes a sequence of texts, got a single string (wrap it: "
                           "[text])")
  texts = list(texts)
  bad = [(i, type(t).__name__) for i, t in enumerate(texts) if not isinstance(t, str)]
  if bad:
    raise TextEncoderError(f"encode takes strings; text {bad[0][0]} is a {bad[0][1]}")
  return texts


class TextEncoder:
  """Frozen text features for G-VUE's decoders; `spec` picks the kind (module docstring).

  `encode` runs at most `batch_size` texts at a time (a whole split's captions at once would
  hold RoBERTa's [B, T, 3072] activations for all of them); the last chunk is padded with
  empty texts to the same size, so one program serves every chunk.
  """

  def __init__(self, spec: str = DEFAULT_SPEC, batch_size: int = 256):
    kind, folder = _parse_spec(spec)
    if batch_size < 1:
      raise TextEncoderError(f"batch_size must be >= 1, got {batch_size}")
    self.spec, self.batch_size = spec, batch_size
    self._backend = HashedWords() if kind == "hashed_words" else RobertaWords(folder)
    self.dim: int = self._backend.dim

  def tokenize(self, texts: Sequence[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer ids the encoder runs on (bucket or vocabulary ids), and the mask."""
    if not isinstance(max_len, (int, np.integer)) or max_len < 1:
      raise TextEncoderError(f"max_len must be a positive integer, got {max_len!r}")
    return self._backend.tokenize(_check_texts(texts), int(max_len))

  def encode(self, texts: Sequence[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """texts -> (tokens float32 [B, max_len, dim], mask bool [B, max_len]), NumPy arrays;
    deterministic, and tokens are zero where mask is False."""
    ids, mask = self.tokenize(texts, max_len)
    if len(ids) <= self.batch_size:
      return np.asarray(self._backend.forward(ids, mask), np.float32), mask
    tokens = np.zeros((*ids.shape, self.dim), np.float32)
    filler_ids, filler_mask = self._backend.tokenize([""] * self.batch_size, int(max_len))
    for start in range(0, len(ids), self.batch_size):
      chunk = slice(start, start + self.batch_size)
      n = len(ids[chunk])
      chunk_ids, chunk_mask = filler_ids.copy(), filler_mask.copy()
      chunk_ids[:n], chunk_mask[:n] = ids[chunk], mask[chunk]
      tokens[chunk] = np.asarray(self._backend.forward(chunk_ids, chunk_mask))[:n]
    return tokens, mask


def load(spec: str = DEFAULT_SPEC) -> TextEncoder:
  return TextEncoder(spec)
