"""Caption tokenization: PTB-style words, then WordPiece sub-words.

Words: as the COCO caption tools do it: lower-case, punctuation split off as
its own token, English clitics split ("dog's" -> "dog 's", "don't" ->
"do n't"), and the `<PERSON>` placeholder kept whole. The same rewrite rules
run in Python (`ptb_tokenize`, with `re`) and in-graph (`ptb_words`, with
tf.strings / RE2), so host-side and tf.data tokenization agree.

Sub-words: WordPiece over those words (vocabulary built by
cc12m_jax.data.text.build_vocab), tokenized in-graph with tensorflow_text's
FastWordpieceTokenizer. Ids 0..5 are the reserved tokens of special_tokens.
"""
import re
from typing import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from cc12m_jax.data.text import special_tokens as st
from cc12m_jax.data.text import vocab_file

# A control character that never survives into words: `<PERSON>` is swapped
# for it before punctuation splitting (which would break up `<`, `>`), so
# that "<PERSON>'s" splits like a word ("<PERSON> 's"), and swapped back
# after.
_SENTINEL = "\x1a"
_PUNCT = r"""([.,!?;:"()\[\]{}<>#@$%&*+=/\\|~^`_])"""
# (pattern, replacement) pairs valid for both Python `re` and RE2; applied in
# order after lower-casing.
_RULES = (
    (_PUNCT, r" \1 "),
    (r"(^|\s)'", r"\1' "),   # opening quote
    (r"'(\s|$)", r" '\1"),   # closing quote
    (r"(n't|'s|'re|'ve|'ll|'d|'m)\b", r" \1"),  # clitics
)
_PERSON_PATTERN = r"(?i)<person>"


def ptb_tokenize(text: str) -> list[str]:
  """PTB-style words of a caption (lower-case; `<PERSON>` kept whole)."""
  text = text.replace(_SENTINEL, " ")
  text = re.sub(_PERSON_PATTERN, _SENTINEL, text)
  text = text.lower()
  for pattern, replacement in _RULES:
    text = re.sub(pattern, replacement, text)
  text = text.replace(_SENTINEL, f" {_SENTINEL} ")
  return [st.PERSON if w == _SENTINEL else w for w in text.split()]


def ptb_words(strings: tf.Tensor) -> tf.RaggedTensor:
  """In-graph ptb_tokenize: str [B] -> RaggedTensor str [B, (W)]."""
  x = tf.strings.regex_replace(strings, _SENTINEL, " ")
  x = tf.strings.regex_replace(x, _PERSON_PATTERN, _SENTINEL)
  x = tf.strings.lower(x, encoding="utf-8")
  for pattern, replacement in _RULES:
    x = tf.strings.regex_replace(x, pattern, replacement)
  x = tf.strings.regex_replace(x, _SENTINEL, f" {_SENTINEL} ")
  words = tf.strings.split(x)                                   # [B, (W)]
  flat = words.flat_values
  return words.with_flat_values(
      tf.where(flat == _SENTINEL, st.PERSON, flat))


def decoder_arrays(token_ids: tf.RaggedTensor, max_len: int
                   ) -> tuple[tf.Tensor, tf.Tensor]:
  """Teacher-forcing arrays from sub-word ids (no BOS/EOS) [N, (P)].

  Keeps the first max_len - 1 pieces y; returns
    decoder_inputs  i32 [N, L] = [BOS] y, 0-padded;
    decoder_targets i32 [N, L] = y [EOS], 0-padded.
  """
  y = tf.cast(token_ids[:, :max_len - 1], tf.int32)             # [N, (<L)]
  n = y.nrows()
  bos = tf.fill([n, 1], st.BOS_ID)
  eos = tf.fill([n, 1], st.EOS_ID)
  inputs = tf.concat([bos, y], axis=1).to_tensor(
      default_value=st.PAD_ID, shape=[None, max_len])          # [N, L]
  targets = tf.concat([y, eos], axis=1).to_tensor(
      default_value=st.PAD_ID, shape=[None, max_len])          # [N, L]
  return inputs, targets


class SubwordTokenizer:
  """WordPiece tokenizer over PTB words; usable in Python and in tf.data."""

  def __init__(self, vocab_path: str):
    self.vocab_path = vocab_path
    self.vocab = vocab_file.load_vocab(vocab_path)
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=self.vocab, suffix_indicator=st.WORDPIECE_SUFFIX,
        max_bytes_per_word=100, token_out_type=tf.int32,
        unknown_token=st.UNK, no_pretokenization=True)

  @property
  def vocab_size(self) -> int:
    return len(self.vocab)

  def tf_tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
    """str [B] -> RaggedTensor i32 [B, (P)] of sub-word ids (no BOS/EOS)."""
    words = ptb_words(strings)                                  # [B, (W)]
    pieces = self._wordpiece.tokenize(words)                    # [B, (W), (P)]
    return pieces.merge_dims(1, 2)                              # [B, (P)]

  def tf_tokenize_tags(self, tags: tf.Tensor, max_tokens: int) -> tf.Tensor:
    """str [B, T] -> i32 [B, T, K]: the first K pieces of each tag, 0-padded.

    Tags repeat a lot within a batch (a few hundred distinct strings among
    B*T), so only the distinct ones are tokenized.
    """
    t = tags.shape[1]
    unique, index = tf.unique(tf.reshape(tags, [-1]))           # [U], [B*T]
    ids = self.tf_tokenize(unique)[:, :max_tokens]              # [U, (<=K)]
    ids = ids.to_tensor(default_value=st.PAD_ID,
                        shape=[None, max_tokens])               # [U, K]
    return tf.reshape(tf.gather(ids, index), [-1, t, max_tokens])  # [B,T,K]

  def encode(self, text: str) -> list[int]:
    return self.tf_tokenize(tf.constant([text]))[0].numpy().tolist()

  def encode_captions(self, captions: Sequence[str], max_len: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(decoder_inputs, decoder_targets), each i32 [N, max_len]."""
    ids = self.tf_tokenize(tf.constant(list(captions), tf.string))
    inputs, targets = decoder_arrays(ids, max_len)
    return inputs.numpy(), targets.numpy()

  def decode(self, ids: Sequence[int]) -> str:
    """Caption text of ids: stops at EOS, drops PAD/BOS, joins word pieces."""
    words: list[str] = []
    for i in np.asarray(ids).reshape(-1).tolist():
      if i == st.EOS_ID:
        break
      if i in (st.PAD_ID, st.BOS_ID):
        continue
      piece = self.vocab[i] if 0 <= i < len(self.vocab) else st.UNK
      if piece.startswith(st.WORDPIECE_SUFFIX) and words:
        words[-1] += piece[len(st.WORDPIECE_SUFFIX):]
      else:
        words.append(piece)
    return " ".join(words)

  def decode_batch(self, ids: np.ndarray) -> list[str]:
    return [self.decode(row) for row in np.asarray(ids)]
