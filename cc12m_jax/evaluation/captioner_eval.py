"""The captioning evaluator: decode an eval source with a Captioner, score it (nocaps protocol).

`CaptionEvaluator` (the 'captioning' entry of evaluation/registry.py) is
built once (the decode function is jit-compiled once) and `run` with new
parameters at every evaluation (cc12m_jax/core/evaluator.py).

Every host runs the same number of eval steps (the eval iterator pads);
decoded tokens and example indices are gathered to every host, padding rows
(example_mask False) are dropped, and each example must be decoded exactly
once, so the prediction set equals the iterator's examples.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from absl import logging

from cc12m_jax.core import evaluator as evaluator_lib
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import eval_pipeline, karpathy
from cc12m_jax.decoding import captioner_decode
from cc12m_jax.evaluation import caption_metrics, nocaps, report as report_lib


class CaptionEvalResult(evaluator_lib.EvalResult):
  """Scores (nocaps protocol), predictions and references of one eval set."""

  def __init__(self, source: str, report: dict[str, Any], predictions: dict[str, str],
               references: nocaps.References):
    self.source = source
    self.report = report                # nocaps.evaluate output (+ timing)
    self.predictions = predictions      # image_id -> best caption
    self.references = references
    self.metrics = nocaps.flatten_scores(report)
    # Records of the eval source the evaluation never saw, by reason.
    self.metrics.update({f"skipped/{reason}": float(count)
                         for reason, count in report.get("num_skipped", {}).items()})

  def write(self, directory: str) -> dict[str, str]:
    return report_lib.write_all(directory, self.predictions, self.references, self.report)

  def summary(self, num_examples: int) -> str:
    text = "(scores x 100)\n" + report_lib.markdown_table(self.report)
    skipped = {k: v for k, v in self.report.get("num_skipped", {}).items() if v}
    if skipped:
      text += ("\nskipped records of the eval source (not scored): "
               + ", ".join(f"{k} {v}" for k, v in skipped.items()) + "\n")
    if num_examples:
      text += report_lib.format_examples(self.predictions, self.references, num_examples) + "\n"
    return text


def decode_eval_set(decode_fn, params: Any, batches: Iterable[Mapping],
                    examples: Sequence[Any], tokenizer: Any,
                    rng: jax.Array | None = None) -> dict[str, str]:
  """{image_id: best caption} for every example of an eval iterator."""
  rng = jax.random.key(0) if rng is None else rng
  predictions: dict[str, str] = {}
  for step, batch in enumerate(batches):
    out = decode_fn(params, batch, jax.random.fold_in(rng, step))
    tokens = evaluator_lib.to_host(out["tokens"])[:, 0]    # [B, L] best hypothesis
    index = evaluator_lib.to_host(batch["example_index"])  # [B]
    mask = evaluator_lib.to_host(batch["example_mask"])    # [B]
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


def metric_names(config: ml_collections.ConfigDict) -> set[str]:
  """Every metric name a CaptionEvaluator's result can hold."""
  groups = nocaps.DOMAINS + (nocaps.OVERALL,)
  return {f"{group}/{metric}" for group in groups for metric in metrics_from_config(config)}


def metrics_from_config(config: ml_collections.ConfigDict) -> tuple[str, ...]:
  """config.eval.metrics as a tuple of caption_metrics names."""
  names = tuple(m.strip() for m in config.eval.metrics.split(",") if m.strip())
  bad = [m for m in names if m not in caption_metrics.ALL_METRICS]
  if bad or not names:
    raise ValueError(f"config.eval.metrics={config.eval.metrics!r}: unknown {bad}; "
                     f"known {caption_metrics.ALL_METRICS}")
  return names


def _karpathy_split(source: str) -> str:
  """The split read from a Karpathy JSON for `source` ('coco_val' -> 'val'; else 'test')."""
  try:
    return karpathy.split_of_source(source)
  except ValueError:
    return "test"


class CaptionEvaluator:
  """Decodes and scores one eval source; `run(params)` at each evaluation.

  Built once (the decode function is jit-compiled once). References come
  from config.eval.references (a COCO, nocaps or Karpathy JSON) or, when
  that is '', from the records' own captions.
  """

  def __init__(self, config: ml_collections.ConfigDict, setup: RunSetup, source: str, *,
               logits_hook=None):
    self.source = source
    self.eval_iterator = eval_pipeline.make_eval_iterator(config.data, source,
                                                          setup.batch_sharding)
    self.tokenizer = self.eval_iterator.tokenizer
    self.decode_fn = captioner_decode.make_decode_fn(setup.model, config.decode,
                                                     logits_hook=logits_hook)
    examples = self.eval_iterator.examples
    self.references = (nocaps.load_references(config.eval.references,
                                              _karpathy_split(source))
                       if config.eval.references else
                       nocaps.references_from_examples(examples, source))
    ids = [str(e.image_id) for e in examples]
    unknown = [i for i in ids if i not in self.references.captions]
    if unknown:
      raise KeyError(f"eval examples of {source!r} not in references "
                     f"{self.references.source!r}: {unknown[:5]} ({len(unknown)} in all)")
    self.metrics = metrics_from_config(config)

  def predict(self, params: Any, rng: jax.Array | None = None) -> dict[str, str]:
    return decode_eval_set(self.decode_fn, params, self.eval_iterator,
                           self.eval_iterator.examples, self.tokenizer, rng)

  def run(self, params: Any, rng: jax.Array | None = None) -> CaptionEvalResult:
    start = time.perf_counter()
    predictions = self.predict(params, rng)
    decode_s = time.perf_counter() - start
    # References the eval set does not cover (e.g. a subset run) are
    # counted in the report, not silently ignored.
    report = nocaps.evaluate(predictions, self.references, metrics=self.metrics,
                             allow_missing=True)
    # Bad records of the source are skipped before they become examples, so
    # nothing above counts them: report them, or the score silently covers
    # fewer images than the source holds. (config.data.strict raises on them.)
    report["num_skipped"] = self.eval_iterator.skip_counts()
    report["decode_seconds"] = decode_s
    report["score_seconds"] = time.perf_counter() - start - decode_s
    skipped = {k: v for k, v in report["num_skipped"].items() if v}
    logging.info("Evaluated %d images of %s (%d records skipped%s): decode %.1fs, scoring %.1fs.",
                 len(predictions), self.source, sum(skipped.values()),
                 "".join(f", {k} {v}" for k, v in skipped.items()), decode_s,
                 report["score_seconds"])
    return CaptionEvalResult(self.source, report, predictions, self.references)
