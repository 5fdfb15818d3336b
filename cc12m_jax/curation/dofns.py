"""The Beam DoFns of the curation pipeline (pipeline.py wires them).

Work is fused into few DoFns because per-element Beam overhead would otherwise
rival spaCy's cost (benchmarks/curation.py):
  FilterFn     parse + exclusion + image + surface-text + image-text checks;
  NlpFn        spaCy on batches (`nlp.pipe`), POS checks, transforms;
  RareWordFn   rare-word check against the corpus-wide rare-token set.
Every element leaves each DoFn either on the main output or on REJECTED as
(id, reason), and bumps a Beam counter named after its fate (progress in any
runner's UI; totals reconcile: input = kept + rejections).
"""
import logging
import time
from collections import Counter
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import window
import ml_collections

from cc12m_jax.curation import candidates as candidates_lib
from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import hypernyms as hypernyms_lib
from cc12m_jax.curation import image_filter
from cc12m_jax.curation import nlp as nlp_lib
from cc12m_jax.curation import tag_overlap
from cc12m_jax.curation import text_filter
from cc12m_jax.curation import transforms
from cc12m_jax.curation import words as words_lib

NAMESPACE = "curation"
REJECTED = "rejected"


class _CountingDoFn(beam.DoFn):
  """Counters created on first use (names depend on the reasons seen)."""

  def __init__(self):
    super().__init__()
    self._counters = {}

  def _count(self, name: str, n: int = 1) -> None:
    counter = self._counters.get(name)
    if counter is None:
      counter = self._counters[name] = Metrics.counter(NAMESPACE, name)
    counter.inc(n)

  def _reject(self, record_id: str, reason: str) -> beam.pvalue.TaggedOutput:
    self._count("rejected/" + reason)
    return beam.pvalue.TaggedOutput(REJECTED, (record_id, reason))


def exclusion_keys(record: dict[str, Any]) -> list[str]:
  """Keys under which a dataset's record excludes candidates of another: id, url, sha256."""
  keys = []
  for field, prefix in (("id", "id:"), ("url", "url:"), ("image_url", "url:"),
                        ("image_sha256", "sha:")):
    value = record.get(field)
    if isinstance(value, str) and value:
      keys.append(prefix + value)
  return keys


class FilterFn(_CountingDoFn):
  """Raw record -> Candidate with its `words`, or a rejection (all pre-NLP checks)."""

  def __init__(self, config: ml_collections.ConfigDict):
    super().__init__()
    self.config = config_lib.frozen(config)

  def process(self, raw: Any, excluded: Iterable[str] = ()) -> Iterator[Any]:
    self._count("input")
    candidate = candidates_lib.parse_candidate(raw)
    if isinstance(candidate, str):
      record_id = raw.get("id") if isinstance(raw, dict) else None
      yield self._reject(str(record_id or ""), candidate)
      return
    record_id = candidate["id"]
    if excluded and any(key in excluded for key in exclusion_keys(candidate)):
      yield self._reject(record_id, "excluded/in_other_dataset")
      return
    reason = image_filter.image_rejection(candidate, self.config.image)
    if reason is None and len(candidate["alt_text"]) > self.config.text.max_chars:
      reason = "text/too_many_chars"
    if reason is None:
      text_words = words_lib.words(candidate["alt_text"])
      reason = text_filter.surface_rejection(candidate["alt_text"], text_words, self.config.text)
    if reason is None:
      reason = tag_overlap.tag_overlap_rejection(text_words, candidate["tags"],
                                                 self.config.image_text)
    if reason is not None:
      yield self._reject(record_id, reason)
      return
    yield candidate


class NlpFn(_CountingDoFn):
  """Batches of Candidates -> transformed captions; spaCy loaded once in setup()."""

  def __init__(self, config: ml_collections.ConfigDict):
    super().__init__()
    self.config = config_lib.frozen(config)
    self._nlp = None
    self._hypernym = None
    self._done = 0
    self._last_log = 0.0
    self._start = 0.0

  def setup(self):
    self._nlp = nlp_lib.load(self.config.nlp.model, self.config.nlp.disable)
    t = self.config.transform
    if t.person == "hypernym" or t.hypernymize_labels:
      self._hypernym = hypernyms_lib.Hypernymizer(
          hypernyms_lib.resolve_wordnet_dir(t.wordnet_dir), t.hypernym_table)
    self._start = self._last_log = time.time()

  def _progress(self, n: int) -> None:
    self._done += n
    now = time.time()
    if now - self._last_log >= self.config.beam.progress_every_s:
      self._last_log = now
      logging.info("curation worker: %d candidates through spaCy (%.1f/s)",
                   self._done, self._done / max(now - self._start, 1e-9))

  def process(self, batch: list[dict[str, Any]]) -> Iterator[Any]:
    analyses = nlp_lib.analyze(self._nlp, (c["alt_text"] for c in batch),
                               self.config.nlp.batch_size)
    for candidate, analysis in zip(batch, analyses):
      reason = text_filter.pos_rejection(analysis, self.config.text)
      if reason is not None:
        yield self._reject(candidate["id"], reason)
        continue
      out = transforms.transform(candidate["alt_text"], analysis, self.config.transform,
                                 self._hypernym)
      if out.num_person_spans:
        self._count("transform/person_spans", out.num_person_spans)
      if out.num_deleted_spans:
        self._count("transform/deleted_spans", out.num_deleted_spans)
      if out.num_hypernymized:
        self._count("transform/hypernymized_spans", out.num_hypernymized)
      tokens = words_lib.caption_tokens(out.caption)
      if not tokens:  # e.g. the whole alt-text was a deleted date span
        yield self._reject(candidate["id"], "transform/empty_caption")
        continue
      record = dict(candidate)
      record["caption"] = out.caption
      record["caption_tokens"] = tokens
      record["person_substituted"] = out.num_person_spans > 0
      yield record
    self._progress(len(batch))


class BundleTokenCountFn(beam.DoFn):
  """Per-bundle token counts: emits (token, count) once per token per bundle.

  Pre-aggregating here keeps the global count (CombinePerKey) cheap: it sees
  each distinct token once per bundle instead of once per occurrence.
  """

  def start_bundle(self):
    self._counts = Counter()

  def process(self, record: dict[str, Any]) -> None:
    self._counts.update(record["caption_tokens"])

  def finish_bundle(self):
    for token, count in self._counts.items():
      yield window.GlobalWindows.windowed_value((token, count))
    self._counts = Counter()


class RareWordFn(_CountingDoFn):
  """Rejects captions holding a corpus-rare token; shapes the kept output record."""

  def process(self, record: dict[str, Any], rare_tokens: frozenset) -> Iterator[Any]:
    if rare_tokens and any(token in rare_tokens for token in record["caption_tokens"]):
      yield self._reject(record["id"], "text/rare_word")
      return
    self._count("kept")
    yield output_record(record)


def output_record(record: dict[str, Any]) -> dict[str, Any]:
  """The kept pair as written: ready to join with image features by id/url/sha256."""
  return {
      "id": record["id"],
      "image_url": record["url"],
      "image_sha256": record["image_sha256"],
      "width": record["width"],
      "height": record["height"],
      "caption": record["caption"],
      "alt_text": record["alt_text"],
      "tags": [{"name": name, "score": float(score)} for name, score in record["tags"]],
      "person_substituted": record["person_substituted"],
  }
