"""The WordPiece vocabulary file: one token per line, the reserved tokens first.

Read through etils.epath (local paths and gs://), not TensorFlow, so a run's
vocabulary size resolves where only JAX is installed (core/run_setup.py).
"""
from etils import epath

from cc12m_jax.data.text import special_tokens as st


def load_vocab(path: str) -> list[str]:
  """The tokens of `path`, in id order; an error naming the file if the
  reserved tokens do not come first."""
  # Lines end at "\n" only: a token may hold any other character.
  vocab = epath.Path(path).read_text().split("\n")
  if vocab and vocab[-1] == "":
    vocab.pop()
  if tuple(vocab[:len(st.RESERVED_TOKENS)]) != st.RESERVED_TOKENS:
    raise ValueError(
        f"{path}: a vocabulary must start with the reserved tokens "
        f"{list(st.RESERVED_TOKENS)}, got {vocab[:len(st.RESERVED_TOKENS)]}")
  return vocab
