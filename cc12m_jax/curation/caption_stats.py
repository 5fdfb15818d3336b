"""Beam transforms that compute one dataset's caption statistics (curation.stats).

ReadCaptions reads the caption field of JSON Lines / Parquet shards;
CaptionStats turns captions into a single dict of counts. Every count is a
Beam combiner fed by per-bundle partial counts, so the work spreads over the
runner's workers and each combiner sees a key once per bundle, not once per
occurrence.
"""
from collections import Counter
import json
from typing import Any, Iterator, Mapping, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import window
import numpy as np
from tensorflow.core.example import example_pb2

from cc12m_jax.curation import words as words_lib

_LENGTH, _PERSON, _CLASS_HIT = "length", "person", "class_hit"


def _matching_files(pattern: str) -> list[str]:
  """Comma-separated globs -> the patterns, after checking each matches a file."""
  globs = [part.strip() for part in pattern.split(",") if part.strip()]
  if not globs:
    raise FileNotFoundError(f"no files match {pattern!r}")
  for glob in globs:
    if not FileSystems.match([glob])[0].metadata_list:
      raise FileNotFoundError(f"no files match {glob!r}")
  return globs


def _json_caption(path_and_line: tuple[str, str], field: str) -> str:
  path, line = path_and_line
  try:
    caption = json.loads(line)[field]
    if caption is not None and not isinstance(caption, str):
      raise TypeError(type(caption).__name__)
  except (ValueError, KeyError, TypeError) as e:
    raise ValueError(f"{path}: no string {field!r} in {line[:80]!r}") from e
  return caption or ""


def _record_captions(serialized: bytes) -> list[str]:
  """The captions of one feature record (a tf.train.Example, docs/record_format.md).

  Parsed with the protobuf alone: curation sits below cc12m_jax.data, and the
  stats need only the `captions` bytes list, not the record validator.
  """
  example = example_pb2.Example.FromString(serialized)
  feature = example.features.feature.get("captions")
  if feature is None:
    image_id = example.features.feature.get("image_id")
    name = image_id.bytes_list.value[0].decode(errors="replace") if image_id else "?"
    raise ValueError(f"feature record {name!r} has no 'captions'")
  return [c.decode("utf-8", errors="replace") for c in feature.bytes_list.value]


class ReadCaptions(beam.PTransform):
  """Comma-separated globs of JSON Lines / Parquet / feature-record shards -> their captions.

  A glob whose file name contains '.tfrecord' reads feature records (every
  caption of every record: COCO-style sources have several per image).
  """

  def __init__(self, pattern: str, field: str = "caption"):
    super().__init__()
    self.globs, self.field = _matching_files(pattern), field

  def expand(self, pbegin):
    parts = []
    for i, glob in enumerate(self.globs):
      name = glob.rsplit("/", 1)[-1]
      if ".tfrecord" in name:
        parts.append(pbegin
                     | f"ReadRecords{i}" >> beam.io.ReadFromTFRecord(glob)
                     | f"Captions{i}" >> beam.FlatMap(_record_captions))
      elif ".parquet" in name:  # anything else is read as JSON Lines
        parts.append(pbegin
                     | f"ReadParquet{i}" >> beam.io.ReadFromParquet(glob, columns=[self.field])
                     | f"Caption{i}" >> beam.Map(lambda row, f=self.field: row[f] or ""))
      else:
        parts.append(pbegin | f"ReadJsonl{i}" >> beam.io.ReadFromTextWithFilename(glob)
                     | f"SkipBlank{i}" >> beam.Filter(lambda path_line: path_line[1].strip())
                     | f"Caption{i}" >> beam.Map(_json_caption, self.field))
    return parts | "FlattenCaptions" >> beam.Flatten() if len(parts) > 1 else parts[0]


class _ClassMatcher:
  """Finds occurrences of (multi-word) classes in stemmed token sequences."""

  def __init__(self, classes: Sequence[str]):
    self.by_first: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for i, name in enumerate(classes):
      key = tuple(words_lib.stem(t) for t in words_lib.caption_tokens(name))
      if key:
        self.by_first.setdefault(key[0], []).append((i, key))

  def hits(self, stems: list[str]) -> Iterator[int]:
    """The class index of every occurrence, in order."""
    for pos, token in enumerate(stems):
      for index, key in self.by_first.get(token, ()):
        if tuple(stems[pos:pos + len(key)]) == key:
          yield index


class _BundleCountsFn(beam.DoFn):
  """captions -> per-bundle counts: (token, n) on the main output, (length, n),
  (class index, n) and the number of captions with <PERSON> on tagged outputs.

  Counting per bundle first keeps the global combiners cheap: they see each
  distinct key once per bundle instead of once per occurrence.
  """

  def __init__(self, classes: Sequence[str]):
    super().__init__()
    self.classes = list(classes)
    self._matcher = None

  def setup(self):
    self._matcher = _ClassMatcher(self.classes)

  def start_bundle(self):
    self._tokens, self._lengths, self._class_hits = Counter(), Counter(), Counter()
    self._persons = 0

  def process(self, caption: str) -> None:
    tokens = words_lib.caption_tokens(caption)
    self._tokens.update(tokens)
    self._lengths[len(tokens)] += 1
    self._persons += "<person>" in tokens
    self._class_hits.update(self._matcher.hits([words_lib.stem(t) for t in tokens]))

  def finish_bundle(self):
    as_output = window.GlobalWindows.windowed_value
    yield from map(as_output, self._tokens.items())
    for tag, counts in ((_LENGTH, self._lengths), (_CLASS_HIT, self._class_hits)):
      for key_count in counts.items():
        yield beam.pvalue.TaggedOutput(tag, as_output(key_count))
    yield beam.pvalue.TaggedOutput(_PERSON, as_output(self._persons))


def _by_count(token_count: tuple[str, int]) -> tuple[int, str]:
  """Top-k key: the count; ties at the cut go to the same token on every runner."""
  return token_count[1], token_count[0]


def _is_content(token_count: tuple[str, int]) -> bool:
  return token_count[0] not in words_lib.FUNCTION_WORDS and token_count[0].isalpha()


def _median_of_histogram(histogram: Mapping[int, int]) -> float:
  """Median of the values that `histogram` ({value: count}) describes."""
  n = sum(histogram.values())
  if not n:
    return 0.0
  ordered = sorted(histogram.items())

  def value_at(rank: int) -> int:
    seen = 0
    for value, count in ordered:
      seen += count
      if rank < seen:
        return value
    raise AssertionError(rank)

  return (value_at((n - 1) // 2) + value_at(n // 2)) / 2


def _assemble(_, *, lengths, persons, types, top, top_content, long_tail, class_hits,
              classes: Sequence[str], long_tail_words: Sequence[str]) -> dict[str, Any]:
  """The combiners' results -> one dataset's statistics."""
  pairs = sum(lengths.values())
  num_tokens = sum(length * count for length, count in lengths.items())
  class_counts = np.zeros(len(classes), np.int64)
  for index, count in class_hits.items():
    class_counts[index] = count
  per_million = class_counts * (1e6 / max(pairs, 1))
  ranked = lambda token_counts: [[t, n] for t, n in sorted(
      token_counts, key=lambda tn: (-tn[1], tn[0]))]
  return {
      "pairs": pairs,
      "tokens": num_tokens,
      "types": types,
      "token_type_ratio": num_tokens / max(types, 1),
      "mean_caption_length": num_tokens / max(pairs, 1),
      "median_caption_length": _median_of_histogram(lengths),
      "person_caption_share": persons / max(pairs, 1),
      "top_tokens": ranked(top),
      "top_content_tokens": ranked(top_content),
      "long_tail_words": {w: int(long_tail.get(w, 0)) for w in long_tail_words},
      "classes": {
          "num_classes": len(classes),
          "median_instances": float(np.median(class_counts)) if len(classes) else 0.0,
          "median_instances_per_1m": float(np.median(per_million)) if len(classes) else 0.0,
          "classes_with_any_instance": int((class_counts > 0).sum()),
          "instances": {c: int(n) for c, n in zip(classes, class_counts)},
      },
  }


class CaptionStats(beam.PTransform):
  """captions -> a PCollection of one dict: the dataset's statistics (keys above)."""

  def __init__(self, classes: Sequence[str], long_tail_words: Sequence[str], top_k: int = 25):
    super().__init__()
    self.classes, self.long_tail_words, self.top_k = list(classes), list(long_tail_words), top_k

  def expand(self, captions):
    parts = captions | "BundleCounts" >> beam.ParDo(_BundleCountsFn(self.classes)).with_outputs(
        _LENGTH, _PERSON, _CLASS_HIT, main="tokens")
    token_counts = parts.tokens | "SumTokens" >> beam.CombinePerKey(sum)
    wanted = frozenset(self.long_tail_words)
    singletons = {
        "lengths": (parts[_LENGTH] | "SumLengths" >> beam.CombinePerKey(sum)
                    | "LengthHistogram" >> beam.combiners.ToDict()),
        "persons": parts[_PERSON] | "SumPersons" >> beam.CombineGlobally(sum),
        "class_hits": (parts[_CLASS_HIT] | "SumClassHits" >> beam.CombinePerKey(sum)
                       | "ClassHits" >> beam.combiners.ToDict()),
        "types": token_counts | "CountTypes" >> beam.combiners.Count.Globally(),
        "top": token_counts | "TopTokens" >> beam.combiners.Top.Of(self.top_k, key=_by_count),
        "top_content": (token_counts | "ContentTokens" >> beam.Filter(_is_content)
                        | "TopContent" >> beam.combiners.Top.Of(self.top_k, key=_by_count)),
        "long_tail": (token_counts | "LongTail" >> beam.Filter(lambda tn: tn[0] in wanted)
                      | "LongTailCounts" >> beam.combiners.ToDict()),
    }
    return (captions.pipeline | "Once" >> beam.Create([None])
            | "Assemble" >> beam.Map(
                _assemble, classes=self.classes, long_tail_words=self.long_tail_words,
                **{name: beam.pvalue.AsSingleton(pc) for name, pc in singletons.items()}))
