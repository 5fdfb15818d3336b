"""Decode an evaluation set with a Captioner and score it (nocaps protocol).

`CaptionEvaluator` is built once (the decode function is jit-compiled once)
and called with new parameters at every periodic evaluation;
`evaluate_captioner` is the one-shot functional form.

Every host runs the same number of eval steps (the eval iterator pads);
decoded tokens and example indices are gathered to every host, padding rows
(example_mask False) are dropped, and each example must be decoded exactly
once, so the prediction set equals the iterator's examples.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterable, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from absl import logging
from jax.experimental import multihost_utils

from cc12m_jax.decoding import captioner_decode
from cc12m_jax.evaluation import caption_metrics, nocaps


@dataclasses.dataclass
class CaptionEvalResult:
  report: dict[str, Any]           # nocaps.evaluate output (+ timing)
  predictions: dict[str, str]      # image_id -> best caption
  references: nocaps.References


def _to_host(x: jax.Array) -> np.ndarray:
  if jax.process_count() > 1:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(jax.device_get(x))


def decode_eval_set(decode_fn, params: Any, batches: Iterable[Mapping],
                    examples: Sequence[Any], tokenizer: Any,
                    rng: jax.Array | None = None) -> dict[str, str]:
  """{image_id: best caption} for every example of an eval iterator."""
  rng = jax.random.key(0) if rng is None else rng
  predictions: dict[str, str] = {}
  for step, batch in enumerate(batches):
    out = decode_fn(params, batch, jax.random.fold_in(rng, step))
    tokens = _to_host(out["tokens"])[:, 0]            # [B, L] best hypothesis
    index = _to_host(batch["example_index"])          # [B]
    mask = _to_host(batch["example_mask"])            # [B]
    for row in np.flatnonzero(mask):
      i = int(index[row])
      if not 0 <= i < len(examples):
        raise IndexError(f"eval batch {step} row {row}: example_index {i} "
                         f"outside 0..{len(examples) - 1}")
      image_id = str(examples[i].image_id)
      if image_id in predictions:
        raise ValueError(f"image {image_id!r} (example {i}) was decoded "
                         "twice: the eval iterator repeated an example")
      predictions[image_id] = tokenizer.decode(tokens[row])
  missing = len(examples) - len(predictions)
  if missing:
    raise ValueError(f"{missing} of {len(examples)} eval examples were never "
                     "decoded: the eval iterator skipped examples")
  return predictions


class CaptionEvaluator:
  """Decodes and scores one eval set; call with params at each evaluation."""

  def __init__(self, model: Any, decode_cfg: ml_collections.ConfigDict,
               eval_iterator: Any, tokenizer: Any,
               references: nocaps.References | None = None, *,
               metrics: Sequence[str] = caption_metrics.DEFAULT_METRICS,
               logits_hook=None):
    self.decode_fn = captioner_decode.make_decode_fn(
        model, decode_cfg, logits_hook=logits_hook)
    self.eval_iterator = eval_iterator
    self.tokenizer = tokenizer
    source = getattr(eval_iterator, "source", "")
    self.references = (references if references is not None else
                       nocaps.references_from_examples(eval_iterator.examples,
                                                       source))
    ids = [str(e.image_id) for e in eval_iterator.examples]
    unknown = [i for i in ids if i not in self.references.captions]
    if unknown:
      raise KeyError(f"eval examples of {source!r} not in references "
                     f"{self.references.source!r}: {unknown[:5]} "
                     f"({len(unknown)} in all)")
    self.metrics = tuple(metrics)

  def predict(self, params: Any, rng: jax.Array | None = None
              ) -> dict[str, str]:
    return decode_eval_set(self.decode_fn, params, self.eval_iterator,
                           self.eval_iterator.examples, self.tokenizer, rng)

  def __call__(self, params: Any, rng: jax.Array | None = None
               ) -> CaptionEvalResult:
    start = time.perf_counter()
    predictions = self.predict(params, rng)
    decode_s = time.perf_counter() - start
    # References the eval set does not cover (e.g. a subset run) are
    # counted in the report, not silently ignored.
    report = nocaps.evaluate(predictions, self.references,
                             metrics=self.metrics, allow_missing=True)
    report["decode_seconds"] = decode_s
    report["score_seconds"] = time.perf_counter() - start - decode_s
    logging.info("Evaluated %d images: decode %.1fs, scoring %.1fs.",
                 len(predictions), decode_s, report["score_seconds"])
    return CaptionEvalResult(report, predictions, self.references)


def evaluate_captioner(model: Any, params: Any, eval_iterator: Any,
                       tokenizer: Any, references: nocaps.References | None,
                       decode_cfg: ml_collections.ConfigDict, *,
                       metrics: Sequence[str] = caption_metrics.DEFAULT_METRICS,
                       rng: jax.Array | None = None) -> CaptionEvalResult:
  """One-shot: decode every eval example with beam search and score it."""
  evaluator = CaptionEvaluator(model, decode_cfg, eval_iterator, tokenizer,
                               references, metrics=metrics)
  return evaluator(params, rng)
