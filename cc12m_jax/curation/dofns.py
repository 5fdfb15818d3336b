"""The Beam DoFns of the curation pipeline (pipeline.py wires them).

Work is fused into few DoFns because per-element Beam overhead would otherwise
rival spaCy's cost (benchmarks/curation.py):
  ParseFn      one read line / row -> Candidate (candidates.parse_candidate);
  FirstOfIdFn  after a group-by-id: the first record of an id (by file, line)
               is kept, later ones are rejected as input/duplicate_id;
  FilterFn     exclusion + image + surface-text + image-text checks;
  NlpFn        spaCy on batches (`nlp.pipe`), POS checks, transforms;
  RareWordFn   rare-word check against the corpus-wide rare-token set.
Every element leaves each DoFn either on the main output or on REJECTED as
(reason, JSON line of the reject), and bumps a Beam counter named after its
fate (progress in any runner's UI; totals reconcile: input = kept +
rejections). FilterFn also emits NOTED reasons for candidates that passed
only because a missing-data policy let them (config image.missing_*,
image_text.missing_tags).

Hostile input never fails the job: each DoFn catches any exception raised
while handling one element and rejects that element as input/unreadable, with
its id when known, its source (file:line) and the error; the first few per
worker are logged with their traceback (a bug in our code would show there,
and in the counts table, rather than as a failed job).
"""
import json
import logging
import time
from collections import Counter
from typing import Any, Iterable, Iterator, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import window
import ml_collections

from cc12m_jax.curation import candidates as candidates_lib
from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import hypernyms as hypernyms_lib
from cc12m_jax.curation import image_filter
from cc12m_jax.curation import nlp as nlp_lib
from cc12m_jax.curation import shards
from cc12m_jax.curation import tag_overlap
from cc12m_jax.curation import text_filter
from cc12m_jax.curation import transforms
from cc12m_jax.curation import words as words_lib

NAMESPACE = "curation"
REJECTED = "rejected"
NOTED = "noted"
UNREADABLE = "input/unreadable"
_LOGGED_ERRORS_PER_WORKER = 10
_MAX_DETAIL = 500
_MAX_RAW_ID = 1000


def reject_line(reason: str, record_id: Optional[str] = None,
                source: Optional[tuple[str, int]] = None, detail: str = "",
                raw_id: Any = None) -> str:
  """One rejects-*.jsonl line: {"id", "reason", "source", "detail", "raw_id"}.

  "id" is the record's string id, or null when it has none (then "source",
  file:line, finds it). A non-string id is kept as found under "raw_id".
  ASCII-only JSON (ensure_ascii), so even an id with a lone surrogate is
  written, as a \\udXXX escape.
  """
  out = {"id": record_id, "reason": reason}
  if source is not None:
    out["source"] = shards.format_source(source)
  if detail:
    out["detail"] = str(detail)[:_MAX_DETAIL]
  if raw_id is not None:
    try:
      text = json.dumps(raw_id)
      out["raw_id"] = raw_id if len(text) <= _MAX_RAW_ID else text[:_MAX_RAW_ID] + "..."
    except (TypeError, ValueError, RecursionError):
      try:
        out["raw_id"] = repr(raw_id)[:_MAX_RAW_ID]
      except Exception:  # pylint: disable=broad-except
        out["raw_id"] = f"<unprintable {type(raw_id).__name__}>"
  try:
    return json.dumps(out, ensure_ascii=True)
  except (TypeError, ValueError, RecursionError):
    out.pop("raw_id", None)
    return json.dumps(out, ensure_ascii=True, default=repr)


def _error_text(stage: str, err: BaseException) -> str:
  try:
    message = str(err)
  except Exception:  # pylint: disable=broad-except
    message = "<unprintable>"
  return f"{stage}: {type(err).__name__}: {message}"[:_MAX_DETAIL]


class _CountingDoFn(beam.DoFn):
  """Counters created on first use (names depend on the reasons seen)."""

  def __init__(self):
    super().__init__()
    self._counters = {}
    self._logged_errors = 0

  def _count(self, name: str, n: int = 1) -> None:
    counter = self._counters.get(name)
    if counter is None:
      counter = self._counters[name] = Metrics.counter(NAMESPACE, name)
    counter.inc(n)

  def _reject(self, reason: str, record_id: Optional[str] = None,
              source: Optional[tuple[str, int]] = None, detail: str = "",
              raw_id: Any = None) -> beam.pvalue.TaggedOutput:
    line = reject_line(reason, record_id, source, detail, raw_id)
    self._count("rejected/" + reason)
    return beam.pvalue.TaggedOutput(REJECTED, (reason, line))

  def _note(self, note: str) -> beam.pvalue.TaggedOutput:
    self._count("noted/" + note)
    return beam.pvalue.TaggedOutput(NOTED, note)

  def _unreadable(self, stage: str, err: Exception, record_id: Optional[str],
                  source: Optional[tuple[str, int]]) -> beam.pvalue.TaggedOutput:
    """The element that raised, rejected as input/unreadable (logged a few times)."""
    if self._logged_errors < _LOGGED_ERRORS_PER_WORKER:
      self._logged_errors += 1
      logging.warning("curation %s: rejecting %s (%s) as %s", stage, record_id,
                      shards.format_source(source), UNREADABLE, exc_info=err)
    return self._reject(UNREADABLE, record_id, source, _error_text(stage, err))


def _recoverable_id(payload: Any) -> Optional[str]:
  """The record's string id if reading it does not raise too."""
  try:
    return candidates_lib.record_id_of(payload)
  except Exception:  # pylint: disable=broad-except
    return None


def _source_of(record: Any) -> Optional[tuple[str, int]]:
  try:
    source = record.get("source") if isinstance(record, dict) else None
    return tuple(source) if isinstance(source, (tuple, list)) and len(source) == 2 else None
  except Exception:  # pylint: disable=broad-except
    return None


def exclusion_keys(record: dict[str, Any]) -> list[str]:
  """Keys under which a dataset's record excludes candidates of another: id, url, sha256."""
  keys = []
  for field, prefix in (("id", "id:"), ("url", "url:"), ("image_url", "url:"),
                        ("image_sha256", "sha:")):
    value = record.get(field)
    if isinstance(value, str) and value:
      keys.append(prefix + (value.strip() if prefix == "url:" else value))
  return keys


class ParseFn(_CountingDoFn):
  """((path, n), kind, payload) from shards.ReadRecords -> Candidate with its "source"."""

  def process(self, element: Any) -> Iterator[Any]:
    self._count("input")
    source = payload = None
    try:
      source, kind, payload = element
      out = parse_element(payload, kind, source)
      if isinstance(out, candidates_lib.Rejection):
        out = self._reject(out.reason, out.record_id, source, out.detail, out.raw_id)
    except Exception as err:  # pylint: disable=broad-except
      out = self._unreadable("parse", err, _recoverable_id(payload), source)
    yield out


def parse_element(payload: Any, kind: Optional[str],
                  source: Optional[tuple[str, int]]) -> Any:
  """candidates.parse_candidate plus the record's source (path, line or row)."""
  parsed = candidates_lib.parse_candidate(payload, kind)
  if isinstance(parsed, dict):
    parsed["source"] = source
  return parsed


class FirstOfIdFn(_CountingDoFn):
  """(id, candidates) after GroupByKey -> the first by source; the rest rejected.

  Beam has no global order, so "first" is the smallest (path, line or row
  number): the same choice on every runner and every run.
  """

  def process(self, element: tuple[str, Iterable[dict[str, Any]]]) -> Iterator[Any]:
    record_id, group = element
    group = list(group)
    try:
      group.sort(key=lambda c: c["source"] or ("", 0))
    except Exception as err:  # pylint: disable=broad-except
      for candidate in group:
        yield self._unreadable("dedupe", err, record_id, _source_of(candidate))
      return
    yield group[0]
    first = shards.format_source(group[0]["source"])
    for candidate in group[1:]:
      yield self._reject("input/duplicate_id", record_id, _source_of(candidate),
                         f"first seen at {first}" if first else "")


class FilterFn(_CountingDoFn):
  """Candidate -> Candidate, or a rejection (all pre-NLP checks).

  A raw record (a dict or JSON line, not yet parsed) is parsed first, so
  FilterFn alone runs the whole pre-NLP stage on in-memory records (tests,
  benchmarks/curation.py); in the pipeline ParseFn and the id check run first.
  """

  def __init__(self, config: ml_collections.ConfigDict):
    super().__init__()
    self.config = config_lib.frozen(config)

  def process(self, element: Any, excluded: Iterable[str] = ()) -> Iterator[Any]:
    if not (isinstance(element, dict) and isinstance(element.get("source"), tuple)):
      self._count("input")
      try:
        element = parse_element(element, None, None)
      except Exception as err:  # pylint: disable=broad-except
        yield self._unreadable("parse", err, _recoverable_id(element), None)
        return
      if isinstance(element, candidates_lib.Rejection):
        yield self._reject(element.reason, element.record_id, None, element.detail,
                           element.raw_id)
        return
    try:
      outputs = self._check(element, excluded)
    except Exception as err:  # pylint: disable=broad-except
      outputs = [self._unreadable("filter", err, _recoverable_id(element), _source_of(element))]
    yield from outputs

  def _check(self, candidate: dict[str, Any], excluded: Iterable[str]) -> list[Any]:
    record_id, source = candidate["id"], _source_of(candidate)
    if excluded and any(key in excluded for key in exclusion_keys(candidate)):
      return [self._reject("excluded/in_other_dataset", record_id, source)]
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
      return [self._reject(reason, record_id, source)]
    notes = image_filter.image_notes(candidate, self.config.image)
    if candidate["tags"] is None and self.config.image_text.min_tag_overlap > 0:
      notes.append(tag_overlap.NOTE_MISSING_TAGS)
    return [candidate] + [self._note(n) for n in notes]


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
    try:
      analyses = list(nlp_lib.analyze(self._nlp, (c["alt_text"] for c in batch),
                                      self.config.nlp.batch_size))
      if len(analyses) != len(batch):
        raise RuntimeError(f"{len(analyses)} analyses for {len(batch)} texts")
    except Exception:  # pylint: disable=broad-except
      # One text broke the batch: analyse one by one to find it.
      analyses = [self._analyze_one(c) for c in batch]
    for candidate, analysis in zip(batch, analyses):
      try:
        if isinstance(analysis, Exception):
          raise analysis
        out = self._finish(candidate, analysis)
      except Exception as err:  # pylint: disable=broad-except
        out = self._unreadable("nlp", err, _recoverable_id(candidate), _source_of(candidate))
      yield out
    self._progress(len(batch))

  def _analyze_one(self, candidate: dict[str, Any]) -> Any:
    try:
      return nlp_lib.analyze(self._nlp, [candidate["alt_text"]], 1)[0]
    except Exception as err:  # pylint: disable=broad-except
      return err

  def _finish(self, candidate: dict[str, Any], analysis: nlp_lib.Analysis) -> Any:
    """POS checks and transforms of one analysed candidate: the record or a rejection."""
    record_id, source = candidate["id"], _source_of(candidate)
    reason = text_filter.pos_rejection(analysis, self.config.text)
    if reason is not None:
      return self._reject(reason, record_id, source)
    out = transforms.transform(candidate["alt_text"], analysis, self.config.transform,
                               self._hypernym)
    tokens = words_lib.caption_tokens(out.caption)
    if out.num_person_spans:
      self._count("transform/person_spans", out.num_person_spans)
    if out.num_deleted_spans:
      self._count("transform/deleted_spans", out.num_deleted_spans)
    if out.num_hypernymized:
      self._count("transform/hypernymized_spans", out.num_hypernymized)
    if not tokens:  # e.g. the whole alt-text was a deleted date span
      return self._reject("transform/empty_caption", record_id, source)
    record = dict(candidate)
    record["caption"] = out.caption
    record["caption_tokens"] = tokens
    record["person_substituted"] = out.num_person_spans > 0
    return record


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
  """Rejects captions holding a corpus-rare token; shapes and checks the kept record."""

  def process(self, record: dict[str, Any], rare_tokens: frozenset) -> Iterator[Any]:
    try:
      if rare_tokens and any(token in rare_tokens for token in record["caption_tokens"]):
        out = self._reject("text/rare_word", record["id"], _source_of(record))
      else:
        out = output_record(record)
        shards.check_writable(out)
    except Exception as err:  # pylint: disable=broad-except
      out = self._unreadable("output", err, _recoverable_id(record), _source_of(record))
    if isinstance(out, dict):
      self._count("kept")
    yield out


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
      "tags": [{"name": name, "score": float(score)} for name, score in record["tags"] or ()],
      "person_substituted": record["person_substituted"],
  }
