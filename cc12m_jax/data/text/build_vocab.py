"""Builds the WordPiece vocabulary from the captions (and tags) of records.

    python -m cc12m_jax.data.text.build_vocab --data_dir=data/synthetic \
        --sources=cc3m,cc12m,coco_train --vocab_size=4000

Words come from the same PTB tokenizer the pipeline uses (`ptb_words`); the
sub-word inventory is learned by tensorflow_text's WordPiece learner
(tensorflow_text.tools.wordpiece_vocab, the learner behind
`bert_vocab_from_dataset`, fed our own word split so that vocabulary and
tokenizer agree). Deterministic: word counts are sorted before learning, so
the same corpus always gives the same file. Reserved tokens take ids 0..5.
"""
import collections
import os
from typing import Iterable, Sequence

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data.text import special_tokens as st
from cc12m_jax.data.text import tokenizer as tokenizer_lib
from cc12m_jax.data.text import vocab_file

VOCAB_FILE = "vocab.txt"


def count_words(texts: tf.data.Dataset) -> collections.Counter:
  """Counts PTB words of a dataset of strings (scalar elements)."""
  counts: collections.Counter = collections.Counter()
  words = texts.batch(1024).map(tokenizer_lib.ptb_words,
                                num_parallel_calls=tf.data.AUTOTUNE)
  for batch in words:
    counts.update(batch.flat_values.numpy().tolist())
  return collections.Counter({w.decode(): c for w, c in counts.items()})


def learn_vocab(word_counts: collections.Counter, vocab_size: int, *,
                lower_thresh: int = 5) -> list[str]:
  """WordPiece vocabulary (reserved tokens first) from word counts."""
  counts = {w: c for w, c in word_counts.items()
            if w not in st.RESERVED_TOKENS}
  ordered = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))
  vocab = learner.learn(ordered, vocab_size, list(st.RESERVED_TOKENS),
                        lower_thresh=lower_thresh,
                        include_joiner_token=True, joiner=st.WORDPIECE_SUFFIX)
  if tuple(vocab[:len(st.RESERVED_TOKENS)]) != st.RESERVED_TOKENS:
    raise RuntimeError(f"learner reordered reserved tokens: {vocab[:6]}")
  return vocab


def build_vocab_from_texts(texts: Iterable[str], vocab_size: int, *,
                           lower_thresh: int = 5) -> list[str]:
  ds = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))
  return learn_vocab(count_words(ds), vocab_size, lower_thresh=lower_thresh)


def record_texts(files: Sequence[str], include_tags: bool) -> tf.data.Dataset:
  """Captions (and tags) of records as a dataset of scalar strings."""
  spec = {"captions": tf.io.RaggedFeature(tf.string)}
  if include_tags:
    spec["tags"] = tf.io.RaggedFeature(tf.string)

  @tf.autograph.experimental.do_not_convert
  def texts(serialized):
    ex = tf.io.parse_example(serialized, spec)
    flat = [ex[k].flat_values for k in sorted(spec)]
    return tf.concat(flat, axis=0)

  ds = tf.data.TFRecordDataset(list(files)).batch(1024).map(texts)
  return ds.unbatch()


def write_vocab(vocab: Sequence[str], path: str) -> None:
  tf.io.gfile.makedirs(os.path.dirname(path) or ".")
  with tf.io.gfile.GFile(path, "w") as f:
    f.write("".join(token + "\n" for token in vocab))


def build_vocab(data_dir: str, sources: Sequence[str], vocab_size: int, *,
                output: str = "", include_tags: bool = True,
                lower_thresh: int = 5) -> str:
  """Learns the vocabulary of `sources` and writes it; returns its path."""
  files = [f for s in sources for f in metadata_lib.shard_files(data_dir, s)]
  counts = count_words(record_texts(files, include_tags))
  vocab = learn_vocab(counts, vocab_size, lower_thresh=lower_thresh)
  path = output or os.path.join(data_dir, VOCAB_FILE)
  write_vocab(vocab, path)
  logging.info("wrote %d tokens (%d distinct words seen) to %s", len(vocab),
               len(counts), path)
  return path


FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Root with one sub-directory per source.")
flags.DEFINE_list("sources", None, "Sources whose captions form the corpus.")
flags.DEFINE_integer("vocab_size", 4000, "Maximum vocabulary size.")
flags.DEFINE_string("output", "", "Vocabulary path; default <data_dir>/vocab.txt.")
flags.DEFINE_bool("include_tags", True, "Add tag strings to the corpus.")
flags.DEFINE_integer("lower_thresh", 5, "Learner's minimum piece count.")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  path = build_vocab(FLAGS.data_dir, FLAGS.sources, FLAGS.vocab_size,
                     output=FLAGS.output, include_tags=FLAGS.include_tags,
                     lower_thresh=FLAGS.lower_thresh)
  print(f"vocabulary: {path} ({len(vocab_file.load_vocab(path))} tokens)")


def run() -> None:
  flags.mark_flags_as_required(["data_dir", "sources"])
  app.run(main)


if __name__ == "__main__":
  run()
