"""Where CC3M-style hypernyms come from (docs/curation.md, "Hypernyms").

For an entity span with a spaCy label, in this order:
1. the user table (config transform.hypernym_table, JSON {"entity text": "hypernym"},
   case-insensitive), e.g. brands: {"chevrolet": "car"};
2. WordNet 3.0 (wordnet.py): the entity's hypernym chain, accepted only when it
   agrees with the label (a PERSON chain must contain 'person', a place chain a
   place root, ...), which rejects wrong first senses (Elvis -> LSD). The chain's
   first lemma found in COARSE gives the answer (Tokyo: 'national capital' ->
   'city'); otherwise the nearest hypernym (Albert Einstein -> 'physicist').
   Only the full entity text is looked up (a surname alone names too many
   people: 'Emma Davis' is not the navigator John Davis);
3. the entity-type table TYPE_FALLBACK (PERSON -> 'person', GPE -> 'place', ...).
"""
import json
import os
from typing import Optional

from cc12m_jax.curation.wordnet import WordNetNouns

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"

TYPE_FALLBACK = {
    "PERSON": "person",
    "ORG": "organization",
    "GPE": "place",
    "LOC": "location",
    "FAC": "building",
    "NORP": "group",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "artwork",
}

# WordNet chain roots that confirm a sense is of the entity's type.
_LABEL_ROOTS = {
    "PERSON": {"person"},
    "GPE": {"location", "region", "land"},
    "LOC": {"location", "region", "land", "body of water", "geological formation"},
    "FAC": {"structure", "location", "way"},
    "ORG": {"organization", "social group", "institution"},
    "NORP": {"people", "social group"},
}

# Coarse, caption-friendly hypernyms for WordNet lemmas seen on the chains.
COARSE = {
    "national capital": "city", "state capital": "city", "provincial capital": "city",
    "capital": "city", "city": "city", "town": "town", "village": "village",
    "country": "country", "state": "state", "province": "province", "continent": "continent",
    "island": "island", "river": "river", "lake": "lake", "sea": "sea", "ocean": "ocean",
    "desert": "desert", "mountain peak": "mountain", "mountain": "mountain",
    "range": "mountain range", "volcano": "volcano", "waterfall": "waterfall",
    "bridge": "bridge", "building": "building", "university": "university",
    "company": "company",
}


def resolve_wordnet_dir(setting: str) -> str:
  """'' disables WordNet; 'auto' uses the Debian path when present."""
  if setting == "auto":
    return DEFAULT_WORDNET_DIR if os.path.isdir(DEFAULT_WORDNET_DIR) else ""
  return setting


class Hypernymizer:
  """Maps (entity text, spaCy label) to a hypernym string."""

  def __init__(self, wordnet_dir: str = "", table_path: str = ""):
    self.wordnet = WordNetNouns(wordnet_dir) if wordnet_dir else None
    self.table: dict[str, str] = {}
    if table_path:
      with open(table_path, encoding="utf-8") as f:
        table = json.load(f)
      if not isinstance(table, dict) or not all(
          isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise ValueError(f"hypernym table {table_path!r} (config transform.hypernym_table) "
                         "must be a JSON object of strings")
      self.table = {k.lower(): v for k, v in table.items()}

  def _from_wordnet(self, text: str, label: str) -> Optional[str]:
    roots = _LABEL_ROOTS.get(label)
    if self.wordnet is None or roots is None:
      return None
    chain = self.wordnet.hypernym_chain(text)
    if not chain or not roots.intersection(chain):
      return None
    for lemma in chain:
      if lemma in COARSE:
        return COARSE[lemma]
    return chain[0]

  def __call__(self, text: str, label: str) -> str:
    key = text.strip().lower()
    if key in self.table:
      return self.table[key]
    found = self._from_wordnet(key, label)
    if found:
      return found
    return TYPE_FALLBACK.get(label, label.lower())
