"""Which concepts a caption names: surface forms, plurals, synonyms, whole words only.

Novel-object captioning work scores a caption by whether it *mentions* the
objects an image shows (mention recall / F1). A concept here is a canonical
name with synonyms; each name may be several words ("hot dog", "fire
hydrant"). A caption names the concept when one of its surface forms occurs
as a run of whole words:

  * words are lower-cased runs of letters and digits ("hot-dog" is the two
    words "hot dog"), so "cat" never matches inside "category" or "bobcat";
  * the last word of a form may be plural ("hot dogs", "buses", "berries",
    "knives", irregular "men", "mice", ...);
  * overlapping forms resolve longest first, left to right: in "a hot dog
    stand" the concept "hot dog" is named and "dog" is not.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Mapping, Sequence

_WORD = re.compile(r"[a-z0-9]+")
_IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "person": "people", "child": "children",
    "mouse": "mice", "foot": "feet", "tooth": "teeth", "goose": "geese",
    "ox": "oxen", "louse": "lice", "die": "dice", "cactus": "cacti",
}
_SAME_PLURAL = frozenset({"sheep", "fish", "deer", "moose", "bison", "series", "species",
                          "aircraft", "salmon", "trout", "shrimp", "squid"})
_F_TO_VES = frozenset({"knife", "leaf", "wolf", "shelf", "loaf", "calf", "half", "scarf",
                       "wife", "life", "thief", "elf"})


def words(text: str) -> list[str]:
  """Lower-cased whole words (letters and digits) of `text`."""
  return _WORD.findall(text.lower())


def plurals(word: str) -> set[str]:
  """English plural forms of one word (regular rules, common irregulars)."""
  if word in _IRREGULAR_PLURALS:
    return {_IRREGULAR_PLURALS[word]}
  if word in _SAME_PLURAL:
    return {word}
  forms = set()
  if word in _F_TO_VES:
    forms.add(word[:-2] + "ves" if word.endswith("fe") else word[:-1] + "ves")
  if word.endswith(("s", "x", "z", "ch", "sh")):
    forms.add(word + "es")
  elif word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
    forms.add(word[:-1] + "ies")
  elif word.endswith("o") and len(word) > 1 and word[-2] not in "aeiou":
    forms.update({word + "es", word + "s"})  # potatoes, photos
  else:
    forms.add(word + "s")
  return forms


@dataclasses.dataclass(frozen=True)
class Concept:
  name: str                       # canonical name
  synonyms: tuple[str, ...] = ()  # other names for it


class ConceptMatcher:
  """Finds the concepts a caption names (see the module docstring)."""

  def __init__(self, concepts: Iterable[Concept]):
    self.concepts = list(concepts)
    # Surface form (tuple of words) -> concept name; longer forms first.
    forms: dict[tuple[str, ...], str] = {}
    for concept in self.concepts:
      for name in (concept.name, *concept.synonyms):
        base = tuple(words(name))
        if not base:
          raise ValueError(f"concept {concept.name!r}: name {name!r} has no words")
        variants = [base] + [base[:-1] + (p,) for p in plurals(base[-1])]
        for form in variants:
          owner = forms.setdefault(form, concept.name)
          if owner != concept.name:
            raise ValueError(f"{' '.join(form)!r} names both {owner!r} and {concept.name!r}")
    self._forms = forms
    self._longest = max((len(f) for f in forms), default=0)

  def mentions(self, caption: str) -> set[str]:
    """Names of the concepts `caption` names."""
    tokens = words(caption)
    found, i = set(), 0
    while i < len(tokens):
      for n in range(min(self._longest, len(tokens) - i), 0, -1):
        name = self._forms.get(tuple(tokens[i:i + n]))
        if name is not None:
          found.add(name)
          i += n
          break
      else:
        i += 1
    return found


def load_concept_list(path: str) -> list[Concept]:
  """A concept list file: one concept a line, `name` or `name<TAB>synonym|synonym`."""
  concepts = []
  with open(path, encoding="utf-8") as f:
    for line_number, line in enumerate(f, 1):
      line = line.rstrip("\n")
      if not line.strip() or line.startswith("#"):
        continue
      name, _, rest = line.partition("\t")
      if not words(name):
        raise ValueError(f"{path}:{line_number}: no concept name in {line!r}")
      concepts.append(Concept(name.strip().lower(),
                              tuple(s.strip().lower() for s in rest.split("|") if s.strip())))
  return concepts


def image_concepts_from_references(references: Mapping[str, Sequence[str]],
                                   matcher: ConceptMatcher,
                                   min_mentions: int = 1) -> dict[str, set[str]]:
  """{image: concepts named by at least `min_mentions` of its reference captions}.

  For real data, where an image's concepts are known only through what its
  annotators wrote (nocaps: 10 references per image).
  """
  out = {}
  for image_id, captions in references.items():
    counts: dict[str, int] = {}
    for caption in captions:
      for name in matcher.mentions(caption):
        counts[name] = counts.get(name, 0) + 1
    out[image_id] = {name for name, n in counts.items() if n >= min_mentions}
  return out
