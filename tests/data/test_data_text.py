"""PTB words, WordPiece vocabulary determinism, SubwordTokenizer."""
import os

import numpy as np
import pytest
import tensorflow as tf

from cc12m_jax.data.text import build_vocab as build_vocab_lib
from cc12m_jax.data.text import special_tokens as st
from cc12m_jax.data.text import tokenizer as tokenizer_lib
from cc12m_jax.data.text import vocab_file as vocab_file_lib

CORPUS = ([
    "A dog plays with a frisbee in the park.",
    "Two dogs, one cat and a red accordion!",
    "<PERSON> plays the accordion in Zanzibar #music",
    "the dog's bone isn't on the table",
] * 6) + ["a mangosteen and a jellyfish"]

TEXTS = [
    "A dog's bone, on the <PERSON>'s table!",
    "Don't \"quote\" 'this' #jellyfish $5.99",
    "<person> and <PERSON> meet x<PERSON>y",
    "Hello\x1aworld  t-shirt (large)",
    "",
]


def test_ptb_tokenize():
  assert tokenizer_lib.ptb_tokenize(TEXTS[0]) == [
      "a", "dog", "'s", "bone", ",", "on", "the", "<PERSON>", "'s", "table",
      "!"]
  assert tokenizer_lib.ptb_tokenize(TEXTS[1]) == [
      "do", "n't", '"', "quote", '"', "'", "this", "'", "#", "jellyfish", "$",
      "5", ".", "99"]
  assert tokenizer_lib.ptb_tokenize(TEXTS[2]) == [
      "<PERSON>", "and", "<PERSON>", "meet", "x", "<PERSON>", "y"]
  assert tokenizer_lib.ptb_tokenize(TEXTS[3]) == [
      "hello", "world", "t-shirt", "(", "large", ")"]


def test_in_graph_words_match_python():
  words = tokenizer_lib.ptb_words(tf.constant(TEXTS)).to_list()
  assert [[w.decode() for w in row] for row in words] == [
      tokenizer_lib.ptb_tokenize(t) for t in TEXTS]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  vocab = build_vocab_lib.build_vocab_from_texts(CORPUS, 200, lower_thresh=2)
  path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
  build_vocab_lib.write_vocab(vocab, path)
  return path


def test_vocab_is_deterministic_and_reserved_first(vocab_file):
  again = build_vocab_lib.build_vocab_from_texts(CORPUS, 200, lower_thresh=2)
  assert vocab_file_lib.load_vocab(vocab_file) == again
  assert tuple(again[:6]) == st.RESERVED_TOKENS
  assert len(set(again)) == len(again)
  assert "accordion" in again and "##s" in again


def test_load_vocab_rejects_wrong_reserved(tmp_path):
  path = str(tmp_path / "v.txt")
  build_vocab_lib.write_vocab(["[PAD]", "[EOS]", "[BOS]", "a"], path)
  with pytest.raises(ValueError, match="reserved tokens"):
    vocab_file_lib.load_vocab(path)


def test_encode_decode(vocab_file):
  tok = tokenizer_lib.SubwordTokenizer(vocab_file)
  ids = tok.encode("<PERSON> plays the accordions in Zanzibar")
  assert ids[0] == st.PERSON_ID
  assert st.UNK_ID not in ids
  assert tok.decode(ids) == "<PERSON> plays the accordions in zanzibar"
  # Stops at EOS and drops PAD / BOS.
  assert tok.decode([st.BOS_ID] + ids[:2] + [st.EOS_ID] + ids[2:]
                    + [st.PAD_ID]) == "<PERSON> plays"
  # Unknown characters become [UNK].
  assert st.UNK_ID in tok.encode("a dog ☃")
  # In-graph tokenization equals encode().
  ragged = tok.tf_tokenize(tf.constant(CORPUS[:3])).to_list()
  assert ragged == [tok.encode(t) for t in CORPUS[:3]]


def test_encode_captions_teacher_forcing(vocab_file):
  tok = tokenizer_lib.SubwordTokenizer(vocab_file)
  long_caption = " ".join(["dog"] * 50)
  inputs, targets = tok.encode_captions(["a dog", long_caption], max_len=36)
  assert inputs.shape == targets.shape == (2, 36)
  assert inputs.dtype == targets.dtype == np.int32
  y = tok.encode("a dog")
  assert inputs[0, :3].tolist() == [st.BOS_ID] + y
  assert targets[0, :3].tolist() == y + [st.EOS_ID]
  assert not inputs[0, 3:].any() and not targets[0, 3:].any()
  # Truncated to 35 pieces + EOS (36 including EOS).
  assert targets[1, -1] == st.EOS_ID and (targets[1, :-1] != 0).all()
  assert inputs[1, 0] == st.BOS_ID
  np.testing.assert_array_equal(inputs[1, 1:], targets[1, :-1])


def test_tag_tokens(vocab_file):
  tok = tokenizer_lib.SubwordTokenizer(vocab_file)
  tags = tf.constant([["dog", "red accordion", ""], ["cat", "dog", "dog"]])
  out = tok.tf_tokenize_tags(tags, 2).numpy()
  assert out.shape == (2, 3, 2)
  assert out[0, 0].tolist() == tok.encode("dog")[:2] + [0] * (
      2 - len(tok.encode("dog")[:2]))
  assert out[0, 1].tolist() == tok.encode("red accordion")[:2]
  assert not out[0, 2].any()
  np.testing.assert_array_equal(out[1, 1], out[1, 2])


def test_build_vocab_cli_is_deterministic(tiny_world, tmp_path):
  cfg, data_dir, _ = tiny_world
  paths = []
  for name in ("a.txt", "b.txt"):
    paths.append(build_vocab_lib.build_vocab(
        data_dir, ["cc3m", "coco_train"], 300, output=str(tmp_path / name)))
  a, b = (open(p, "rb").read() for p in paths)
  assert a == b and a.startswith(b"[PAD]\n[BOS]\n[EOS]\n[UNK]\n[MASK]\n<PERSON>\n")
  assert os.path.getsize(paths[0]) > 100
