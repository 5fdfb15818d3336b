"""Cheap, spaCy-free word handling shared by the filters, transforms and stats.

`words`: what the word-count, repetition and capitalization filters count:
whitespace-separated pieces that contain a letter or digit, with surrounding
punctuation (and a leading '#'/'@' of hashtags and handles) stripped.
`caption_tokens`: lower-cased tokens of a (transformed) caption, used by the
rare-word filter and the dataset statistics; `<PERSON>` stays whole and runs of
'#' (CC3M's digit abstraction) are tokens.
`stem`: a tiny suffix stripper so that image tags match simple morphological
variants of alt-text words (dogs/dog, running/run, berries/berry).
"""
import functools
import re

_PIECE_STRIP = "\"'`.,;:!?()[]{}<>«»“”‘’…-–—_*/\\|~^#@"
_HAS_ALNUM = re.compile(r"[^\W_]", re.UNICODE)
_TOKEN = re.compile(r"<person>|#+|[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


# Function words: ignored by the repetition / unique-word checks, which are
# about repeated *content* ("dog dog dog cute dog"), not about a caption using
# "a" twice ("a man and a woman on a bench").
FUNCTION_WORDS = frozenset(
    "a an the this that these those some any each every no all both of in on at with from "
    "for to by and or but nor so as is are was were be been being it its he she they we you "
    "i his her their our my your him them us me near over under into onto through during "
    "before after above below between behind beside across along around inside outside "
    "up down out off about against than then there here has have had do does did not "
    "very just also too can will would".split())


def content_words(lowered_words: list[str]) -> list[str]:
  return [w for w in lowered_words if w not in FUNCTION_WORDS]


def words(text: str) -> list[str]:
  """Words of `text` in order, case kept."""
  out = []
  for piece in text.split():
    piece = piece.strip(_PIECE_STRIP)
    if piece and _HAS_ALNUM.search(piece):
      out.append(piece)
  return out


def caption_tokens(text: str) -> list[str]:
  """Lower-cased word tokens; '<PERSON>' -> '<person>', '####' kept as a token."""
  return _TOKEN.findall(text.lower())


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
  """Strips one common English inflection: plural -s/-es/-ies, -ing, -ed."""
  w = word.lower()
  if len(w) > 4 and w.endswith("ies"):
    return w[:-3] + "y"
  if len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes", "zes")):
    return w[:-2]
  if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
    return w[:-1]
  if len(w) > 5 and w.endswith("ing"):
    w = w[:-3]
    return w[:-1] if len(w) > 2 and w[-1] == w[-2] else w
  if len(w) > 4 and w.endswith("ed"):
    w = w[:-2]
    return w[:-1] if len(w) > 2 and w[-1] == w[-2] else w
  return w
