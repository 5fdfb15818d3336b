"""Sentiment-polarity check of the CC3M preset, from a small built-in lexicon.

CC3M dropped alt-texts with strong sentiment (opinions are not descriptions of
the image). We use the share of words that belong to a compact opinion lexicon
(positive and negative evaluative words frequent in web alt-texts); the
threshold is `text.max_opinion_word_ratio`. The lexicon is ours, written for
this project; replace or extend it with a config-free subclass if needed.
"""
POSITIVE = frozenset(
    "amazing awesome beautiful best brilliant cute delightful excellent fabulous fantastic "
    "favorite favourite glorious gorgeous great incredible lovely magnificent marvelous "
    "marvellous nice perfect pretty stunning superb terrific wonderful adorable breathtaking "
    "love loved lovely wow yummy delicious".split())
NEGATIVE = frozenset(
    "awful bad boring disgusting dreadful gross hate hated horrible horrific nasty pathetic "
    "poor sad stupid terrible ugly worst worse annoying disappointing lame".split())
OPINION = POSITIVE | NEGATIVE


def opinion_word_ratio(lowered_words: list[str]) -> float:
  if not lowered_words:
    return 0.0
  return sum(1 for w in lowered_words if w in OPINION) / len(lowered_words)


def polarity(lowered_words: list[str]) -> float:
  """(positive - negative) / words, in [-1, 1]; reported in the statistics."""
  if not lowered_words:
    return 0.0
  pos = sum(1 for w in lowered_words if w in POSITIVE)
  neg = sum(1 for w in lowered_words if w in NEGATIVE)
  return (pos - neg) / len(lowered_words)
