"""A minimal reader of the WordNet 3.0 noun database (no NLTK download needed).

Reads `index.noun` and `data.noun` from a WordNet database directory (Debian/
Ubuntu: `apt-get install wordnet-base` -> /usr/share/wordnet) and answers the
one question hypernymization asks: the hypernym chain of a proper noun. For an
instance ("Tokyo") WordNet stores an instance-hypernym pointer ('@i',
"national capital"); above that come ordinary hypernyms ('@', "capital" ->
"seat" -> ...). Only the first (most frequent) sense is used.
"""
import os
from typing import Optional

_INDEX = "index.noun"
_DATA = "data.noun"


class WordNetNouns:
  """Lazily indexed noun database; `hypernym_chain('Tokyo')`."""

  def __init__(self, directory: str):
    for name in (_INDEX, _DATA):
      if not os.path.isfile(os.path.join(directory, name)):
        raise FileNotFoundError(
            f"WordNet database file {name!r} not found in {directory!r} "
            "(config transform.wordnet_dir; apt-get install wordnet-base)")
    self.directory = directory
    self._index: Optional[dict[str, int]] = None
    self._data = None

  def _load_index(self) -> dict[str, int]:
    if self._index is None:
      index = {}
      with open(os.path.join(self.directory, _INDEX), encoding="utf-8") as f:
        for line in f:
          if line.startswith(" "):  # licence header
            continue
          fields = line.split()
          num_pointer_types = int(fields[3])
          # lemma pos synset_cnt p_cnt [ptr]*p_cnt sense_cnt tagsense_cnt offsets...
          index[fields[0]] = int(fields[4 + num_pointer_types + 2])
      self._index = index
    return self._index

  def _synset(self, offset: int) -> tuple[list[str], list[tuple[str, int]]]:
    """(lemmas, [(pointer symbol, target offset)]) of the synset at `offset`."""
    if self._data is None:
      self._data = open(os.path.join(self.directory, _DATA), "rb")  # pylint: disable=consider-using-with
    self._data.seek(offset)
    fields = self._data.readline().decode("utf-8").split(" | ")[0].split()
    num_words = int(fields[3], 16)
    lemmas = [fields[4 + 2 * i] for i in range(num_words)]
    k = 4 + 2 * num_words
    pointers = [(fields[k + 1 + 4 * i], int(fields[k + 2 + 4 * i]))
                for i in range(int(fields[k]))]
    return lemmas, pointers

  def hypernym_chain(self, name: str, max_depth: int = 8) -> list[str]:
    """Lower-case hypernym lemmas, nearest first; [] when `name` is unknown.

    'Tokyo' -> ['national capital', 'capital', 'seat', ...]. Follows the first
    hypernym pointer at each level ('@i' for the instance, then '@').
    """
    offset = self._load_index().get(name.strip().lower().replace(" ", "_"))
    chain: list[str] = []
    while offset is not None and len(chain) < max_depth:
      _, pointers = self._synset(offset)
      parents = [target for symbol, target in pointers if symbol in ("@i", "@")]
      if not parents:
        break
      offset = parents[0]
      lemmas, _ = self._synset(offset)
      chain.append(lemmas[0].lower().replace("_", " "))
    return chain

  def __getstate__(self):  # picklable for Beam: reopen lazily on the worker
    return {"directory": self.directory, "_index": None, "_data": None}
