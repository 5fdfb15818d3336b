"""A spaCy-free English check for alt-texts.

Two conditions, both cheap and documented in docs/curation.md:
1. Script: among letters, the share that are ASCII Latin (a-z, A-Z) is at least
   `min_latin_letter_ratio` (rejects CJK, Cyrillic, Arabic, ...; accents of a
   borrowed word or two still pass). Text with no letters at all fails.
2. Function words: the text has at least `min_english_function_words` English
   function words, and no fewer than the most frequent other Latin-script
   language's function words (tells French/Spanish/German/... apart).
"""
import re

from cc12m_jax.curation import words as words_lib

ENGLISH = frozenset(
    "a an the this that these those of in on at with from for to by and or but is are was "
    "were be been it its his her their our my your near over under into onto through during "
    "before after above below between behind beside across along around inside outside".split())
OTHER_LANGUAGES = {
    "french": frozenset("le la les un une des du au aux et est sur dans avec pour par sous "
                        "chez ce cette ces".split()),
    "spanish": frozenset("el los las una unos unas y en con por para del es sobre bajo "
                         "entre este esta estos".split()),
    "german": frozenset("der die das ein eine einen und ist mit auf im dem den zum zur von "
                        "für unter über".split()),
    "italian": frozenset("il lo gli uno una della dello delle degli nel nella con per sul "
                         "sulla tra fra".split()),
    "portuguese": frozenset("o os uma umas um uns e em com do da dos das no na nos nas "
                            "para pelo pela".split()),
    "dutch": frozenset("de het een en van op met voor bij uit naar onder over".split()),
}


_ASCII_LETTER = re.compile(r"[A-Za-z]")


def latin_letter_ratio(text: str) -> float:
  if text.isascii():  # fast path: the common case
    return 1.0 if _ASCII_LETTER.search(text) else 0.0
  letters = [ch for ch in text if ch.isalpha()]
  if not letters:
    return 0.0
  return sum(1 for ch in letters if ch.isascii()) / len(letters)


def is_english(text: str, min_latin_letter_ratio: float, min_function_words: int) -> bool:
  if latin_letter_ratio(text) < min_latin_letter_ratio:
    return False
  lowered = [w.lower() for w in words_lib.words(text)]
  english = sum(1 for w in lowered if w in ENGLISH)
  if english < min_function_words:
    return False
  other = max(sum(1 for w in lowered if w in vocab) for vocab in OTHER_LANGUAGES.values())
  # Words shared by several languages ('a', 'in', 'de') count for each; a tie
  # goes to English.
  return english >= other
